"""The manual says only what exists: README.md and docs/*.md name real command-line
flags, real config keys and links that resolve.

- Commands (in ``bash``/``sh``/``console``/plain code blocks and in inline code):
  ``tmax ...`` against the argparse parser of :mod:`tmax.cli` (subcommands and their
  flags); ``snakemake ...`` and ``./setup.sh run ...`` against Snakemake's own parser;
  ``./setup.sh test ...`` against pytest's options; ``python path/to/X.py`` and
  ``python -m tmax.X`` / ``tests.X``: the file exists and each ``--flag`` is in its
  source.
- Config keys: inline code ``a.b.c`` (or ``a.b: value``) whose first part is a
  top-level key of ``src/tmax/schemas/config.schema.yaml`` is a path in that schema.
- Links: every relative Markdown link names a file that exists, and a ``#anchor``
  into a Markdown file names one of its headings.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "src" / "tmax" / "schemas" / "config.schema.yaml"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_FENCES = {"", "bash", "sh", "shell", "console"}
FILE_SUFFIXES = {
    "md", "json", "jsonl", "yaml", "yml", "toml", "txt", "html", "parquet",
    "csv", "tex", "png", "pdf", "py", "smk", "sh", "log", "tsv", "def", "sif",
}  # fmt: skip
"""A dotted name ending in one of these is a file (``report.md``), not a config key."""


@dataclass(frozen=True)
class Snippet:
    """One command or inline code span, and where it is."""

    page: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.text}"


def _fenced_and_prose(page: Path) -> Iterator[tuple[int, str, str | None]]:
    """Each line with its number and its code fence's language (None outside fences)."""
    fence: str | None = None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip() if fence is None else None
            continue
        yield number, line, fence


def _inline_code(page: Path) -> Iterator[Snippet]:
    """Inline code spans outside code blocks (a span may wrap onto the next line)."""
    prose: list[tuple[int, str]] = [
        (number, line) for number, line, fence in _fenced_and_prose(page) if fence is None
    ]
    text = "\n".join(line for _, line in prose)
    starts = [0]
    for _, line in prose:
        starts.append(starts[-1] + len(line) + 1)
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        index = next(i for i, start in enumerate(starts) if start > match.start()) - 1
        yield Snippet(page, prose[index][0], " ".join(match.group(1).split()))


def _block_commands(page: Path) -> Iterator[Snippet]:
    """Shell lines of command code blocks, continuation lines joined, comments cut."""
    pending: tuple[int, str] | None = None
    for number, line, fence in _fenced_and_prose(page):
        if fence is None or fence not in COMMAND_FENCES:
            pending = None
            continue
        if fence == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if pending is not None:
            number, line = pending[0], pending[1] + " " + line.strip()
            pending = None
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        yield Snippet(page, number, line.strip())


def _commands() -> list[Snippet]:
    """Every command the pages show: split at ``&&``, ``||``, ``|`` and ``;``."""
    found = []
    for page in PAGES:
        for snippet in [*_block_commands(page), *_inline_code(page)]:
            for part in re.split(r"&&|\|\||\||;", snippet.text):
                part = re.sub(r"(^|\s)#.*$", "", part).strip()
                if part.startswith("$ "):
                    part = part[2:]
                if _program(part):
                    found.append(Snippet(snippet.page, snippet.line, part))
    return found


def _program(command: str) -> str | None:
    """Which checked program a command runs, or None."""
    first = command.split(" ", 1)[0]
    if first in {"tmax", "snakemake", "./setup.sh"}:
        return first
    if re.fullmatch(r"(\S*/)?python3?", first) and re.match(r"\S+ (-m \S+|\S+\.py)", command):
        return "python"
    return None


def _tokens(command: str) -> list[str]:
    try:
        tokens = shlex.split(command)
    except ValueError:  # an unbalanced quote in prose: split on blanks
        tokens = command.split()
    return [token.strip("[]") for token in tokens]


def _flags(tokens: list[str]) -> list[str]:
    """The options a command names (``--x=1`` -> ``--x``); not ``-``, ``--``, numbers."""
    return [
        token.split("=", 1)[0]
        for token in tokens
        if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", token)
    ]


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def tmax_problems(tokens: list[str]) -> list[str]:
    """A ``tmax`` command's unknown subcommands and flags (``tokens`` after ``tmax``)."""
    from tmax.cli import build_parser

    parser = build_parser()
    allowed = _options(parser)
    rest = list(tokens)
    path = ["tmax"]
    while (choices := _subparsers(parser)) and rest:
        token = rest[0]
        if token.startswith("-"):
            rest.pop(0)
            continue
        if token not in choices:
            return [f"unknown subcommand {' '.join(path)} {token!r} (have {sorted(choices)})"]
        parser = choices[rest.pop(0)]
        path.append(token)
        allowed |= _options(parser)
    command = " ".join(path)
    return [f"{command}: unknown flag {flag}" for flag in _flags(tokens) if flag not in allowed]


@cache
def snakemake_options() -> frozenset[str]:
    cli = pytest.importorskip("snakemake.cli")
    return frozenset(_options(cli.get_argument_parser()))


@cache
def pytest_options() -> frozenset[str]:
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout  # fmt: skip
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", shown))


def _python_source(tokens: list[str]) -> tuple[Path | None, list[str]]:
    """The file a ``python X.py`` / ``python -m tmax.X`` command runs (None when it is
    not this repository's, e.g. ``-m pytest``) and the tokens after it."""
    if tokens[1] == "-m":
        module = tokens[2]
        if not module.startswith(("tmax.", "tests.", "benchmarks.", "scripts.")):
            return None, []
        base = ROOT / "src" if module.startswith("tmax.") else ROOT
        stem = base.joinpath(*module.split("."))
        for candidate in (stem.with_suffix(".py"), stem / "__main__.py"):
            if candidate.is_file():
                return candidate, tokens[3:]
        return stem.with_suffix(".py"), tokens[3:]
    return ROOT / tokens[1], tokens[2:]


def command_problems(command: str) -> list[str]:
    """What a command names that does not exist."""
    tokens = _tokens(command)
    program = _program(command)
    if len(tokens) > 1 and tokens[1].endswith(":"):
        return []  # program output ("tmax plan: warning: ..."), not a command
    if program == "tmax":
        return tmax_problems(tokens[1:])
    if program == "snakemake":
        known = snakemake_options()
        return [f"snakemake: unknown flag {flag}" for flag in _flags(tokens) if flag not in known]
    if program == "./setup.sh":
        action = tokens[1] if len(tokens) > 1 else "setup"
        if action not in {"setup", "run", "test"}:
            return [f"./setup.sh: unknown action {action!r} (run, test or nothing)"]
        known = pytest_options() if action == "test" else snakemake_options()
        what = "pytest" if action == "test" else "snakemake"
        return [f"./setup.sh {action}: unknown {what} flag {flag}"
                for flag in _flags(tokens[2:]) if flag not in known]  # fmt: skip
    if program == "python":
        source, rest = _python_source(tokens)
        if source is None:
            return []
        if not source.is_file():
            return [f"no such file {source.relative_to(ROOT)}"]
        text = source.read_text()
        return [
            f"{source.relative_to(ROOT)}: no option {flag}"
            for flag in _flags(rest)
            if flag.startswith("--") and not re.search(rf"[\"']{re.escape(flag)}[\"'=]", text)
        ]
    return []


COMMANDS = _commands()


def test_the_pages_show_commands() -> None:
    """The extraction finds the commands the README is about."""
    shown = {snippet.text for snippet in COMMANDS}
    assert {"./setup.sh run", "./setup.sh test", "snakemake --profile slurm"} <= shown
    assert sum(snippet.text.startswith("tmax ") for snippet in COMMANDS) >= 10


@pytest.mark.parametrize("snippet", COMMANDS, ids=lambda snippet: snippet.where()[:90])
def test_a_command_names_only_flags_that_exist(snippet: Snippet) -> None:
    assert not command_problems(snippet.text), snippet.where()


# --- config keys


@cache
def schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA.read_text())


def _resolve(node: Any) -> list[dict[str, Any]]:
    """A schema node with its ``$ref`` followed and its ``allOf``/``anyOf``/``oneOf``
    branches spread out."""
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        target: Any = schema()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _resolve(target)
    nodes = [node]
    for key in ("allOf", "anyOf", "oneOf"):
        for branch in node.get(key, []):
            nodes += _resolve(branch)
    return nodes


def key_exists(key: str) -> bool:
    """Whether ``a.b.c`` (``models[].rl``, ``rl.remove_*``) is a path in the schema."""
    parts = [part for dotted in key.split(".") for part in re.split(r"(\[\])", dotted) if part]
    nodes = _resolve(schema())
    for part in parts:
        found = []
        for node in nodes:
            if part == "[]":
                found += _resolve(node.get("items"))
                continue
            properties = node.get("properties", {})
            names = fnmatch.filter(properties, part) if "*" in part else [part]
            found += [n for name in names if name in properties for n in _resolve(properties[name])]
            extra = node.get("additionalProperties")
            if extra is True or (node.get("type") == "object" and not properties and extra is None):
                return True  # free-form below here
            if isinstance(extra, dict) and not names:
                found += _resolve(extra)
        if not found:
            return False
        nodes = found
    return True


KEY = re.compile(r"([a-z_][a-z0-9_]*(?:\[\])?(?:\.[a-z_*][a-z0-9_*]*(?:\[\])?)+)(?::\s.*)?")


def _config_keys() -> list[Snippet]:
    top = set(schema()["properties"])
    keys = []
    for page in PAGES:
        for snippet in _inline_code(page):
            match = KEY.fullmatch(snippet.text)
            if not match:
                continue
            key = match.group(1)
            if key.split(".")[0].removesuffix("[]") not in top:
                continue
            if key.rsplit(".", 1)[1] in FILE_SUFFIXES:
                continue  # report.md, labels.json: files
            keys.append(Snippet(page, snippet.line, key))
    return keys


KEYS = _config_keys()


def test_the_pages_name_config_keys() -> None:
    assert len(KEYS) >= 20
    assert key_exists("rl.group_size") and key_exists("models[].rl.learning_rate")
    assert not key_exists("rl.group_sise") and not key_exists("evaluation.sources.x.y.z.w")


@pytest.mark.parametrize("snippet", KEYS, ids=lambda snippet: snippet.where()[:90])
def test_a_config_key_exists(snippet: Snippet) -> None:
    assert key_exists(snippet.text), f"{snippet.where()} is not in {SCHEMA.relative_to(ROOT)}"


# --- links


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {
        _slug(line.lstrip("#"))
        for _, line, fence in _fenced_and_prose(page)
        if fence is None and re.match(r"#{1,6} ", line)
    }


def _links() -> list[Snippet]:
    links = []
    for page in PAGES:
        for number, line, fence in _fenced_and_prose(page):
            if fence is not None:
                continue
            prose = re.sub(r"`[^`]*`", "", line)
            for target in re.findall(r"\]\(([^)\s]+)\)", prose):
                if not re.match(r"[a-z]+:", target):
                    links.append(Snippet(page, number, target))
    return links


LINKS = _links()


def link_problem(snippet: Snippet) -> str | None:
    target, _, anchor = snippet.text.partition("#")
    path = (snippet.page.parent / target).resolve() if target else snippet.page
    if not path.exists():
        return f"no such file {target}"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"no heading #{anchor} in {path.relative_to(ROOT)}"
    return None


def test_the_readme_links_every_docs_page() -> None:
    linked = {s.text.partition("#")[0] for s in LINKS if s.page.name == "README.md"}
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in linked, page.name


@pytest.mark.parametrize("snippet", LINKS, ids=lambda snippet: snippet.where()[:90])
def test_a_relative_link_resolves(snippet: Snippet) -> None:
    assert link_problem(snippet) is None, f"{snippet.where()}: {link_problem(snippet)}"
