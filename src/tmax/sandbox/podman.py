"""Rootful podman: the workstation and CI backend.

One container per sandbox, kept alive by the toolbox's ``sleep`` as PID 1, with
memory (no swap), CPU and PID limits and no network unless a phase has one (the
phase without one runs in a network namespace of its own: base.py, docs/network.md). The
control shell is a single ``podman exec -i`` of the toolbox's bash; commands then
cost a pipe round trip instead of an exec each.

Storage: as root the container runs (``--rootfs``) on an overlay we mount on the host
whose writable layer is a file system of ``storage_mb`` (storage.py); podman's own
``--storage-opt size`` needs XFS with project quotas, which few hosts have. Without
root the layer is podman's, unlimited (a warning says so).

Host set-up (done by ./setup.sh): runc as the runtime and explicit ulimits in
``/etc/containers/containers.conf.d/`` — crun fails on cgroup-v1-hybrid hosts and
rootful podman otherwise asks for rlimits above the hard limits.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tmax.sandbox import storage
from tmax.sandbox.base import (
    LABEL,
    SESSION_DIR,
    SESSION_TMPFS_MB,
    TOOLBOX,
    Limits,
    Sandbox,
    SandboxError,
    capability_names,
)
from tmax.sandbox.images import podman_image_config, podman_image_settings
from tmax.sandbox.storage import mount_script, private_copy, sandbox_root, storage_image
from tmax.sandbox.task_image import task_image
from tmax.tasks import Task

log = logging.getLogger("tmax.sandbox.podman")


def _workdir() -> Path:
    """The working directory podman commands run in: conmon writes an ``oom`` marker
    into its working directory when a container is OOM-killed, which must not be the
    caller's (a checkout, a results folder)."""
    directory = sandbox_root() / "podman"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, cwd=_workdir()
    )
    if check and result.returncode != 0:
        raise SandboxError(f"podman {args[0]} failed: {result.stderr.strip()[-2000:]}")
    return result


class PodmanSandbox(Sandbox):
    backend = "podman"

    @classmethod
    def for_task(cls, task_dir: Path, task: Task, limits: Limits, **common: Any) -> PodmanSandbox:
        """The task's image built (or its prebuilt one), run with its WORKDIR."""
        image = task_image(task_dir, task)
        _, workdir = podman_image_config(image)
        return cls(image, limits, workdir=workdir, **common)

    def __init__(self, image: str, limits: Limits | None = None, *, toolbox: Path, **kwargs: Any):
        super().__init__(image, limits, **kwargs)
        self.toolbox = Path(toolbox)
        self.container: str | None = None
        self._pid: int | None = None
        self.dir = sandbox_root() / "podman" / self.sandbox_id
        self._layer = False
        self._image_mounted = False

    def _mount_layer(self) -> list[str]:
        """Mount the image under a writable layer of storage_mb and return the ``podman
        run`` arguments that use it (the image's user and environment, which ``--rootfs``
        does not apply itself); [] where the limit cannot be enforced on this host."""
        size_image = storage_image(self.limits.storage_mb, self.backend)
        if size_image is None:
            self.degraded.append(storage.problem or "storage: not limited")
            return []
        settings = podman_image_settings(self.image)
        for sub in ("store", "merged"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        marker = self.dir / "sandbox.json"  # for cleanup only; names the image once mounted
        marker.write_text(json.dumps({LABEL: self.run_id}))
        self._layer = True
        lower = _podman("image", "mount", self.image).stdout.strip()
        self._image_mounted = True  # one reference of podman's count is ours to give back
        marker.write_text(json.dumps({LABEL: self.run_id, "image": self.image}))
        layer = private_copy(size_image, self.dir / "store.ext4")
        script = mount_script(layer, self.dir / "store", lower, self.dir / "merged")
        mounted = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True)
        if mounted.returncode != 0:
            raise SandboxError(f"could not mount the writable layer: {mounted.stderr.strip()}")
        # no --workdir: podman insists it exists, and the session creates and uses it
        args: list[str] = []
        if settings.get("User"):
            args += ["--user", settings["User"]]
        for item in settings.get("Env") or []:
            args += ["--env", item]
        return [*args, "--rootfs", str(self.dir / "merged")]

    def _storage_path(self) -> Path | None:
        return self.dir / "store" if self._layer else None

    def _run_args(self, rootfs: list[str]) -> list[str]:
        limits = self.limits
        return [
            "run",
            "--detach",
            "--name",
            self.sandbox_id,
            "--label",
            f"{LABEL}={self.run_id}",
            "--hostname",
            "sandbox",
            "--network",
            "bridge" if limits.sandbox_network else "none",
            "--memory",
            f"{limits.memory_mb}m",
            "--memory-swap",
            f"{limits.memory_mb}m",
            "--cpus",
            f"{limits.cpus:g}",
            "--pids-limit",
            str(limits.pids),
            "--security-opt",
            "no-new-privileges",
            "--volume",
            f"{self.toolbox}:{TOOLBOX}:ro",
            "--tmpfs",
            f"{SESSION_DIR}:rw,size={SESSION_TMPFS_MB}m,mode=700",
            "--entrypoint",
            f"{TOOLBOX}/bin/sleep",
            *(rootfs or [self.image]),
            "infinity",
        ]

    def _start(self) -> subprocess.Popen[bytes]:
        try:
            result = _podman(*self._run_args(self._mount_layer()), check=False)
        except SandboxError:
            self._stop()
            raise
        if result.returncode != 0:
            self._stop()
            raise SandboxError(f"podman run {self.image} failed: {result.stderr.strip()[-2000:]}")
        self.container = result.stdout.strip()
        return subprocess.Popen(
            [
                "podman",
                "exec",
                "--interactive",
                # all capabilities for the control shell only: it builds the agent's and
                # the verifier's namespaces and gives their processes the container's
                # ordinary set (agent_capabilities)
                "--privileged",
                self.container,
                f"{TOOLBOX}/bin/bash",
                "--noprofile",
                "--norc",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=_workdir(),
        )

    def _anchor_pid(self) -> int | None:
        if self.container is None:
            return None
        if self._pid is None:
            result = _podman("inspect", "--format", "{{.State.Pid}}", self.container, check=False)
            self._pid = int(result.stdout.strip() or 0) or None
        return self._pid

    def agent_capabilities(self) -> list[str]:
        """The container's own set (its init's bounding set), as any process of it has."""
        anchor = self._anchor_pid()
        if anchor is None:
            raise SandboxError(f"container {self.container} has no running init")
        return capability_names(anchor)

    def _stop(self) -> None:
        if self.container is not None or self._layer:
            _podman("rm", "--force", "--time", "0", self.sandbox_id, check=False)
            self.container = None
            self._pid = None
        if self._layer:
            _unmount_layer(self.dir, self.image if self._image_mounted else None)
            self._layer = self._image_mounted = False

    @classmethod
    def cleanup(cls, run_id: str | None = None) -> list[str]:
        label = LABEL if run_id is None else f"{LABEL}={run_id}"
        listed = _podman("ps", "--all", "--quiet", "--filter", f"label={label}", check=False)
        removed = listed.stdout.split()
        if removed:
            _podman("rm", "--force", "--time", "0", *removed, check=False)
            log.info("removed %d leftover podman sandbox(es)", len(removed))
        layers = sandbox_root() / "podman"
        for marker in sorted(layers.glob("*/sandbox.json")) if layers.exists() else []:
            try:
                found = json.loads(marker.read_text())
            except (OSError, json.JSONDecodeError):
                found = {}
            if run_id is None or found.get(LABEL) == run_id:
                _unmount_layer(marker.parent, found.get("image"))
        return removed


def _unmount_layer(directory: Path, image: str | None) -> None:
    """Undo ``_mount_layer`` (whatever part of it was done), container already gone."""
    for sub in ("merged", "store"):  # the loop device goes with its mount (autoclear)
        subprocess.run(["umount", str(directory / sub)], capture_output=True)
    if image:
        _podman("image", "unmount", image, check=False)
    if not any(p.is_mount() for p in (directory / "merged", directory / "store")):
        shutil.rmtree(directory, ignore_errors=True)
    else:
        log.error("%s: the writable layer is still mounted; left in place", directory)
