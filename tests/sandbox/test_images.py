"""Registry-free images: the base answers to its public name; builds are cached by
content and rebuilt when the definition changes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tmax.sandbox.images import (
    BASE_IMAGE_NAME,
    build_podman_image,
    digest_tree,
    ensure_podman_base,
    podman_image_id,
    rootfs_from_podman,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("podman") is None or shutil.which("debootstrap") is None,
        reason="needs root, podman and debootstrap (./setup.sh installs them)",
    ),
]


def test_base_answers_to_the_public_name() -> None:
    image_id = ensure_podman_base()
    assert podman_image_id(BASE_IMAGE_NAME) == image_id
    out = subprocess.run(
        [
            "podman",
            "run",
            "--rm",
            "--network",
            "none",
            "debian:bookworm-slim",
            "cat",
            "/etc/debian_version",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("12.")


def test_builds_are_cached_by_content(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM debian:bookworm-slim\nCOPY note.txt /note.txt\n")
    (context / "note.txt").write_text("first\n")
    first = build_podman_image(context, "tmax-test-cache")
    again = build_podman_image(context, "tmax-test-cache")
    assert again == first
    (context / "note.txt").write_text("second\n")
    changed = build_podman_image(context, "tmax-test-cache")
    assert changed != first
    rootfs = rootfs_from_podman(changed)
    assert (rootfs / "note.txt").read_text() == "second\n"
    assert rootfs_from_podman(changed) == rootfs  # exported once
    subprocess.run(["podman", "rmi", "-f", first, changed], capture_output=True)


def test_digest_covers_names_modes_and_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    before = digest_tree(tmp_path)
    (tmp_path / "a").chmod(0o755)
    assert digest_tree(tmp_path) != before
    (tmp_path / "a").chmod(0o644)
    assert digest_tree(tmp_path) == before
    (tmp_path / "a").rename(tmp_path / "b")
    assert digest_tree(tmp_path) != before
