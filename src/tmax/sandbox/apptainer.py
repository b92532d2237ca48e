"""Apptainer (formerly Singularity): the cluster backend.

One Apptainer *instance* per sandbox, started with ``--containall`` (own PID, IPC
and mount namespaces, clean environment, private /tmp and home), the toolbox bound
read-only at ``/opt/tmax``, no network unless a phase has one, no GPU. The control
shell is one ``exec`` of the toolbox's bash into the instance.

Made for a cluster user without root (Apptainer's docs: "User namespaces and
fakeroot", "Persistent overlays", "Limiting container resources with cgroups"):

- ``--fakeroot`` unless we are root: without it the sandbox user is the host user,
  root-owned image files are read-only to it and every verification scores 0. A
  site that forbids it fails the start with a message saying what to ask for.
- The writable layer is an ``--overlay`` on node-local disk (``$TMAX_SANDBOX_DIR``):
  an ext3 image of ``storage_mb`` where ``apptainer overlay create`` works (a full
  disk is then ENOSPC inside the sandbox, and visible to ``exhausted``), a directory
  otherwise. ``--writable-tmpfs`` would hold everything in 64 MiB of memory
  (``sessiondir max size``) and fail without saying so.
- Memory/CPU/PID limits need cgroups v2 delegated to the user (systemd user session)
  unless we are root. ``$TMAX_SANDBOX_LIMITS`` (``sandbox.limits``) decides what
  happens where they cannot be applied: ``require`` fails the start, ``best_effort``
  (default) starts without them, records it in ``degraded`` and enforces memory and
  PID limits itself (:class:`Watch`, a host thread), ``off`` never asks.
- The instance's PID (``instance list --json``) anchors the host's view: its cgroup
  when Apptainer made one for it, else its process tree.

Commands go to a binary named ``singularity`` (the name spython drives and Apptainer
installs as a compatibility alias; ``$TMAX_APPTAINER_BIN`` overrides it). They are
run with :mod:`subprocess` in exactly the argument form spython's ``Client`` uses
(``singularity --quiet instance start OPTIONS IMAGE NAME``), because spython's
wrappers cannot report failures (they log them and carry on), always call
``singularity`` and build with sudo by default. spython's Dockerfile converter is
used for :func:`dockerfile_to_definition`.

Instance names carry the run: ``tmax.sandbox-<run>-<hash of run>-<sandbox>``, so
:meth:`ApptainerSandbox.cleanup` finds a crashed run's instances by name prefix.

Apptainer cannot be installed on Debian 12 (bookworm); use podman or bwrap there.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tmax.io import cache_dir, file_lock, write_text
from tmax.sandbox.base import (
    LABEL,
    TOOLBOX,
    Limits,
    Sandbox,
    SandboxError,
    stop_pasta,
)
from tmax.sandbox.images import BASE_IMAGE_NAME, ImageError, domain_definition
from tmax.sandbox.storage import made_once, private_copy, sandbox_root
from tmax.sandbox.task_image import (
    apply_steps,
    dockerfile_instructions,
    domain_base,
    fold_steps,
    layered_image,
)
from tmax.tasks import Task

log = logging.getLogger("tmax.sandbox.apptainer")

BIN_ENV = "TMAX_APPTAINER_BIN"
DEFAULT_BIN = "singularity"
START_TIMEOUT_SEC = 900.0
"""``instance start`` of a ``docker://`` image first pulls and converts it."""
STOP_TIMEOUT_SEC = 60.0
"""``instance stop`` waits up to 10 s for SIGTERM before it kills."""
BUILD_TIMEOUT_SEC = 3 * 3600.0
KEY_FORMAT = "tmax-apptainer-sif-2"
LIMITS_ENV = "TMAX_SANDBOX_LIMITS"
LIMIT_MODES = ("require", "best_effort", "off")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def apptainer_binary() -> str:
    """The Apptainer command: ``$TMAX_APPTAINER_BIN`` or ``singularity``."""
    return os.environ.get(BIN_ENV) or DEFAULT_BIN


def _missing_binary_message(binary: str) -> str:
    return (
        f"Apptainer is not available: no {binary!r} on PATH (set {BIN_ENV} to the "
        "apptainer/singularity binary). Apptainer cannot be installed on Debian 12 "
        "(bookworm); use the podman or bwrap sandbox backend there."
    )


def _require_binary() -> str:
    binary = apptainer_binary()
    if shutil.which(binary) is None:
        raise SandboxError(_missing_binary_message(binary))
    return binary


def _run(
    args: Sequence[str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run an Apptainer command (``args[0]`` is the binary); never raises on a bad status."""
    try:
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise SandboxError(f"{' '.join(args[:4])} timed out after {timeout:.0f}s") from error
    except OSError as error:  # vanished between which() and exec, or not executable
        raise SandboxError(f"cannot run {args[0]}: {error}") from error


def _tail(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stderr.strip() or result.stdout.strip())[-2000:]


# --- instance names -------------------------------------------------------------------


def _sanitize(text: str) -> str:
    return _NAME_UNSAFE.sub("-", text)


def run_prefix(run_id: str) -> str:
    """The name prefix of every instance of ``run_id``.

    The sanitised run id keeps names readable; the hash of the exact run id makes the
    prefix unambiguous (run ``a`` must not match the instances of run ``a-b``).
    """
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    return f"{LABEL}-{_sanitize(run_id)[:48]}-{digest}-"


def instance_name(run_id: str, sandbox_id: str) -> str:
    """``tmax.sandbox-<run>-<hash>-<sandbox>`` from base.py's ``tmax-<name>-<hex>`` id."""
    return run_prefix(run_id) + _sanitize(sandbox_id.removeprefix("tmax-"))


def _instance_entries(binary: str | None = None) -> list[dict[str, Any]]:
    """This user's running instances as ``instance list --json`` describes them."""
    binary = binary or _require_binary()
    result = _run([binary, "--quiet", "instance", "list", "--json"], timeout=STOP_TIMEOUT_SEC)
    try:
        data = json.loads(result.stdout or "{}")
    except json.JSONDecodeError:
        # Old releases exit 1 with no JSON when there are no instances.
        if result.returncode == 0:
            raise SandboxError(f"instance list printed no JSON: {_tail(result)}") from None
        log.debug("instance list failed (%s): %s", result.returncode, _tail(result))
        return []
    instances = (data.get("instances") or []) if isinstance(data, dict) else []
    return [entry for entry in instances if isinstance(entry, dict)]


def list_instances(binary: str | None = None) -> list[str]:
    """Names of this user's running instances."""
    names = [e.get("instance") or e.get("daemon_name") for e in _instance_entries(binary)]
    return [name for name in names if isinstance(name, str) and name]


def instance_pids(binary: str | None = None) -> dict[str, int]:
    """This user's instances and their host PIDs."""
    return {
        entry["instance"]: entry["pid"]
        for entry in _instance_entries(binary)
        if isinstance(entry.get("instance"), str)
        and isinstance(entry.get("pid"), int)
        and entry["pid"] > 0
    }


def _process_tree(root: int) -> list[int]:
    """``root`` and every process below it (``/proc/*/task/*/children``)."""
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                queue += [int(child) for child in task.read_text().split()]
            except OSError:
                continue
    return sorted(set(found))


_HINTS = (
    (r"fakeroot|subuid|subgid|newuidmap|user namespace",
     "the site does not allow --fakeroot for this user: ask the admins for an entry in "
     "/etc/subuid and /etc/subgid (or `apptainer config fakeroot --add <user>`) and for "
     "unprivileged user namespaces"),
    (r"overlay",
     "the writable overlay could not be mounted: Apptainer >= 1.1 needs fuse2fs and "
     "fuse-overlayfs (or a kernel that allows overlay in user namespaces) for it"),
    (r"cgroup",
     "resource limits need cgroups v2 delegated to users; set sandbox.limits: best_effort"),
)  # fmt: skip


def _explain(result: subprocess.CompletedProcess[str]) -> str:
    """Apptainer's message, with what to ask for where we know the cause."""
    tail = _tail(result)
    hints = [hint for pattern, hint in _HINTS if re.search(pattern, tail, re.IGNORECASE)]
    return tail + "".join(f"\n-> {hint}" for hint in hints[:1])


def _remove_instance_logs(name: str) -> None:
    """Apptainer keeps each instance's stdout/stderr under the home directory
    (``~/.apptainer/instances/logs/<host>/<user>/``) after it stops; at thousands of
    sandboxes a node that fills the home quota."""
    user = getpass.getuser()
    for root in (".apptainer", ".singularity"):
        logs = Path.home() / root / "instances" / "logs" / socket.gethostname() / user
        for suffix in (".out", ".err"):
            (logs / f"{name}{suffix}").unlink(missing_ok=True)


def stop_instance(name: str, binary: str | None = None) -> bool:
    """Stop instance ``name``; True when it is gone (also when it was not running).

    Never raises: this runs while closing and cleaning up.
    """
    binary = binary or apptainer_binary()
    if shutil.which(binary) is None:
        return False
    try:
        result = _run([binary, "--quiet", "instance", "stop", name], timeout=STOP_TIMEOUT_SEC)
    except SandboxError as error:
        log.warning("could not stop apptainer instance %s: %s", name, error)
        return False
    if result.returncode == 0 or re.search(r"no instance", _tail(result), re.IGNORECASE):
        _remove_instance_logs(name)
        return True
    log.warning("apptainer instance stop %s failed: %s", name, _tail(result))
    return False


# --- what this host allows ------------------------------------------------------------


def limits_mode() -> str:
    """``$TMAX_SANDBOX_LIMITS`` (set from ``sandbox.limits``): require, best_effort, off."""
    mode = os.environ.get(LIMITS_ENV) or "best_effort"
    if mode not in LIMIT_MODES:
        raise SandboxError(f"{LIMITS_ENV}={mode!r}: choose one of {', '.join(LIMIT_MODES)}")
    return mode


def cgroup_problem(uid: int | None = None, root: Path = Path("/sys/fs/cgroup")) -> str | None:
    """Why Apptainer could not apply memory/CPU/PID limits for this user (None: it can).

    Root always can. A user needs cgroups v2 with the memory, pids and cpu controllers
    delegated to their systemd user instance, and that instance reachable (a user
    D-Bus session and ``XDG_RUNTIME_DIR``), which batch jobs often lack."""
    uid = os.geteuid() if uid is None else uid
    if uid == 0:
        return None
    if not (root / "cgroup.controllers").exists():
        return "the host uses cgroups v1 (limits for users need cgroups v2)"
    missing = [n for n in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS") if not os.environ.get(n)]
    if missing:
        return f"no systemd user session ({' and '.join(missing)} unset)"
    service = root / "user.slice" / f"user-{uid}.slice" / f"user@{uid}.service"
    try:
        delegated = set((service / "cgroup.controllers").read_text().split())
    except OSError:
        return f"no delegated cgroup for this user ({service})"
    lacking = sorted({"memory", "pids", "cpu"} - delegated)
    if lacking:
        return f"controllers not delegated to the user: {', '.join(lacking)}"
    return None


_overlay_templates: dict[int, Path | None] = {}


def overlay_image(size_mb: int, binary: str) -> Path | None:
    """An empty overlay image of ``size_mb`` (``overlay create --sparse``, made once per
    size in ``$TMAX_SANDBOX_DIR``), or None where this Apptainer cannot make one."""
    if size_mb in _overlay_templates:
        return _overlay_templates[size_mb]
    path = sandbox_root() / "apptainer" / f"overlay-{size_mb}m.img"

    def create(tmp: Path) -> str | None:
        command = [binary, "overlay", "create", "--sparse", "--size", str(size_mb), str(tmp)]
        result = _run(command, timeout=STOP_TIMEOUT_SEC)
        return None if result.returncode == 0 else f"overlay create failed: {_tail(result)}"

    failed = made_once(path, create)
    if failed is not None:
        log.warning("apptainer sandboxes get no storage limit (a directory overlay): %s", failed)
    _overlay_templates[size_mb] = None if failed else path
    return _overlay_templates[size_mb]


# --- the sandbox ----------------------------------------------------------------------


class ApptainerSandbox(Sandbox):
    backend = "apptainer"
    user_mode_network = True
    oom_inside = False  # the host's cgroup tree shows through: OOM counts would be wrong
    own_user_namespace = True  # unprivileged: the namespaces need a user namespace
    checks_node_first = True  # an HPC node may lack what a sandbox needs (preflight.py)

    @classmethod
    def for_task(
        cls, task_dir: Path, task: Task, limits: Limits, **common: Any
    ) -> ApptainerSandbox:
        """A prebuilt image pulled as is; a Dockerfile of the task's own: a SIF of its
        own; a domain base plus simple steps: the domain's SIF (built once, in the images
        stage) and the steps applied at start, as bwrap does: no per-task build, no
        registry on the compute node."""
        prebuilt = task.config.get("environment", "docker_image")
        if prebuilt:  # its WORKDIR is not known without pulling it: the session's default
            return cls(f"docker://{prebuilt}", limits, **common)
        layered = layered_image(task_dir)
        if layered is None:  # a Dockerfile of its own: a SIF of its own (ENV is in it)
            dockerfile = task_dir / "environment" / "Dockerfile"
            _, workdir = fold_steps(dockerfile_instructions(dockerfile.read_text()), {}, "/")
            return cls(str(task_sif(task_dir, task.name)), limits, workdir=workdir, **common)
        base_steps = dockerfile_instructions(domain_definition(layered.domain).read_text())
        _, workdir = fold_steps(base_steps, {}, "/")  # the base's ENV is in the SIF
        env, workdir = fold_steps(layered.steps, {}, workdir)
        image = str(domain_base(domain_sif, layered.domain))
        box = cls(image, limits, env=env, workdir=workdir, **common)
        box.on_start.append(apply_steps(task_dir, layered.steps))
        return box

    def __init__(
        self,
        image: str | Path,
        limits: Limits | None = None,
        *,
        toolbox: Path,
        fakeroot: bool | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(str(image), limits, **kwargs)
        self.toolbox = Path(toolbox).absolute()
        self.fakeroot = os.geteuid() != 0 if fakeroot is None else fakeroot
        """Root inside for a user without root (the default then)."""
        self.env = dict(env or {})
        """Environment of the session beyond the image's (a task's ENV steps)."""
        self.sandbox_id = instance_name(self.run_id, self.sandbox_id)
        self.instance: str | None = None
        self.dir = sandbox_root() / "apptainer" / self.sandbox_id
        self._cgroup_limits = False
        self._overlay_image = False
        self._pid: int | None = None
        self._exec_pid: int | None = None
        self._watch: Watch | None = None
        self.on_start.append(_start_watch)

    def _start_args(self, cgroup_limits: bool = True) -> list[str]:
        """``instance start`` options, image and name (after the global flags)."""
        toolbox = str(self.toolbox)
        if ":" in toolbox or "," in toolbox:
            raise SandboxError(f"toolbox path {toolbox!r} cannot be bound (contains ':' or ',')")
        limits = self.limits
        options = ["--containall", "--no-nv", "--bind", f"{toolbox}:{TOOLBOX}:ro"]
        overlay = self.dir / ("overlay.img" if self._overlay_image else "overlay")
        options += ["--overlay", str(overlay), "--workdir", str(self.dir / "work")]
        # A network namespace of its own always (loopback only); a sandbox with network
        # gets pasta's user-mode networking in it once up (_network_up), never the node's.
        options += ["--net", "--network", "none"]
        if self.fakeroot:
            options.append("--fakeroot")
        if cgroup_limits:
            options += ["--memory", f"{limits.memory_mb}M", "--memory-swap", f"{limits.memory_mb}M"]
            options += ["--cpus", f"{limits.cpus:g}", "--pids-limit", str(limits.pids)]
        return ["instance", "start", *options, self.image, self.sandbox_id]

    def _make_overlay(self, binary: str) -> None:
        """The instance's writable layer on node-local disk: a private sparse copy of an
        overlay image of storage_mb, or a directory where images cannot be made."""
        (self.dir / "work").mkdir(parents=True, exist_ok=True)
        template = overlay_image(self.limits.storage_mb, binary)
        self._overlay_image = template is not None
        if template is None:
            (self.dir / "overlay").mkdir(exist_ok=True)
            self.degraded.append("storage: a directory overlay (overlay images unavailable)")
            return
        try:
            private_copy(template, self.dir / "overlay.img")
        except OSError as error:
            raise SandboxError(f"cannot copy the overlay image: {error}") from None

    def _start(self) -> subprocess.Popen[bytes]:
        binary = _require_binary()
        name = self.sandbox_id
        mode = limits_mode()
        problem = None if mode == "off" else cgroup_problem()
        if problem and mode == "require":
            raise SandboxError(
                f"apptainer cannot apply memory/CPU/PID limits here: {problem}. Ask the "
                "admins to delegate cgroups v2 controllers to users (systemd), or set "
                "sandbox.limits: best_effort"
            )
        self._cgroup_limits = mode != "off" and problem is None
        if problem and mode == "best_effort":
            self.degraded.append(f"memory/CPU/PID limits: {problem}")
        self._make_overlay(binary)
        result = self._instance_start(binary)
        if result.returncode != 0 and self._cgroup_limits and mode == "best_effort":
            tail = _tail(result)
            if re.search(r"cgroup", tail, re.IGNORECASE):  # e.g. "while applying cgroups config"
                self.degraded.append(
                    f"memory/CPU/PID limits: instance start failed with them: {tail}"
                )
                self._cgroup_limits = False
                stop_instance(name, binary)  # whatever the failed start left behind
                result = self._instance_start(binary)
        if result.returncode != 0:
            stop_instance(name, binary)
            raise SandboxError(f"apptainer instance start {self.image} failed: {_explain(result)}")
        self.instance = name
        for what in self.degraded:
            log.warning("%s runs without %s", name, what)
        # --cleanenv: an exec into an instance otherwise inherits the host environment
        # (API keys and tokens of the job) no matter how the instance was started.
        command = [binary, "exec", "--cleanenv"]
        for key, value in self.env.items():
            command += ["--env", f"{key}={value}"]
        command += [f"instance://{name}", f"{TOOLBOX}/bin/bash", "--noprofile", "--norc"]
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError as error:
            self._stop()
            raise SandboxError(f"cannot exec into apptainer instance {name}: {error}") from None
        self._exec_pid = process.pid
        return process

    def _instance_start(self, binary: str) -> subprocess.CompletedProcess[str]:
        args = self._start_args(cgroup_limits=self._cgroup_limits)
        try:
            return _run([binary, "--quiet", *args], timeout=START_TIMEOUT_SEC)
        except SandboxError:
            stop_instance(self.sandbox_id, binary)  # a timed-out start may have left it running
            raise

    def _anchor_pid(self) -> int | None:
        """The instance's PID on the host (``instance list --json``)."""
        if self.instance is not None and self._pid is None:
            with contextlib.suppress(SandboxError):
                self._pid = instance_pids().get(self.instance)
        return self._pid

    def _cgroups(self, controller: str) -> list[Path]:
        # Without limits Apptainer makes no cgroup: the instance sits in the job's own
        # (the trainer's too). Never read or sweep that one as if it were the sandbox's.
        return super()._cgroups(controller) if self._cgroup_limits else []

    def sandbox_pids(self) -> list[int]:
        if self._cgroups("pids"):
            return super().sandbox_pids()
        # the instance's own processes, and those exec'd into it (the control shell,
        # so the agent's too), which on the host descend from the exec, not the init
        roots = [self._anchor_pid(), self._exec_pid]
        return sorted({pid for root in roots if root for pid in _process_tree(root)})

    def oom_kills(self) -> int | None:
        found = super().oom_kills()
        return self._watch.oom_kills if found is None and self._watch else found

    def pids_limit_hits(self) -> int | None:
        found = super().pids_limit_hits()
        return self._watch.pid_hits if found is None and self._watch else found

    def _pids_nearly_full(self) -> bool:
        if self._watch is None:
            return super()._pids_nearly_full()
        return len(self.sandbox_pids()) >= self.limits.pids - 4

    def _stop(self) -> None:
        stop_pasta(self.dir / "pasta.pid")
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self.instance is not None:
            name, self.instance = self.instance, None
            stop_instance(name)
        self._pid = self._exec_pid = None
        shutil.rmtree(self.dir, ignore_errors=True)

    @classmethod
    def cleanup(cls, run_id: str | None = None) -> list[str]:
        binary = apptainer_binary()
        if shutil.which(binary) is None:
            return []  # no Apptainer here, so nothing can be left over
        prefix = f"{LABEL}-" if run_id is None else run_prefix(run_id)
        try:
            leftovers = [name for name in list_instances(binary) if name.startswith(prefix)]
        except SandboxError as error:
            log.warning("could not list apptainer instances: %s", error)
            return []
        removed = [name for name in leftovers if stop_instance(name, binary)]
        layers = sandbox_root() / "apptainer"
        for directory in layers.glob(f"{prefix}*") if layers.is_dir() else []:
            if directory.name not in leftovers or directory.name in removed:
                stop_pasta(directory / "pasta.pid")
                shutil.rmtree(directory, ignore_errors=True)  # its writable layer
        if removed:
            log.info("stopped %d leftover apptainer sandbox(es)", len(removed))
        return removed


class Watch:
    """Our own memory and PID limits for a sandbox that runs without cgroups
    (``best_effort``): a host thread sums its processes' resident memory and counts
    them a few times a second. Over the memory limit the largest process is killed
    (as the OOM killer would) and counted as an OOM kill; over the PID limit every
    process but the sandbox's own is killed and counted as a PID-limit hit. The
    episode then ends as it would under cgroups. Coarser than a cgroup (a burst
    between two looks is not seen, shared pages count once per process)."""

    PERIOD_SEC = 0.2

    def __init__(self, box: ApptainerSandbox) -> None:
        self.box = box
        self.oom_kills = 0
        self.pid_hits = 0
        self._stopped = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._thread = threading.Thread(target=self._loop, name=f"watch-{box.sandbox_id}")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _rss(self, pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * self._page
        except (OSError, IndexError, ValueError):
            return 0

    def _loop(self) -> None:
        limits = self.box.limits
        while not self._stopped.wait(self.PERIOD_SEC):
            protected = {*self.box._protected, self.box._control_pid}
            pids = [pid for pid in self.box.sandbox_pids() if pid not in protected]
            if len(pids) + len(protected) > limits.pids:
                self.pid_hits += 1
                log.warning("%s: over its PID limit (%d)", self.box.sandbox_id, limits.pids)
                self.box.reap()
                continue
            sizes = {pid: self._rss(pid) for pid in pids}
            if sizes and sum(sizes.values()) > limits.memory_mb * 1024 * 1024:
                victim = max(sizes, key=sizes.__getitem__)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
                    self.oom_kills += 1
                    log.warning("%s: over its memory limit (%d MB): killed %d",
                                self.box.sandbox_id, limits.memory_mb, victim)  # fmt: skip


def _start_watch(box: Sandbox) -> None:
    """An on-start hook: the sandbox's own limits where cgroups could not apply them."""
    if isinstance(box, ApptainerSandbox) and not box._cgroups("pids") and limits_mode() != "off":
        box._watch = Watch(box)


# --- images ---------------------------------------------------------------------------

_COPY_LINE = re.compile(r"^(\s*)(COPY|ADD)(\s+)(.*)$", re.IGNORECASE)
_WORKDIR_LINE = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE)
_FROM_LINE = re.compile(r"^\s*FROM\s", re.IGNORECASE | re.MULTILINE)
_DROPPED_FLAG = re.compile(r"--(chown|chmod|link)(=\S*)?$")


def _prepare_dockerfile(text: str, context: Path | None = None) -> str:
    """Fix what spython's converter gets wrong in COPY/ADD lines.

    ``--chown``/``--chmod``/``--link`` would become source paths in ``%files``
    (Apptainer copies as the building user; there is no equivalent), and a relative
    destination is relative to the current WORKDIR in Docker but to ``/`` in
    ``%files``, so it is made absolute here. Docker copies a directory's *contents*;
    ``%files`` runs ``cp -fLr SRC DST`` after creating DST when it ends in ``/``
    (Apptainer's internal/pkg/build/files/copy.go), which puts ``app/`` at
    ``/app/app``; a directory source (one ending in ``/``, or a directory in
    ``context``) becomes ``SRC/.``, which cp copies the contents of.
    """
    lines = []
    workdir = "/"
    continued = False
    for line in text.splitlines():
        match = None if continued else _COPY_LINE.match(line)
        if _FROM_LINE.match(line) and not continued:
            workdir = "/"
        elif (wd := _WORKDIR_LINE.match(line)) and not continued:
            workdir = posixpath.normpath(posixpath.join(workdir, wd.group(1)))
        elif match and not match.group(4).lstrip().startswith("[") and "\\" not in line:
            indent, verb, space, rest = match.groups()
            words = rest.split()
            dropped = [w for w in words if _DROPPED_FLAG.match(w)]
            words = [w for w in words if w not in dropped]
            if dropped:
                log.debug("dropping %s from %s (no Apptainer equivalent)", dropped, verb)
            for index, word in enumerate(words[:-1]):
                is_dir = context is not None and (context / word).is_dir()
                if not word.startswith("-") and (word.endswith("/") or is_dir):
                    words[index] = word.rstrip("/") + "/."
            if len(words) >= 2 and not words[-1].startswith("/"):
                dest = words[-1]
                absolute = posixpath.normpath(posixpath.join(workdir, dest))
                if dest.endswith(("/", ".")):
                    absolute = absolute.rstrip("/") + "/"
                words[-1] = absolute
            line = f"{indent}{verb}{space}{' '.join(words)}"
        continued = line.rstrip().endswith("\\")
        lines.append(line)
    return "\n".join(lines) + "\n"


def _bootstrap(base: str | Path) -> tuple[str, str]:
    """``(Bootstrap, From)`` for ``base``: a URI, a local image path or a registry name."""
    text = str(base)
    scheme, sep, rest = text.partition("://")
    if sep:
        return scheme, rest
    if isinstance(base, Path) or text.endswith(".sif") or text.startswith(("/", "./", "../")):
        return "localimage", str(Path(text).absolute())
    return "docker", text


def _drop_section(definition: str, section: str) -> str:
    """Remove ``%section`` (up to the next ``%`` header) from a definition."""
    out: list[str] = []
    skipping = False
    for line in definition.splitlines():
        if line.startswith("%"):
            skipping = line.split()[0] == f"%{section}"
        if not skipping:
            out.append(line)
    return "\n".join(out)


def dockerfile_to_definition(
    dockerfile_text: str, base: str | Path | None = None, context: Path | None = None
) -> str:
    """Convert a task Dockerfile to an Apptainer definition with spython's converter.

    ``base`` replaces every stage's ``FROM`` image: a ``.sif`` or other path becomes
    ``Bootstrap: localimage``, a URI (``docker://``, ``oras://``, ...) bootstraps from
    its scheme, a bare name from Docker. ``ENV`` values are exported in ``%post`` (as
    Docker exports them to later ``RUN`` steps), and ``%startscript`` is left out so
    that, as under podman, an instance runs no image service on its own.

    ``context`` (the build context) tells which COPY sources are directories.

    Known limits of the conversion: ``%files`` runs before ``%post`` whatever the
    Dockerfile order, and JSON-form ``COPY ["a", "b"]`` is not understood.
    """
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter

    with tempfile.TemporaryDirectory(prefix="tmax-dockerfile-") as tmp:
        path = Path(tmp) / "Dockerfile"
        path.write_text(_prepare_dockerfile(dockerfile_text, context))
        try:
            recipes = DockerParser(str(path)).recipe
        except SystemExit:  # spython's bot.exit()
            raise ValueError("spython could not parse the Dockerfile") from None
    for stage, recipe in recipes.items():
        if recipe.fromHeader is None:
            raise ValueError(f"Dockerfile stage {stage!r} has no FROM")
        exported = set(recipe.environ)
        recipe.install = [f"export {x}" if x in exported else x for x in recipe.install]
    try:
        definition = SingularityWriter(recipes).convert()
    except SystemExit:
        raise ValueError("spython could not convert the Dockerfile") from None
    definition = _drop_section(definition, "startscript")
    if base is not None:
        bootstrap, source = _bootstrap(base)
        definition = re.sub(
            r"^Bootstrap: docker\nFrom: .*$",
            lambda _: f"Bootstrap: {bootstrap}\nFrom: {source}",
            definition,
            flags=re.MULTILINE,
        )
    return definition.rstrip("\n") + "\n"


def sif_dir() -> Path:
    """Where SIF images go: ``$TMAX_SIF_DIR``, else ``sif/`` in the project cache. On a
    cluster point it at scratch (a SIF is ~130 MB; home quotas are small)."""
    return Path(os.environ.get("TMAX_SIF_DIR") or cache_dir() / "sif")


def base_sif() -> Path:
    """``debian:bookworm-slim`` as a SIF: the one registry pull, made once; every image
    whose Dockerfile starts from it is built on this file (``Bootstrap: localimage``)."""
    context = sif_dir() / "base-context"  # empty: the build copies nothing in
    context.mkdir(parents=True, exist_ok=True)
    definition = f"Bootstrap: docker\nFrom: {BASE_IMAGE_NAME.removeprefix('docker.io/')}\n"
    return build_sif(definition, context, sif_dir() / "debian-bookworm-slim.sif")


_FROM_BASE = re.compile(
    rf"^\s*FROM\s+(docker\.io/)?(library/)?{re.escape(BASE_IMAGE_NAME.rsplit('/', 1)[-1])}\s*$",
    re.IGNORECASE | re.MULTILINE,
)


def _definition(dockerfile: Path) -> str:
    """A Dockerfile as a definition, on :func:`base_sif` when it starts from it."""
    text = dockerfile.read_text()
    single_stage = len(_FROM_LINE.findall(text)) == 1
    base = base_sif() if single_stage and _FROM_BASE.search(text) else None
    return dockerfile_to_definition(text, base=base, context=dockerfile.parent)


def domain_sif(domain: str) -> Path:
    """A domain's base image as a SIF, built once (content-keyed): the images stage
    builds it where the network is; episodes on compute nodes only find it."""
    dockerfile = domain_definition(domain)
    return build_sif(_definition(dockerfile), dockerfile.parent, sif_dir() / f"base-{domain}.sif")


def task_sif(task_dir: Path, name: str) -> Path:
    """The SIF of a task whose Dockerfile is not a domain base plus simple steps."""
    dockerfile = Path(task_dir) / "environment" / "Dockerfile"
    output = sif_dir() / f"{_sanitize(name)}.sif"  # a task name may hold / or ..
    return build_sif(_definition(dockerfile), dockerfile.parent, output)


def _hash_tree(digest: Any, root: Path, skip: Path | None) -> None:
    """Paths, kinds, modes and contents under ``root``; ``skip`` and the files
    :func:`build_sif` keeps beside it (key, lock, temporaries) are left out."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted([*dirnames, *filenames]):
            path = Path(dirpath, name)
            own = (skip.name, f".{skip.name}.", f"{skip.stem}.sif.") if skip else ()
            if skip is not None and path.parent == skip.parent and name.startswith(own):
                dirnames[:] = [d for d in dirnames if d != name]
                continue
            rel = path.relative_to(root).as_posix().encode()
            if path.is_symlink():
                digest.update(b"L\0" + rel + b"\0" + os.readlink(path).encode() + b"\0")
            elif path.is_dir():
                digest.update(b"D\0" + rel + b"\0")
            elif not path.is_file():  # a FIFO or socket: never open it
                digest.update(b"O\0" + rel + b"\0")
            else:
                mode = b"x" if os.access(path, os.X_OK) else b"-"
                digest.update(b"F\0" + rel + b"\0" + mode + b"\0")
                with path.open("rb") as handle:
                    for chunk in iter(lambda h=handle: h.read(1 << 20), b""):
                        digest.update(chunk)
                digest.update(b"\0")


def definition_key(definition: str, context_dir: Path, output: Path | None = None) -> str:
    """sha256 of the definition and every file in the build context.

    ``output`` (when it lies in the context) and the files kept beside it are left out.
    A ``Bootstrap: localimage`` base counts too (its own ``.sif.key`` when it was made
    by :func:`build_sif`, else its size and mtime), so a rebuilt base rebuilds its
    children.
    """
    digest = hashlib.sha256(f"{KEY_FORMAT}\0".encode())
    digest.update(definition.encode() + b"\0")
    _hash_tree(digest, Path(context_dir), output)
    for source in re.findall(r"^Bootstrap: localimage\nFrom: (.+)$", definition, re.MULTILINE):
        base = Path(source.strip())
        base_key = base.with_suffix(".sif.key")
        if base_key.is_file():
            digest.update(b"B\0" + base_key.read_bytes())
        elif base.exists():
            stat = base.stat()
            digest.update(f"S\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _read_key(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def build_sif(definition: str, context_dir: Path, output: Path, fakeroot: bool = False) -> Path:
    """Build ``output`` from ``definition`` with ``singularity build``, unless it is current.

    ``output`` is current when the sidecar ``<output>.sif.key`` holds
    :func:`definition_key`. The build runs in ``context_dir`` (relative ``%files``
    sources are taken from there), writes a temporary image beside ``output`` and
    renames it into place, so a failed or interrupted build never leaves a SIF that
    looks finished. Parallel builds of the same output wait for each other.
    """
    context_dir = Path(context_dir).absolute()
    output = Path(output).absolute()
    key_file = output.with_suffix(".sif.key")
    if not context_dir.is_dir():
        raise ImageError(f"build context {context_dir} is not a directory")
    key = definition_key(definition, context_dir, output)
    if output.exists() and _read_key(key_file) == key:
        return output
    binary = apptainer_binary()
    if shutil.which(binary) is None:
        raise ImageError(_missing_binary_message(binary))
    output.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(output.with_suffix(".sif.lock")):
        if output.exists() and _read_key(key_file) == key:
            return output  # built by another process while we waited
        stem = f".{output.name}.{uuid.uuid4().hex[:12]}"
        def_file = output.parent / f"{stem}.def"
        tmp_sif = output.parent / f"{stem}.tmp.sif"
        try:
            def_file.write_text(definition)
            command = [binary, "build", *(["--fakeroot"] if fakeroot else [])]
            command += [str(tmp_sif), str(def_file)]
            log.info("building %s", output)
            try:
                result = _run(command, timeout=BUILD_TIMEOUT_SEC, cwd=context_dir)
            except SandboxError as error:
                raise ImageError(str(error)) from None
            if result.returncode != 0 or not tmp_sif.is_file():
                output_tail = (result.stdout + result.stderr).strip()[-4000:]
                raise ImageError(f"apptainer build of {output} failed:\n{output_tail}")
            key_file.unlink(missing_ok=True)  # never pair the new image with an old key
            os.replace(tmp_sif, output)
            write_text(key_file, key + "\n")
        finally:
            def_file.unlink(missing_ok=True)
            if tmp_sif.is_dir() and not tmp_sif.is_symlink():
                shutil.rmtree(tmp_sif, ignore_errors=True)
            else:
                tmp_sif.unlink(missing_ok=True)
    return output
