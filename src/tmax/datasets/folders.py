"""Task folders of a source: plain directories, or directories inside archives
(``.tar.gz``, ``.tgz``, ``.tar``, ``.zip``) that package tasks.

A task folder is recognised by a marker file (``task.toml`` for Harbor,
``task.yaml`` for Terminal-Bench 1.0, ``task.json`` for the native layout). The search
stops descending at a task folder, so a task's own files (``environment/``,
``tests/``, its data) are never mistaken for tasks, and an archive among them is the
task's data: it is never opened here. An archive outside task folders is only listed
while the source is listed (member names, nothing written); it is unpacked when a
task inside it is drawn, once per content, into ``$TMAX_CACHE/datasets/unpacked``.

Third-party sources are messy, so each defect costs one task, never the dataset: an
archive that does not read is one skipped entry, and a task with a member or link
that leaves its folder, or a file over the size limits (``data/conversion.yaml``), is
skipped with the reason when it is drawn.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import posixpath
import tarfile
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from tmax.datasets.base import ConvertContext, SourceTask, TaskSkipped, conversion_data
from tmax.io import built_once, cache_dir

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
UNREADABLE = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    ValueError,
    NotImplementedError,  # a zip compression method Python does not read
)
"""What reading a damaged or mislabelled archive raises."""
MIB = 1 << 20


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def archive_stem(archive: Path) -> str:
    """``task-1.tar.gz`` -> ``task-1``."""
    lower = archive.name.lower()
    suffix = next(s for s in ARCHIVE_SUFFIXES if lower.endswith(s))
    return archive.name[: -len(suffix)]


def size_limits() -> tuple[int, int]:
    """Bytes allowed per file and per task (``limits`` in ``data/conversion.yaml``)."""
    limits = conversion_data()["limits"]
    return int(limits["max_file_mb"]) * MIB, int(limits["max_task_mb"]) * MIB


@dataclass(frozen=True)
class ArchivedTask:
    """A task folder inside an archive; ``folder`` is its member path ("" when the
    archive holds one task's files directly)."""

    archive: Path
    folder: str


# --- listing -----------------------------------------------------------------------------


def _has_marker(folder: Path, markers: Sequence[str]) -> bool:
    return any((folder / marker).is_file() for marker in markers)


def _walk(root: Path, markers: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """The task folders under ``root``, and the archives outside them (hidden and
    ``_``-prefixed folders and linked folders left out)."""
    folders: list[Path] = []
    archives: list[Path] = []

    def visit(directory: Path) -> None:
        if _has_marker(directory, markers):
            folders.append(directory)
            return
        for child in sorted(directory.iterdir()):
            if child.name.startswith("."):
                continue
            if child.is_dir():
                if not child.is_symlink() and not child.name.startswith("_"):
                    visit(child)
            elif is_archive(child) and child.is_file():
                archives.append(child)

    visit(root)
    return folders, archives


def _inside_task(path: Path, root: Path, markers: Sequence[str]) -> bool:
    """Whether ``path`` lies in a task folder at or below ``root``."""
    for parent in path.parents:
        if _has_marker(parent, markers):
            return True
        if parent == root:
            return False
    return False


@dataclass(frozen=True)
class _Member:
    """One archive member, as far as the checks need it."""

    raw: str  # the name as stored
    name: str  # normalised relative POSIX path
    size: int
    is_file: bool
    link: str | None  # a link's target, normalised from the archive's root; None: no link

    @property
    def unsafe(self) -> bool:
        return _leaves(self.raw)


def _leaves(raw_name: str) -> bool:
    """Whether an archive member's stored name points outside the unpacked folder."""
    return raw_name.startswith("/") or ".." in PurePosixPath(raw_name).parts


def _tar_member(info: tarfile.TarInfo) -> _Member:
    name = PurePosixPath(info.name).as_posix()
    link = None
    if info.issym():
        target = info.linkname
        link = target if target.startswith("/") else posixpath.normpath(
            posixpath.join(posixpath.dirname(name), target)
        )  # fmt: skip
    elif info.islnk():
        link = posixpath.normpath(info.linkname)
    return _Member(info.name, name, info.size, info.isfile(), link)


def _members(archive: Path) -> list[_Member]:
    if archive.name.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as bundle:
            return [
                _Member(i.filename, PurePosixPath(i.filename).as_posix(), i.file_size,
                        not i.is_dir(), None)
                for i in bundle.infolist()
            ]  # fmt: skip
    with tarfile.open(archive, mode="r:*") as tar:
        return [_tar_member(info) for info in tar.getmembers()]


def _within(name: str, folder: str) -> bool:
    return folder == "" or name == folder or name.startswith(folder + "/")


def _problem(members: Sequence[_Member], folder: str, label: str) -> TaskSkipped | None:
    """Why the task made of ``members`` (its folder ``folder``) cannot be unpacked
    safely: a name or link that leaves it, or a file over the size limits."""
    max_file, max_task = size_limits()
    total = 0
    for member in members:
        if member.unsafe:
            return TaskSkipped(f"{label}: member {member.raw!r} leaves the archive", "escaping")
        target = member.link
        if target is not None and (
            target.startswith(("/", "../")) or target == ".." or not _within(target, folder)
        ):
            return TaskSkipped(
                f"{label}: link {member.name} -> {target} leaves the task folder", "escaping"
            )
        if member.size > max_file:
            return _oversize(f"{label}: {member.name}", member.size, max_file, "file")
        total += member.size
    if total > max_task:
        return _oversize(label, total, max_task, "task")
    return None


def _oversize(what: str, size: int, limit: int, per: str) -> TaskSkipped:
    return TaskSkipped(
        f"{what}: {size / MIB:.0f} MiB, over the limit of {limit // MIB} MiB per {per}",
        "oversize",
    )


def _archive_tasks(archive: Path, markers: Sequence[str]) -> list[SourceTask]:
    """The tasks packaged in ``archive``, read from its member list alone; one
    skipped entry, named after the archive, when the list cannot be read."""
    try:
        members = _members(archive)
    except UNREADABLE as error:
        reason = f"{archive.name}: not a readable archive ({type(error).__name__}: {error})"
        return [SourceTask(archive_stem(archive), TaskSkipped(reason, "unreadable"))]
    marked = {
        posixpath.dirname(m.name)
        for m in members
        if m.is_file and not m.unsafe and posixpath.basename(m.name) in markers
    }
    folders: list[str] = []
    for folder in sorted(marked, key=lambda f: (len(PurePosixPath(f).parts), f)):
        hidden = any(part.startswith((".", "_")) for part in PurePosixPath(folder).parts)
        # Shallowest first: a task's own subfolders are not tasks.
        if not hidden and not any(_within(folder, outer) for outer in folders):
            folders.append(folder)
    items = []
    for folder in folders:
        # A tarball of one task's files (no folder inside) is named by the tarball.
        original_id = posixpath.basename(folder) if folder else archive_stem(archive)
        own = [m for m in members if _within(m.name, folder)]
        problem = _problem(own, folder, f"{archive.name}:{folder or '.'}")
        items.append(SourceTask(original_id, problem or ArchivedTask(archive, folder)))
    return items


def list_task_folders(context: ConvertContext, markers: Sequence[str]) -> list[SourceTask]:
    """Every task folder of the source, in folders and in archives outside them; the
    id is the folder's name (ids of archived tasks are the same as if they were
    unpacked). Nothing is unpacked: see :func:`task_folder`."""
    source = context.source
    folders: list[Path] = []
    archives: list[Path] = []
    if source.files is None:
        folders, archives = _walk(source.root, markers)
    else:
        for path in source.files:
            if path.is_dir():
                found, packed = _walk(path, markers)
                folders += found
                archives += packed
            elif is_archive(path) and not _inside_task(path, source.root, markers):
                archives.append(path)
    items = [SourceTask(folder.name, folder) for folder in folders]
    for archive in archives:
        items += _archive_tasks(archive, markers)
    return items


# --- one drawn task ----------------------------------------------------------------------


def task_folder(ref: object) -> Path:
    """The folder of a listed task (unpacked first where it is archived), once it
    passed the checks that skip it: no link leaves it, no file over the limits."""
    if isinstance(ref, ArchivedTask):
        root = unpacked(ref.archive)
        folder = root / ref.folder if ref.folder else root
    else:
        folder = Path(str(ref))
    check_folder(folder)
    return folder


def check_folder(folder: Path) -> None:
    """:class:`TaskSkipped` for a link that leaves ``folder`` (or loops) and for a file
    or a folder over the size limits; sizes come from ``lstat``, nothing is read."""
    max_file, max_task = size_limits()
    base = folder.resolve()
    total = 0
    for directory, subfolders, files in os.walk(folder):  # linked folders are not entered
        for name in subfolders + files:
            path = Path(directory) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                try:
                    inside = path.resolve(strict=True).is_relative_to(base)
                except (OSError, RuntimeError):  # dangling or a loop
                    inside = False
                if not inside:
                    raise TaskSkipped(
                        f"{rel}: a link to {os.readlink(path)} leaves the task folder", "escaping"
                    )
            elif name in files:
                size = path.lstat().st_size
                if size > max_file:
                    raise _oversize(rel, size, max_file, "file")
                total += size
    if total > max_task:
        raise _oversize(folder.name, total, max_task, "task")


# --- unpacking ---------------------------------------------------------------------------


def _extract_tar(tar: tarfile.TarFile, dest: Path) -> None:
    """Files and folders only (no links, no devices), none that leave ``dest`` or are
    over the size limit (their tasks are skipped at listing)."""
    max_file, _ = size_limits()
    members = [
        info
        for info in tar.getmembers()
        if (info.isdir() or info.isfile()) and not _leaves(info.name) and info.size <= max_file
    ]  # fmt: skip
    tar.extractall(dest, members=members, filter="data")


def _unpack(archive: Path, dest: Path) -> None:
    if archive.name.lower().endswith(".zip"):
        max_file, _ = size_limits()
        with zipfile.ZipFile(archive) as bundle:
            names = [
                info.filename
                for info in bundle.infolist()
                if info.file_size <= max_file and not _leaves(info.filename)
            ]
            bundle.extractall(dest, members=names)
    else:
        with tarfile.open(archive, mode="r:*") as tar:
            _extract_tar(tar, dest)


def unpack_bytes(data: bytes, dest: Path, label: str) -> None:
    """Unpack one task's (gzipped) tarball held in memory into ``dest``; the task is
    skipped when the tarball does not read, or a member would leave it or is too big."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            problem = _problem([_tar_member(info) for info in tar.getmembers()], "", label)
            if problem is not None:
                raise problem
            _extract_tar(tar, dest)
    except UNREADABLE as error:
        raise TaskSkipped(f"{label}: not a readable tarball ({error})", "unreadable") from None


@cache
def _content_key(path: Path, size: int, mtime_ns: int) -> str:
    """The archive's content hash (memoised per file state: many tasks share one)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def unpacked(archive: Path) -> Path:
    """Where ``archive`` is unpacked: ``$TMAX_CACHE/datasets/unpacked/<content hash>``,
    made once (under a lock, through a temporary directory and a rename);
    :class:`TaskSkipped` when it does not unpack."""
    state = archive.stat()
    key = _content_key(archive.resolve(), state.st_size, state.st_mtime_ns)
    try:
        return built_once(cache_dir() / "datasets" / "unpacked" / key,
                          lambda staging: _unpack(archive, staging))  # fmt: skip
    except UNREADABLE as error:
        raise TaskSkipped(
            f"{archive.name}: cannot unpack ({type(error).__name__}: {error})", "unreadable"
        ) from None
