"""Apptainer definition files (``container.def``) as Dockerfiles.

Endless Terminals and TMAX's own pipeline describe each task's container as an
Apptainer definition. Its common subset has a direct Dockerfile equivalent::

    Bootstrap: docker / From: IMAGE   ->  FROM IMAGE
    %files   SRC [DEST]               ->  COPY SRC DEST   (SRC copied beside the Dockerfile)
    %post    (a shell script)         ->  COPY tmax-post.sh + RUN sh -e tmax-post.sh
    %environment  [export] K=V        ->  ENV K=V         (after RUN: runtime only)

Apptainer runs ``%files`` before ``%post`` and applies ``%environment`` only when the
container runs, and the Dockerfile keeps that order. Anything else that changes the
image (another bootstrap agent, ``%setup`` on the build host, multi-stage builds,
``%environment`` logic beyond assignments) cannot be translated faithfully, and the
task is skipped with the reason instead of being built differently.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tmax.datasets.base import TaskSkipped
from tmax.tasks import TaskFile

POST_SCRIPT = "tmax-post.sh"
IGNORED_SECTIONS = ("runscript", "startscript", "test", "labels", "help")
"""Sections that do not change the image's file system or environment."""

_SECTION = re.compile(r"^%([A-Za-z]+)\b(.*)$")
_ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass
class Definition:
    """A parsed definition: header keys (lower-case) and sections with arguments."""

    header: dict[str, str] = field(default_factory=dict)
    sections: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (args, body)


def parse_definition(text: str) -> Definition:
    """Split a definition into its header and ``%sections``."""
    definition = Definition()
    current: str | None = None
    args = ""
    body: list[str] = []

    def close() -> None:
        if current is not None:
            if current in definition.sections:
                raise TaskSkipped(f"container.def: section %{current} appears twice")
            definition.sections[current] = (args, "\n".join(body).strip("\n"))

    for line in text.splitlines():
        match = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if match:
            close()
            current, args, body = match.group(1).lower(), match.group(2).strip(), []
        elif current is not None:
            body.append(line)
        elif line.strip() and not line.strip().startswith("#"):
            key, sep, value = line.partition(":")
            if not sep:
                raise TaskSkipped(
                    f"container.def: header line {line.strip()!r} is not 'Key: value'"
                )
            if key.strip().lower() in definition.header:
                raise TaskSkipped(f"container.def: header {key.strip()!r} appears twice")
            definition.header[key.strip().lower()] = value.strip()
    close()
    return definition


def _shell(args: str) -> str:
    """The shell of ``%post -c /bin/bash``; Apptainer's default is /bin/sh."""
    words = shlex.split(args)
    if "-c" in words and words.index("-c") + 1 < len(words):
        return words[words.index("-c") + 1]
    return "/bin/sh"


def _files(body: str, context_dir: Path) -> tuple[list[str], dict[str, TaskFile]]:
    """COPY lines and the files they copy, for the lines of ``%files``."""
    steps: list[str] = []
    copied: dict[str, TaskFile] = {}
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        if len(words) > 2:
            raise TaskSkipped(
                f"container.def: %files line {line!r} is not 'SRC [DEST]'", "malformed"
            )
        source = words[0]
        dest = words[1] if len(words) == 2 else "/" + source.lstrip("./")
        if source.startswith("/") or ".." in Path(source).parts or any(c in source for c in "*?["):
            raise TaskSkipped(
                f"container.def: %files source {source!r} is not a plain path inside the task",
                "escaping",
            )
        path = context_dir / source
        if path.is_file():
            found = [path]
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file())
        else:
            raise TaskSkipped(
                f"container.def: %files source {source!r} is not beside the definition", "missing"
            )
        for file in found:
            rel = file.relative_to(context_dir).as_posix()
            copied[rel] = TaskFile(file.read_bytes(), bool(file.stat().st_mode & 0o111))
        steps.append(f"COPY {source.rstrip('/')} {dest}")
    return steps, copied


def _environment(body: str) -> list[str]:
    steps = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _ASSIGNMENT.match(line)
        if not match:
            raise TaskSkipped(f"container.def: %environment line {line!r} is not an assignment")
        steps.append(f"ENV {match.group(1)}={match.group(2)}")
    return steps


def definition_to_dockerfile(text: str, context_dir: Path) -> dict[str, TaskFile]:
    """The ``environment/`` files (``Dockerfile`` and what it copies) equivalent to a
    definition; ``context_dir`` is where its ``%files`` sources are. Raises
    :class:`TaskSkipped` naming the part that has no equivalent."""
    definition = parse_definition(text)
    bootstrap = definition.header.get("bootstrap", "").lower()
    if bootstrap != "docker":
        raise TaskSkipped(
            f"container.def: Bootstrap {bootstrap or '(none)'!r} has no Dockerfile equivalent "
            "(only 'docker' does)"
        )
    image = definition.header.get("from")
    if not image:
        raise TaskSkipped("container.def: no 'From:' image")
    extra = sorted(set(definition.header) - {"bootstrap", "from"})
    if extra:
        raise TaskSkipped(f"container.def: header key(s) {', '.join(extra)} are not supported")
    for name, (args, body) in definition.sections.items():
        if name == "setup" and body.strip():
            raise TaskSkipped("container.def: %setup runs on the build host; no equivalent")
        if name == "files" and args:
            raise TaskSkipped("container.def: %files from another stage is not supported")
        if name not in ("setup", "files", "post", "environment", *IGNORED_SECTIONS):
            raise TaskSkipped(f"container.def: section %{name} is not supported")
    steps = [f"FROM {image}"]
    files: dict[str, TaskFile] = {}
    copy_steps, files = _files(definition.sections.get("files", ("", ""))[1], context_dir)
    steps += copy_steps
    post_args, post = definition.sections.get("post", ("", ""))
    if post.strip():
        files[POST_SCRIPT] = TaskFile((post.rstrip() + "\n").encode("utf-8"))
        shell = _shell(post_args)
        steps.append(f"COPY {POST_SCRIPT} /tmp/{POST_SCRIPT}")
        steps.append(f"RUN {shell} -e /tmp/{POST_SCRIPT} && rm -f /tmp/{POST_SCRIPT}")
    steps += _environment(definition.sections.get("environment", ("", ""))[1])
    if "/home/user" in text:  # the native tasks' home and working directory
        steps.append("WORKDIR /home/user")
    header = "# Converted from the task's Apptainer definition (container.def).\n"
    files["Dockerfile"] = TaskFile((header + "\n".join(steps) + "\n").encode("utf-8"))
    return files
