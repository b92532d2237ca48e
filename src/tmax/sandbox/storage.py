"""A sandbox's writable layer on a file system of its own size.

The image is the read-only lower layer of a kernel overlay; the upper layer lives on
a sparse ext4 image of ``Limits.storage_mb`` copied per sandbox and loop-mounted, so a
disk bomb ends in ENOSPC inside the sandbox, never on the host's disk, and the host
can see how full the layer is (``Sandbox.exhausted``). bwrap mounts it inside the
sandbox's private mount namespace; rootful podman mounts it on the host and runs the
container on it with ``--rootfs``. Loop devices need root: elsewhere the layer is a
plain directory and the limit is not enforced (one warning per process).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from tmax.io import cache_dir

log = logging.getLogger("tmax.sandbox.storage")

FULL_FRACTION = 0.98
"""A layer this full was filled by its agent (``exhausted`` reports it)."""

_warned = False
problem: str | None = None
"""Why the last :func:`storage_image` call found no image (``Sandbox.degraded``)."""


def sandbox_root() -> Path:
    """Where per-sandbox layers live (marker files make crashes findable)."""
    return Path(os.environ.get("TMAX_SANDBOX_DIR", "/var/tmp/tmax-sandboxes"))


def _warn(backend: str, why: str) -> None:
    global _warned, problem
    problem = f"storage: not limited ({why})"
    if not _warned:
        log.warning("%s sandboxes get no storage limit: %s", backend, why)
        _warned = True


def made_once(path: Path, make: Callable[[Path], str | None]) -> str | None:
    """Make the file ``path`` once: ``make`` writes a temporary beside it (unique, as
    threads and processes race to make it) and returns None, or why it could not; the
    temporary is renamed into place only when made. Returns that reason, or None."""
    if path.is_file():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        failed = make(tmp)
        if failed is None and not tmp.is_file():
            failed = f"{tmp.name} was not written"
        if failed is None:
            os.replace(tmp, path)
        return failed
    finally:
        tmp.unlink(missing_ok=True)


MKFS = ("-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode",
        "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard")  # fmt: skip
"""No journal (a layer dies with its sandbox), no blocks reserved for root or for
growing the file system, inode tables left for the kernel: what mkfs writes is about
150 kB at any size (4 MB with the resize inode), so each sandbox's copy is quick."""


def _mkfs(size_mb: int) -> Callable[[Path], str | None]:
    def make(tmp: Path) -> str | None:
        with open(tmp, "wb") as handle:
            handle.truncate(size_mb * 1024 * 1024)
        made = subprocess.run(["mkfs.ext4", *MKFS, str(tmp)], capture_output=True, text=True)
        return None if made.returncode == 0 else f"mkfs.ext4 failed: {made.stderr.strip()}"

    return make


def storage_image(size_mb: int, backend: str) -> Path | None:
    """An empty ext4 image of ``size_mb`` (sparse, made once per size in the cache), or
    None where this host cannot make or loop-mount one (the limit is then not enforced,
    with a warning naming why)."""
    options = hashlib.sha256(" ".join(MKFS).encode()).hexdigest()[:8]
    path = cache_dir() / "storage" / f"ext4-{size_mb}m-{options}.img"
    if os.geteuid() != 0:
        _warn(backend, "loop-mounting a file system needs root")
        return None
    if path.is_file():
        return path
    if shutil.which("mkfs.ext4") is None:
        _warn(backend, "mkfs.ext4 is missing (apt-get install e2fsprogs)")
        return None
    if not Path("/dev/loop-control").exists():
        _warn(backend, "this host has no loop devices (/dev/loop-control)")
        return None
    failed = made_once(path, _mkfs(size_mb))
    if failed is not None:
        _warn(backend, failed)
        return None
    return path


def private_copy(image: Path, target: Path) -> Path:
    """A sandbox's own copy of the empty file system ``image`` at ``target``: its
    data extents only (the rest stays a hole), copied in the kernel. What ``cp
    --sparse=always`` does, without starting a process."""
    with open(image, "rb") as source, open(target, "wb") as copy:
        size = os.fstat(source.fileno()).st_size
        copy.truncate(size)
        offset = 0
        while offset < size:
            try:
                start = os.lseek(source.fileno(), offset, os.SEEK_DATA)
            except OSError as error:
                if error.errno == errno.ENXIO:  # only a hole past offset
                    break
                raise
            end = os.lseek(source.fileno(), start, os.SEEK_HOLE)
            while start < end:
                copied = os.copy_file_range(
                    source.fileno(), copy.fileno(), end - start, start, start
                )
                if copied <= 0:
                    raise OSError(f"copying {image} to {target} stopped at byte {start}")
                start += copied
            offset = end
    return target


def mount_script(layer: Path | None, store: Path, lower: str, merged: Path) -> str:
    """Shell that mounts the overlay of ``lower`` at ``merged`` with its upper layer in
    ``store``: on the file system ``layer`` (a :func:`private_copy`) when there is one,
    else on whatever file system ``store`` is on."""
    quote = shlex.quote
    dirs = f"mkdir -p {quote(str(store / 'upper'))} {quote(str(store / 'work'))}"
    if layer is not None:
        mount = f"mount -t ext4 -o loop,nosuid,nodev {quote(str(layer))} {quote(str(store))}"
        dirs = f"{mount} && {dirs}"
    options = f"lowerdir={lower},upperdir={store / 'upper'},workdir={store / 'work'}"
    return f"{dirs} && mount -t overlay overlay -o {quote(options)} {quote(str(merged))}"


def fullness(store: Path) -> float | None:
    """The used fraction of the file system at ``store`` (None if it cannot be read)."""
    try:
        stat = os.statvfs(store)
    except OSError:
        return None
    if stat.f_blocks == 0:
        return None
    return 1.0 - stat.f_bavail / stat.f_blocks
