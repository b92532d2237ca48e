"""Stage entry points for images, called by the Snakemake scripts and the CLI.

Each writes a small JSON manifest (what was built, its content key, how long it
took) as the rule's output; the images themselves live in podman's store or the
cache, keyed by content, so a rerun with an unchanged definition builds nothing.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from tmax.io import write_json
from tmax.sandbox.images import (
    base_rootfs_tarball,
    domain_image,
    ensure_podman_base,
    podman_image_id,
    rootfs_from_podman,
)
from tmax.sandbox.toolbox import ensure_toolbox

log = logging.getLogger("tmax.sandbox")


def write_toolbox_manifest(output: str | Path) -> dict[str, Any]:
    started = time.monotonic()
    path = ensure_toolbox()
    manifest = {"path": str(path), "key": path.name.removeprefix("toolbox-")}
    manifest["seconds"] = round(time.monotonic() - started, 3)
    write_json(output, manifest)
    log.info("toolbox ready at %s", path)
    return manifest


def write_base_manifest(output: str | Path, backend: str) -> dict[str, Any]:
    """The registry-free base (debootstrap) for the chosen sandbox backend."""
    started = time.monotonic()
    if backend == "apptainer":
        from tmax.sandbox.apptainer import base_sif

        manifest: dict[str, Any] = {"image": str(base_sif())}
    else:
        image_id = ensure_podman_base()
        manifest = {"image": "docker.io/library/debian:bookworm-slim", "id": image_id}
        manifest["rootfs_tarball"] = str(base_rootfs_tarball())
    manifest["backend"] = backend
    manifest["seconds"] = round(time.monotonic() - started, 3)
    write_json(output, manifest)
    return manifest


def write_domain_manifest(domain: str, output: str | Path, backend: str) -> dict[str, Any]:
    """One domain's base image, from ``definitions/<domain>/Dockerfile``."""
    started = time.monotonic()
    if backend == "apptainer":
        from tmax.sandbox.apptainer import domain_sif

        manifest: dict[str, Any] = {"image": str(domain_sif(domain))}
    else:
        name = domain_image(domain)
        manifest = {"image": name, "id": podman_image_id(name)}
        if backend == "bwrap":
            manifest["rootfs"] = str(rootfs_from_podman(name))
    manifest.update(domain=domain, backend=backend)
    manifest["seconds"] = round(time.monotonic() - started, 3)
    write_json(output, manifest)
    log.info("%s base image: %s", domain, manifest["image"])
    return manifest
