"""Rootful podman: the workstation and CI backend.

One container per sandbox, kept alive by the toolbox's ``sleep`` as PID 1, with
memory (no swap), CPU and PID limits and no network unless the task allows it. The
control shell is a single ``podman exec -i`` of the toolbox's bash; commands then
cost a pipe round trip instead of an exec each.

Host set-up (done by ./setup.sh): runc as the runtime and explicit ulimits in
``/etc/containers/containers.conf.d/`` — crun fails on cgroup-v1-hybrid hosts and
rootful podman otherwise asks for rlimits above the hard limits.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

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

log = logging.getLogger("tmax.sandbox.podman")


def _podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise SandboxError(f"podman {args[0]} failed: {result.stderr.strip()[-2000:]}")
    return result


class PodmanSandbox(Sandbox):
    backend = "podman"

    def __init__(self, image: str, limits: Limits | None = None, *, toolbox: Path, **kwargs: Any):
        super().__init__(image, limits, **kwargs)
        self.toolbox = Path(toolbox)
        self.container: str | None = None
        self._pid: int | None = None

    def _run_args(self) -> list[str]:
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
            "bridge" if limits.network else "none",
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
            self.image,
            "infinity",
        ]

    def _start(self) -> subprocess.Popen[bytes]:
        result = _podman(*self._run_args(), check=False)
        if result.returncode != 0:
            _podman("rm", "--force", "--time", "0", self.sandbox_id, check=False)
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
        if self.container is not None:
            _podman("rm", "--force", "--time", "0", self.container, check=False)
            self.container = None
            self._pid = None

    @classmethod
    def cleanup(cls, run_id: str | None = None) -> list[str]:
        label = LABEL if run_id is None else f"{LABEL}={run_id}"
        listed = _podman("ps", "--all", "--quiet", "--filter", f"label={label}", check=False)
        removed = listed.stdout.split()
        if removed:
            _podman("rm", "--force", "--time", "0", *removed, check=False)
            log.info("removed %d leftover podman sandbox(es)", len(removed))
        return removed
