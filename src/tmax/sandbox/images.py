"""Images without a registry: a debootstrap base, per-domain bases, per-task builds.

Task Dockerfiles start ``FROM`` a public name (``debian:bookworm-slim``), so they
build unchanged under Docker/Harbor elsewhere and under ``apptainer build`` from
``docker://`` on a cluster. Where no registry is reachable (CI, this machine) the
same name is tagged onto a base made locally with debootstrap: nothing is pulled and
nothing in the task changes.

Everything is cached by content hash under ``$TMAX_CACHE`` (rootfs tarballs,
exported root file systems for bwrap) or in podman's store (images carry the hash
in their tag), so an unchanged definition is never rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from tmax.io import cache_dir, file_lock, write_json

log = logging.getLogger("tmax.sandbox.images")

BASE_IMAGE_NAME = "docker.io/library/debian:bookworm-slim"
"""The public name our task Dockerfiles start from; locally it is our debootstrap base."""
DEBIAN_SUITE = "bookworm"
IMAGE_LABEL = "tmax.image"
IMAGE_FORMAT = "1"


class ImageError(RuntimeError):
    """An image could not be built; the message carries the builder's output tail."""


@contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive lock named ``name`` in the cache, shared by parallel jobs."""
    with file_lock(cache_dir() / "locks" / f"{name}.lock"):
        yield


def _run(cmd: Sequence[str], what: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise ImageError(f"{what} failed (exit {result.returncode}): {' '.join(cmd)}\n{tail}")
    return result


def digest_tree(root: Path, extra: str = "") -> str:
    """sha256 over a directory's relative paths, modes and bytes (plus ``extra``)."""
    hasher = hashlib.sha256(extra.encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(root).as_posix()
        hasher.update(rel.encode() + b"\0")
        if path.is_symlink():
            hasher.update(b"L" + os.readlink(path).encode())
        else:
            hasher.update(oct(path.stat().st_mode & 0o111).encode())
            hasher.update(path.read_bytes())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


# --- the debootstrap base ------------------------------------------------------------


def base_rootfs_tarball(suite: str = DEBIAN_SUITE, packages: Sequence[str] = ()) -> Path:
    """A minbase Debian root file system as a tarball, built once per (suite, packages).

    ``debootstrap --variant=minbase`` takes about 2 minutes and needs Debian's
    mirror (a package registry, reachable here); the result is cached.
    """
    key = hashlib.sha256(json.dumps([IMAGE_FORMAT, suite, sorted(packages)]).encode()).hexdigest()
    target = cache_dir() / "rootfs" / f"{suite}-minbase-{key[:12]}.tar"
    if target.exists():
        return target
    with locked(f"rootfs-{key[:12]}"):
        if target.exists():
            return target
        if shutil.which("debootstrap") is None:
            raise ImageError("debootstrap is not installed (./setup.sh installs it when root)")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            rootfs = Path(tmp) / "rootfs"
            cmd = ["debootstrap", "--variant=minbase"]
            if packages:
                cmd.append("--include=" + ",".join(packages))
            log.info("debootstrap %s into %s (about 2 minutes, cached afterwards)", suite, rootfs)
            _run([*cmd, suite, str(rootfs)], "debootstrap")
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for item in (rootfs / junk).glob("*"):
                    if item.is_file():
                        item.unlink()
            # Device nodes cannot be created in user namespaces (apptainer --fakeroot);
            # every runtime mounts its own /dev anyway.
            shutil.rmtree(rootfs / "dev", ignore_errors=True)
            (rootfs / "dev").mkdir()
            partial = Path(tmp) / "rootfs.tar"
            _run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], "tar")
            os.replace(partial, target)
    return target


# --- podman --------------------------------------------------------------------------


def podman_image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name], capture_output=True).returncode == 0


def podman_image_id(name: str) -> str:
    return _run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", name], "inspect"
    ).stdout.strip()


def podman_image_settings(name: str) -> dict[str, Any]:
    """An image's run settings (OCI ``Config``: Env, WorkingDir, User, ...)."""
    found = _run(["podman", "image", "inspect", "--format", "{{json .Config}}", name], "inspect")
    return json.loads(found.stdout) or {}


def podman_image_config(name: str) -> tuple[dict[str, str], str]:
    """An image's environment and working directory (what ``podman run`` would apply)."""
    settings = podman_image_settings(name)
    env = dict(item.split("=", 1) for item in settings.get("Env") or [] if "=" in item)
    return env, settings.get("WorkingDir") or "/"


_known_bases: dict[str, str] = {}


def ensure_podman_base(name: str = BASE_IMAGE_NAME) -> str:
    """Make ``name`` resolvable without a registry: import the debootstrap base under it.

    An image already present under that name (pulled, or imported earlier) is kept.
    The answer is remembered for the process (asking podman costs ~0.1 s).
    """
    if name in _known_bases and podman_image_exists(name):
        return _known_bases[name]
    if podman_image_exists(name):
        _known_bases[name] = podman_image_id(name)
        return _known_bases[name]
    with locked("podman-base"):
        if not podman_image_exists(name):
            tarball = base_rootfs_tarball()
            log.info("importing %s as %s", tarball.name, name)
            with tarball.open("rb") as handle:
                _run(
                    ["podman", "import", "--change", 'CMD ["/bin/bash"]', "-", name],
                    "podman import",
                    stdin=handle,
                )
    return podman_image_id(name)


def definitions_dir() -> Path:
    """The repo's image definitions (per-domain base Dockerfiles)."""
    return Path(str(resources.files("tmax").joinpath("sandbox/definitions")))


def build_podman_image(context: Path, repository: str, dockerfile: Path | None = None) -> str:
    """``podman build`` a context directory, tagged ``repository:<content hash>``.

    The hash covers the context and the resolved base image, so the same definition
    on the same base is built once; returns the image name.
    """
    base_id = ensure_podman_base()
    dockerfile = dockerfile or context / "Dockerfile"
    key = digest_tree(context, extra=base_id + dockerfile.read_text())
    name = f"localhost/{repository}:{key}"
    if podman_image_exists(name):
        return name
    with locked(f"build-{repository}-{key}"):
        if not podman_image_exists(name):
            log.info("building %s", name)
            _run(
                [
                    "podman",
                    "build",
                    "--pull=never",
                    "--label",
                    f"{IMAGE_LABEL}={IMAGE_FORMAT}",
                    "-f",
                    str(dockerfile),
                    "-t",
                    name,
                    str(context),
                ],
                f"podman build of {context}",
            )
    return name


def domain_definition(domain: str) -> Path:
    """The Dockerfile of a domain's base image: ``definitions/<domain>/Dockerfile``,
    or ``definitions/base/Dockerfile`` for a domain without its own."""
    own = definitions_dir() / domain / "Dockerfile"
    return own if own.exists() else definitions_dir() / "base" / "Dockerfile"


def domain_image(domain: str) -> str:
    """The base image of one domain, built from :func:`domain_definition`; also
    tagged ``localhost/tmax-base-<domain>:latest``."""
    name = build_podman_image(domain_definition(domain).parent, f"tmax-base-{domain}")
    _run(["podman", "tag", name, f"localhost/tmax-base-{domain}:latest"], "podman tag")
    return name


# --- root file systems for bwrap -------------------------------------------------------


def rootfs_from_podman(image: str) -> Path:
    """Export a podman image to a directory (cached by image id) for bwrap to use."""
    image_id = podman_image_id(image)
    target = cache_dir() / "rootfs-dirs" / image_id[:16]
    if (target / ".tmax-complete").exists():
        return target
    with locked(f"rootfs-dir-{image_id[:16]}"):
        if (target / ".tmax-complete").exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".export-"))
        container = _run(["podman", "create", image, "true"], "podman create").stdout.strip()
        try:
            export = subprocess.Popen(["podman", "export", container], stdout=subprocess.PIPE)
            assert export.stdout is not None
            with tarfile.open(fileobj=export.stdout, mode="r|") as archive:
                archive.extractall(staging, filter="fully_trusted")
            if export.wait() != 0:
                raise ImageError(f"podman export of {image} failed")
        finally:
            subprocess.run(["podman", "rm", "-f", container], capture_output=True)
        for mount_point in ("opt/tmax", "tests", "logs", "proc", "dev", "tmp"):
            (staging / mount_point).mkdir(parents=True, exist_ok=True)
        env, workdir = podman_image_config(image)
        write_json(
            staging / ".tmax-complete",
            {"image": image, "id": image_id, "env": env, "workdir": workdir},
        )
        os.replace(staging, target)
    return target


def rootfs_config(rootfs: Path) -> tuple[dict[str, str], str]:
    """Environment and working directory recorded when a rootfs was exported."""
    try:
        meta = json.loads((rootfs / ".tmax-complete").read_text())
    except (OSError, json.JSONDecodeError):
        return {}, "/"
    return dict(meta.get("env") or {}), meta.get("workdir") or "/"
