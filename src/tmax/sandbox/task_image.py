"""What a task's ``environment/`` becomes on each backend, and the pieces the backends'
:meth:`~tmax.sandbox.base.Sandbox.for_task` share: the podman image of a task, a
Dockerfile read as a domain base plus simple steps (which bwrap and Apptainer apply at
start instead of building an image), the ENV and WORKDIR those steps leave, and the
toolbox and domain bases looked up once per process."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tmax.sandbox.base import NodeError, Sandbox, SandboxError
from tmax.sandbox.images import (
    ImageError,
    build_podman_image,
    definitions_dir,
    domain_image,
    ensure_podman_base,
    rootfs_from_podman,
)
from tmax.sandbox.toolbox import ensure_toolbox
from tmax.tasks import Task

_T = TypeVar("_T")

_toolbox: Path | None = None


def cached_toolbox() -> Path:
    """The toolbox, looked up once per process (finding its content key runs ldd)."""
    global _toolbox
    if _toolbox is None or not _toolbox.is_dir():
        _toolbox = ensure_toolbox()
    return _toolbox


_domain_images: dict[str, str] = {}


def _cached_domain_image(domain: str) -> str:
    if domain not in _domain_images:
        _domain_images[domain] = domain_image(domain)
    return _domain_images[domain]


_domain_rootfs: dict[str, Path] = {}


def cached_domain_rootfs(domain: str) -> Path:
    """A domain base's exported root file system, looked up once per process."""
    rootfs = _domain_rootfs.get(domain)
    if rootfs is None or not rootfs.is_dir():
        rootfs = _domain_rootfs[domain] = rootfs_from_podman(_cached_domain_image(domain))
    return rootfs


def task_image(task_dir: Path, task: Task) -> str:
    """The podman image of a task: its prebuilt ``docker_image`` or a build of
    ``environment/`` (cached by content hash)."""
    prebuilt = task.config.get("environment", "docker_image")
    if prebuilt:
        ensure_podman_base()  # our tasks' prebuilt name is the local base
        return str(prebuilt)
    return build_podman_image(task_dir / "environment", "tmax-task")


def dockerfile_instructions(text: str) -> list[str]:
    """A Dockerfile's instructions, continuation lines joined, comments dropped."""
    instructions: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        instructions.append(" ".join((pending + line).split()))
        pending = ""
    if pending:
        instructions.append(" ".join(pending.split()))
    return instructions


@dataclass(frozen=True)
class LayeredImage:
    """A task image seen as a domain base plus simple steps (COPY, RUN, WORKDIR, ENV),
    which bwrap can apply at start instead of building an image."""

    domain: str
    steps: tuple[str, ...]


_SIMPLE = ("COPY ", "RUN ", "WORKDIR ", "ENV ")


def layered_image(task_dir: Path) -> LayeredImage | None:
    """Match a task's Dockerfile against the domain definitions (None: no match)."""
    dockerfile = task_dir / "environment" / "Dockerfile"
    if not dockerfile.exists():
        return None
    task_steps = dockerfile_instructions(dockerfile.read_text())
    for definition in sorted(definitions_dir().glob("*/Dockerfile")):
        base = dockerfile_instructions(definition.read_text())
        if task_steps[: len(base)] == base:
            rest = task_steps[len(base) :]
            if all(step.startswith(_SIMPLE) for step in rest):
                return LayeredImage(definition.parent.name, tuple(rest))
    return None


def domain_base(build: Callable[[str], _T], domain: str) -> _T:
    """A domain's base image; one that will not build is the machine's problem (the
    definitions are ours), not the task's: NodeError."""
    try:
        return build(domain)
    except ImageError as error:
        raise NodeError(f"the {domain} base image cannot be built here: {error}") from error


def fold_steps(
    steps: Sequence[str], env: dict[str, str], workdir: str
) -> tuple[dict[str, str], str]:
    """The environment and working directory after ``steps``' ENV and WORKDIR."""
    env = dict(env)
    for step in steps:
        keyword, _, argument = step.partition(" ")
        if keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, argument.strip()))
        elif keyword == "ENV":
            for pair in argument.split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env, workdir


def apply_steps(task_dir: Path, steps: Sequence[str]) -> Callable[[Sandbox], None]:
    """An on-start hook that performs COPY/RUN steps inside a started sandbox."""

    def apply(box: Sandbox) -> None:
        for step in steps:
            keyword, _, argument = step.partition(" ")
            if keyword == "COPY":
                *sources, destination = argument.split()
                for source in sources:
                    box.upload(task_dir / "environment" / source.rstrip("/"), destination)
            elif keyword == "RUN":
                result = box.run(argument, timeout=600)
                if result.exit_code != 0:
                    raise SandboxError(f"image step failed: {step}\n{result.output[-2000:]}")

    return apply
