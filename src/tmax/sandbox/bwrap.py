"""bubblewrap: the fast local backend (a few ms to start).

The image's root file system (a directory) is the read-only lower layer of a
kernel overlay whose upper layer is private to the sandbox, so the agent can change
anything and the image stays untouched. The overlay is mounted inside a private
mount namespace (``unshare -m``): it vanishes with the sandbox even after a crash.
bwrap 0.8 has no overlay options of its own, hence the kernel mount.

As root bwrap keeps every host capability unless told otherwise, so ``--cap-drop
ALL`` is always passed, then the capabilities a podman container's root has (for the
agent's commands and the tests) plus CAP_SYS_ADMIN for the control shell alone, all
inside bwrap's user namespace, which maps only root. Memory, CPU and PID limits come
from a cgroup per sandbox (v1 or v2), joined before bwrap starts.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import time
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
    stop_pasta,
)
from tmax.sandbox.images import rootfs_config, rootfs_from_podman
from tmax.sandbox.storage import mount_script, private_copy, sandbox_root, storage_image
from tmax.sandbox.task_image import (
    apply_steps,
    cached_domain_rootfs,
    domain_base,
    fold_steps,
    layered_image,
    task_image,
)
from tmax.tasks import Task

log = logging.getLogger("tmax.sandbox.bwrap")

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_GROUP = "tmax"
CFS_PERIOD_US = 100_000
CGROUP_REMOVE_SEC = 10.0
"""How long a sandbox's cgroup is tried to be removed while the kernel still calls it busy."""


class Cgroup:
    """One cgroup per sandbox, on a v1 (per-controller) or v2 (unified) hierarchy."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.unified = (CGROUP_ROOT / "cgroup.controllers").exists()
        if self.unified:
            self.dirs = {"unified": CGROUP_ROOT / CGROUP_GROUP / name}
        else:
            self.dirs = {
                c: CGROUP_ROOT / c / CGROUP_GROUP / name
                for c in ("memory", "pids", "cpu")
                if (CGROUP_ROOT / c).is_dir()
            }

    def create(self, limits: Limits) -> None:
        memory = limits.memory_mb * 1024 * 1024
        quota = int(limits.cpus * CFS_PERIOD_US)
        try:
            if self.unified:
                parent = CGROUP_ROOT / CGROUP_GROUP
                parent.mkdir(exist_ok=True)
                (CGROUP_ROOT / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                path = self.dirs["unified"]
                path.mkdir()
                (path / "memory.max").write_text(str(memory))
                (path / "memory.swap.max").write_text("0")
                (path / "pids.max").write_text(str(limits.pids))
                (path / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
                return
            for controller, path in self.dirs.items():
                path.mkdir(parents=True, exist_ok=True)
                if controller == "memory":
                    (path / "memory.limit_in_bytes").write_text(str(memory))
                    swap = path / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        swap.write_text(str(memory))
                elif controller == "pids":
                    (path / "pids.max").write_text(str(limits.pids))
                elif controller == "cpu":
                    (path / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                    (path / "cpu.cfs_quota_us").write_text(str(quota))
            missing = {"memory", "pids", "cpu"} - set(self.dirs)
            if missing:
                raise OSError(f"cgroup controllers not mounted: {', '.join(sorted(missing))}")
        except OSError as error:
            self.remove()
            raise SandboxError(
                f"bwrap needs a writable cgroup hierarchy to enforce limits ({error}); "
                "run as root or use the podman backend"
            ) from None

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.dirs.values():
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def remove(self) -> None:
        """Kill what is left in the cgroup and remove it once the kernel lets it go.
        Polled from 1 ms up: killed processes are usually gone at once, but on a loaded
        machine their exit (and, on v1, the cgroup's release) can take seconds, during
        which removing it fails with EBUSY; it is tried again until
        :data:`CGROUP_REMOVE_SEC` have passed."""
        deadline, pause = time.monotonic() + CGROUP_REMOVE_SEC, 0.001
        left = list(self.dirs.values())
        while True:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            busy: list[tuple[Path, OSError]] = []
            for path in left:
                try:
                    path.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as error:
                    if error.errno == errno.EBUSY:
                        busy.append((path, error))
                    else:
                        log.warning("could not remove cgroup %s: %s", path, error)
            if not busy:
                return
            if time.monotonic() > deadline:
                for path, error in busy:
                    log.warning("could not remove cgroup %s: %s", path, error)
                return
            left = [path for path, _ in busy]
            time.sleep(pause)
            pause = min(2 * pause, 0.05)


AGENT_CAPABILITIES = ("chown", "dac_override", "fowner", "fsetid", "kill", "net_bind_service",
                      "setfcap", "setgid", "setpcap", "setuid", "sys_chroot")  # fmt: skip
"""What a root process of a podman (or Docker) container holds by default, and so what
the agent's commands and the tests hold here too (inside bwrap's user namespace)."""
CONTROL_CAPABILITIES = ("sys_admin", "sys_chroot", "setpcap", "net_admin")
"""The control shell's own on top: it builds the agent's and the verifier's PID, mount
and (for a phase without network) network namespaces, bringing up the loopback of the
last, and lends none of these to them. In bwrap's user namespace CAP_NET_ADMIN reaches no
namespace but the sandbox's own and the ones it makes; the agent's processes, without it,
cannot lift the routes that keep the host's addresses out of reach."""


class BwrapSandbox(Sandbox):
    backend = "bwrap"
    user_mode_network = True

    @classmethod
    def for_task(cls, task_dir: Path, task: Task, limits: Limits, **common: Any) -> BwrapSandbox:
        """A Dockerfile that is a domain base plus simple steps: the base's exported
        root file system, the steps applied at start (no per-task build). Anything else:
        the task's image built with podman, its file system used."""
        layered = layered_image(task_dir)
        if layered is None:
            rootfs = rootfs_from_podman(task_image(task_dir, task))
            env, workdir = rootfs_config(rootfs)
            return cls(rootfs, limits, env=env, workdir=workdir, **common)
        rootfs = domain_base(cached_domain_rootfs, layered.domain)
        env, workdir = fold_steps(layered.steps, *rootfs_config(rootfs))
        box = cls(rootfs, limits, env=env, workdir=workdir, **common)
        box.on_start.append(apply_steps(task_dir, layered.steps))
        return box

    def __init__(
        self,
        image: str | Path,
        limits: Limits | None = None,
        *,
        toolbox: Path,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(str(image), limits, **kwargs)
        self.rootfs = Path(image)
        if not (self.rootfs / "bin").exists() and not (self.rootfs / "usr").exists():
            raise SandboxError(f"bwrap image must be a root file system directory: {self.rootfs}")
        self.toolbox = Path(toolbox)
        self.env = env or {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        self.dir = sandbox_root() / self.sandbox_id
        self.cgroup = Cgroup(self.sandbox_id)
        self.process: subprocess.Popen[bytes] | None = None
        self._limited = False

    def _bwrap_args(self) -> list[str]:
        args = [
            "bwrap",
            "--bind", str(self.dir / "merged"), "/",
            "--ro-bind", str(self.toolbox), TOOLBOX,
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(SESSION_TMPFS_MB * 1024 * 1024), "--perms", "0700",
            "--tmpfs", SESSION_DIR,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--hostname", "sandbox",
            "--chdir", "/",
            "--clearenv",
        ]  # fmt: skip
        for name in sorted({*AGENT_CAPABILITIES, *CONTROL_CAPABILITIES}):
            args += ["--cap-add", f"CAP_{name.upper()}"]
        for key, value in {"HOME": "/root", **self.env}.items():
            args += ["--setenv", key, value]
        return [*args, f"{TOOLBOX}/bin/bash", "--noprofile", "--norc"]

    def _start(self) -> subprocess.Popen[bytes]:
        if shutil.which("bwrap") is None:
            raise SandboxError("bwrap is not installed (./setup.sh installs bubblewrap when root)")
        for sub in ("store", "merged"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        # A plain write: this marker only helps cleanup find the directory.
        marker = {LABEL: self.run_id, "rootfs": str(self.rootfs), "host_pid": os.getpid()}
        (self.dir / "sandbox.json").write_text(json.dumps(marker))
        self.cgroup.create(self.limits)
        # The writable layer lives on a file system of storage_mb (storage.py), mounted
        # in the sandbox's private mount namespace: the mount goes with the sandbox.
        image = storage_image(self.limits.storage_mb, self.backend)
        self._limited = image is not None
        if image is None:
            self.degraded.append(storage.problem or "storage: not limited")
        layer = private_copy(image, self.dir / "store.ext4") if image is not None else None
        mount = mount_script(layer, self.dir / "store", str(self.rootfs), self.dir / "merged")
        inner = f"{mount} && exec {shlex.join(self._bwrap_args())}"
        self.process = subprocess.Popen(
            ["/bin/sh", "-c", self._launcher(inner)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return self.process

    def _launcher(self, inner: str) -> str:
        """A host shell line that joins the sandbox's cgroup, then execs into a private
        mount namespace running ``inner``. Joining in the shell (not a Python
        preexec_fn) lets Python start it with vfork: a fork of a large Python process
        costs tens of milliseconds."""
        join = "".join(
            f"echo $$ > {shlex.quote(str(path / 'cgroup.procs'))} && "
            for path in self.cgroup.dirs.values()
        )
        unshare = ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", inner]
        return f"{join}exec {shlex.join(unshare)}"

    def _anchor_pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _storage_path(self) -> Path | None:
        # the layer is mounted only in the sandbox's mount namespace: reach it there
        anchor = self._anchor_pid()
        if not self._limited or anchor is None:
            return None
        return Path(f"/proc/{anchor}/root") / self.dir.relative_to("/") / "store"

    def agent_capabilities(self) -> list[str]:
        return list(AGENT_CAPABILITIES)

    def _stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        stop_pasta(self.dir / "pasta.pid")
        self.cgroup.remove()
        shutil.rmtree(self.dir, ignore_errors=True)

    @classmethod
    def cleanup(cls, run_id: str | None = None) -> list[str]:
        removed = []
        root = sandbox_root()
        for marker in sorted(root.glob("*/sandbox.json")) if root.exists() else []:
            try:
                owner = json.loads(marker.read_text()).get(LABEL)
            except (OSError, json.JSONDecodeError):
                owner = None
            if run_id is not None and owner != run_id:
                continue
            name = marker.parent.name
            stop_pasta(marker.parent / "pasta.pid")
            Cgroup(name).remove()
            shutil.rmtree(marker.parent, ignore_errors=True)
            removed.append(name)
        if removed:
            log.info("removed %d leftover bwrap sandbox(es)", len(removed))
        return removed
