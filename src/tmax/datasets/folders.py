"""Task folders of a source: plain directories, or directories inside archives
(``.tar.gz``, ``.tgz``, ``.tar``, ``.zip``) that are unpacked once into the cache.

A task folder is recognised by a marker file (``task.toml`` for Harbor,
``task.yaml`` for Terminal-Bench 1.0, ``task.json`` for the native layout); the
search stops descending at a task folder, so a task's own subfolders are never
mistaken for tasks.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from tmax.datasets.base import ConvertContext, DatasetError, SourceTask, TaskSkipped
from tmax.datasets.sources import visible_files
from tmax.io import cache_dir, file_lock

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _task_dirs(root: Path, markers: Sequence[str]) -> Iterator[Path]:
    if any((root / marker).is_file() for marker in markers):
        yield root
        return
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.is_symlink() and not child.name.startswith((".", "_")):
            yield from _task_dirs(child, markers)


def _safe_members(names: Sequence[str], archive: Path) -> None:
    for name in names:
        parts = PurePosixPath(name).parts
        if name.startswith("/") or ".." in parts:
            raise TaskSkipped(f"{archive.name}: member {name!r} escapes the archive")


def unpack_bytes(data: bytes, dest: Path, label: str) -> None:
    """Unpack a (gzipped) tarball held in memory into ``dest`` (no links, no escapes)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            _extract_tar(tar, dest, Path(label))
    except (tarfile.TarError, EOFError, OSError) as error:
        raise TaskSkipped(f"{label}: not a readable tarball ({error})") from None


def _extract_tar(tar: tarfile.TarFile, dest: Path, archive: Path) -> None:
    members = [m for m in tar.getmembers() if m.isdir() or m.isfile()]  # drop links, devices
    _safe_members([m.name for m in members], archive)
    tar.extractall(dest, members=members, filter="data")


def _unpack(archive: Path, dest: Path) -> None:
    if archive.name.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as bundle:
            _safe_members(bundle.namelist(), archive)
            bundle.extractall(dest)
    else:
        with tarfile.open(archive, mode="r:*") as tar:
            _extract_tar(tar, dest, archive)


def unpacked(archive: Path, name: str) -> Path:
    """Where ``archive`` is unpacked: ``$TMAX_CACHE/datasets/unpacked/<content hash>``,
    made once (under a lock, through a temporary directory and a rename)."""
    digest = hashlib.sha256()
    with archive.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    key = digest.hexdigest()[:16]
    parent = cache_dir() / "datasets" / "unpacked"
    parent.mkdir(parents=True, exist_ok=True)
    target = parent / key
    with file_lock(parent / f".{key}.lock"):
        if not target.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=parent))
            try:
                _unpack(archive, staging)
                os.replace(staging, target)
            except (tarfile.TarError, zipfile.BadZipFile, EOFError, TaskSkipped) as error:
                raise DatasetError(f"dataset {name!r}: cannot unpack {archive}: {error}") from None
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return target


def list_task_folders(context: ConvertContext, markers: Sequence[str]) -> list[SourceTask]:
    """Every task folder of the source, in folders and in archives; the id is the
    folder's name (ids of archived tasks are the same as if they were unpacked)."""
    source = context.source
    items: list[SourceTask] = []
    roots: list[Path] = []
    if source.files is None:
        archives = [p for p in visible_files(source.root) if is_archive(p)]
        roots.append(source.root)
    else:
        archives = [p for p in source.files if is_archive(p)]
        roots.extend(p for p in source.files if p.is_dir())
    for root in roots:
        items += [SourceTask(d.name, d) for d in _task_dirs(root, markers)]
    for archive in archives:
        root = unpacked(archive, context.dataset)
        for folder in _task_dirs(root, markers):
            # A tarball of one task's files (no folder inside) is named by the tarball.
            original_id = archive_stem(archive) if folder == root else folder.name
            items.append(SourceTask(original_id, folder))
    return items


def archive_stem(archive: Path) -> str:
    """``task-1.tar.gz`` -> ``task-1``."""
    lower = archive.name.lower()
    suffix = next(s for s in ARCHIVE_SUFFIXES if lower.endswith(s))
    return archive.name[: -len(suffix)]
