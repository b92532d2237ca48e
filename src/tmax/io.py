"""Atomic writes: a crash never leaves a half-written file that looks complete."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    The temporary file lives in the same directory so the final ``os.replace`` is
    atomic on POSIX file systems. On an exception the temporary file is removed and
    ``path`` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open ``path`` for binary writing through :func:`atomic_path`."""
    with atomic_path(path) as tmp, tmp.open("wb") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def swap_in_directory(tmp: Path, directory: Path) -> None:
    """``tmp`` (a finished folder beside ``directory``) becomes ``directory``; the old one
    is moved aside first and removed only once the new one is in place."""
    old = directory.with_name(f".{directory.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        os.rename(directory, old)
    os.rename(tmp, directory)
    shutil.rmtree(old, ignore_errors=True)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path) as handle:
        handle.write(text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as indented, key-sorted JSON, atomically (stable bytes for caching)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def cache_dir() -> Path:
    """The project's cache of expensive artefacts (``$TMAX_CACHE``, by default
    ``~/.cache/tmax-repro``), created on first use."""
    path = Path(os.environ.get("TMAX_CACHE", Path.home() / ".cache" / "tmax-repro"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, shared by every process (parallel jobs)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def built_once(target: Path, build: Callable[[Path], None]) -> Path:
    """The cached folder ``target``, made once: under a lock beside it, ``build`` fills
    a temporary folder next to it, which is renamed into place, so ``target`` is either
    absent or complete (a crash or an error in ``build`` leaves nothing behind)."""
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    with file_lock(parent / f".{target.name}.lock"):
        if not target.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
            try:
                build(staging)
                os.replace(staging, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return target


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 of a file; of the sorted (name, digest) list for a directory."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(child.relative_to(path)).encode())
            digest.update(file_digest(child).encode())
        return digest.hexdigest()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_pointer(pointer: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """A small JSON naming ``target`` and its sha256: what a workflow job declares as
    its input instead of a file too large for Snakemake's input checksums, so that a
    rewrite with the same content does not rerun it (see rules/common.smk)."""
    write_json(pointer, {"path": str(target), "sha256": file_digest(target)})


def pointer_target(pointer: str | os.PathLike[str]) -> Path:
    """The file or folder a pointer names, unchecked (hashing a model's weights for each
    job that serves them would cost more than the job)."""
    target = Path(json.loads(Path(pointer).read_text())["path"])
    if not target.exists():
        raise FileNotFoundError(f"{pointer} names {target}, which does not exist")
    return target


def read_pointer(pointer: str | os.PathLike[str]) -> Path:
    """What a pointer names, after checking that it still has the recorded content."""
    target = pointer_target(pointer)
    if file_digest(target) != json.loads(Path(pointer).read_text())["sha256"]:
        raise ValueError(
            f"{target} changed after {pointer} was written: rerun the job that writes both"
        )
    return target
