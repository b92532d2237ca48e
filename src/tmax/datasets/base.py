"""What every dataset adapter shares: the error types, the adapter protocol and its
registry, and the small helpers that turn a source's files into our task format.

An adapter reads one published layout. It lists the source's tasks
(:meth:`Adapter.list_tasks`, cheap: ids and where each task lives) and converts one
task at a time (:meth:`Adapter.convert`); :mod:`tmax.datasets.convert` samples the
list and writes the results. A task that cannot be converted raises
:class:`TaskSkipped` with the reason, which lands in the manifest's skip list; a
defect already seen while listing (an unreadable archive, a row that does not parse)
is listed as a task whose ``ref`` is that :class:`TaskSkipped`, drawn like any other
and skipped when drawn, so a broken source shows its broken share in the sample.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import yaml

from tmax.tasks import Task, TaskFile

LAYOUTS = (
    "harbor",
    "parquet_tarballs",
    "tmax15k",
    "terminal_bench_v1",
    "endless_terminals",
    "swe",
    "trajectories",
)
"""Every layout an adapter reads (the config's ``datasets.sources[].layout``)."""


class DatasetError(ValueError):
    """A dataset that cannot be read at all (unreachable source, unknown layout, no
    tasks); the message names the dataset and how to fix it."""


SKIP_KINDS = {
    "unreadable": "a file or archive that cannot be read (not what its name says, truncated)",
    "malformed": "task.toml, task.yaml, task.json or a row that does not parse as its layout",
    "missing": "a file or field the layout requires is absent (instruction, tests, ...)",
    "escaping": "a path or link that leaves the task's folder",
    "oversize": "a file or task over the size limits of data/conversion.yaml",
    "unsupported": "content our task format cannot express (a multi-service compose, ...)",
    "invalid": "the converted task fails our task format's validation",
    "error": "an unforeseen error (the reason names its type)",
}
"""Why a task is skipped, in a few words: the manifest and report count skips by kind."""


class TaskSkipped(Exception):
    """One task that cannot be converted; the message is the reason recorded and
    ``kind`` (a key of :data:`SKIP_KINDS`) what sort of defect it is."""

    def __init__(self, reason: str, kind: str = "unsupported") -> None:
        super().__init__(reason)
        if kind not in SKIP_KINDS:
            raise ValueError(f"unknown skip kind {kind!r}; choose one of {', '.join(SKIP_KINDS)}")
        self.kind = kind


@dataclass(frozen=True)
class ResolvedSource:
    """A dataset source made local: ``root`` is a directory on this machine, ``files``
    the files a ``files:`` glob selected (None: no glob given), ``revision`` what
    exactly was read (a commit sha, a Hub snapshot or a content hash) and
    ``description`` where it came from (written into the manifest)."""

    name: str
    root: Path
    files: tuple[Path, ...] | None
    revision: str
    description: dict[str, Any]


@dataclass(frozen=True)
class SourceTask:
    """One task of a source before conversion: its id in the source, and ``ref``,
    what the adapter needs to find it again (a directory, a row index, …)."""

    original_id: str
    ref: Any


@dataclass
class Converted:
    """One converted task: the instruction always, a Harbor ``task`` when the source
    has environments, and the source's own labels (``metadata``) when it has any."""

    instruction: str
    task: Task | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConvertContext:
    """What an adapter is told about the conversion: the dataset's name, its resolved
    source, the config entry's column names, and a scratch directory."""

    dataset: str
    source: ResolvedSource
    columns: Mapping[str, str]
    scratch: Path


class Adapter(Protocol):
    """Reads one published layout (one module per layout)."""

    layout: str
    has_environments: bool

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        """Every task of the source, in any order (ids need not be unique yet)."""
        ...

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        """One task converted; raises :class:`TaskSkipped` with the reason."""
        ...


_REGISTRY: dict[str, Callable[[], Adapter]] = {}


def register(layout: str) -> Callable[[Callable[[], Adapter]], Callable[[], Adapter]]:
    """Class decorator: make an adapter selectable by its layout name."""

    def decorate(factory: Callable[[], Adapter]) -> Callable[[], Adapter]:
        _REGISTRY[layout] = factory
        return factory

    return decorate


def get_adapter(layout: str) -> Adapter:
    """The adapter of ``layout`` (all adapter modules are imported on first use)."""
    from tmax.datasets import (  # noqa: F401  (each module registers itself)
        endless_terminals,
        harbor,
        parquet_tarballs,
        swe,
        terminal_bench_v1,
        tmax15k,
        trajectories,
    )

    if layout not in _REGISTRY:
        raise DatasetError(f"unknown layout {layout!r}; choose one of: {', '.join(LAYOUTS)}")
    return _REGISTRY[layout]()


# --- helpers shared by the adapters -----------------------------------------------------


@cache
def conversion_data() -> dict[str, Any]:
    """``data/conversion.yaml``: default limits, script templates, image names."""
    text = resources.files("tmax.datasets").joinpath("data/conversion.yaml").read_text()
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def fill(template_name: str, **values: str) -> str:
    """A script template of ``data/conversion.yaml`` with its ``@NAME@`` slots filled."""
    text = str(conversion_data()[template_name])
    for key, value in values.items():
        text = text.replace(f"@{key.upper()}@", value)
    left = sorted(set(re.findall(r"@[A-Z_]+@", text)))
    if left:
        raise ValueError(f"data/conversion.yaml: {template_name}: unfilled {', '.join(left)}")
    return text


def text_file(text: str, executable: bool = False) -> TaskFile:
    return TaskFile(text.encode("utf-8"), executable)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def task_id(original_id: str) -> str:
    """A directory name for a task: the original id where it is one already, else a
    slug of it plus a short hash (so two ids never share a slug)."""
    slug = _UNSAFE.sub("-", original_id).strip("-.")[:80]
    if slug == original_id:
        return slug
    digest = hashlib.sha256(original_id.encode("utf-8")).hexdigest()[:8]
    return f"{slug or 'task'}-{digest}"


def read_tree(root: Path) -> dict[str, TaskFile]:
    """Every file under ``root`` (relative POSIX path -> bytes, executable bit);
    symbolic links are refused, as in a task directory."""
    files: dict[str, TaskFile] = {}
    if not root.is_dir():
        return files
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise TaskSkipped(
                f"{path.relative_to(root.parent)}: symbolic links are not allowed", "escaping"
            )
        if path.is_file():
            executable = bool(path.stat().st_mode & 0o111)
            files[path.relative_to(root).as_posix()] = TaskFile(path.read_bytes(), executable)
    return files


def read_text(path: Path, what: str) -> str:
    """A UTF-8 text file, or :class:`TaskSkipped` naming what is missing."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskSkipped(f"missing {what} ({path.name})", "missing") from None
    except UnicodeDecodeError:
        raise TaskSkipped(f"{what} ({path.name}) is not UTF-8 text", "unreadable") from None


def first_present(row: Mapping[str, Any], candidates: Sequence[str]) -> str | None:
    """The first of ``candidates`` that ``row`` has as a key."""
    return next((name for name in candidates if name in row), None)


def column(columns: Mapping[str, str], key: str, defaults: Sequence[str]) -> tuple[str, ...]:
    """The column names to try for ``key``: the configured one, else the defaults."""
    configured = columns.get(key)
    return (configured,) if configured else tuple(defaults)


def dockerfile_workdir(dockerfile: str, default: str = "/app") -> str:
    """The last ``WORKDIR`` of a Dockerfile (where its commands and tests run)."""
    workdirs = re.findall(r"^\s*WORKDIR\s+(\S+)\s*$", dockerfile, flags=re.MULTILINE | re.I)
    return workdirs[-1] if workdirs else default
