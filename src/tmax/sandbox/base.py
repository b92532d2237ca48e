"""One interface over every sandbox backend (podman, bwrap, apptainer).

A backend only has to start an isolated root file system with the trusted toolbox
mounted read-only at ``/opt/tmax`` and hand back one long-lived *control shell*
(the toolbox's bash, talking over a pipe). Everything else is shared and lives
here: the persistent agent session, per-command timeouts enforced inside the
sandbox, the output cap, upload/download and the Harbor verifier protocol.

Why a control shell instead of one ``podman exec`` per command: an exec costs
about 200 ms, a round trip over the open pipe about 0.1 ms; and killing an exec
client does not stop the command inside the container, while ``timeout`` run by
the control shell inside the sandbox does.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import math
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import tarfile
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

from tmax.sandbox.storage import FULL_FRACTION, fullness
from tmax.tasks import Task, TaskConfig, TaskFormatError

log = logging.getLogger("tmax.sandbox")

TOOLBOX = "/opt/tmax"
"""Where every backend mounts the trusted toolbox, read-only."""
LABEL = "tmax.sandbox"
"""Label (podman), name prefix (apptainer) or marker file (bwrap) on every resource."""
SESSION_DIR = "/tmp/.tmax-session"
"""Agent-session state inside the sandbox (a tmpfs): the terminal harnesses' tmux state,
which the agent's own commands use, and :data:`CONTROL_DIR`."""
CONTROL_DIR = f"{SESSION_DIR}/ctl"
"""The control shell's files (the command, cwd and exported variables between commands,
each command's output): covered by an empty read-only tmpfs in the agent's and the
verifier's mount namespaces, so nothing the agent runs can see, replace or block on
them. The agent's commands get them as open file descriptors."""
SESSION_TMPFS_MB = 64
"""Size of the tmpfs backends mount on SESSION_DIR: the most one command's output can take."""
VERIFIER_PATH = f"{TOOLBOX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_GRACE_SEC = 5.0
"""Extra host-side wait beyond a command's own timeout before the sandbox is declared hung."""

LOOPBACK_UP = """
import fcntl, socket, struct
_s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_flags = struct.unpack("16sH14x", fcntl.ioctl(_s, 0x8913, struct.pack("16sH14x", b"lo", 0)))[1]
fcntl.ioctl(_s, 0x8914, struct.pack("16sH14x", b"lo", _flags | 1))
_s.close()
"""
"""Bring up ``lo`` in a fresh network namespace (SIOCGIFFLAGS, then SIOCSIFFLAGS with
IFF_UP): a phase without network keeps its loopback, as under ``--network none``. The
toolbox's Python does it, since images need not have ``ip``. (The agent's namespaces
are brought up by ``tmax-enter --init``, in C.)"""


class SandboxError(RuntimeError):
    """The sandbox could not be started, or a backend command failed."""


class NodeError(SandboxError):
    """This machine cannot run sandboxes at all (a failed preflight, a domain image that
    will not build): never a task's fault, so it stops the stage instead of failing,
    quarantining or retrying every task."""


class SandboxDied(SandboxError):
    """The sandbox stopped answering (killed, out of memory, hung); the episode is over."""


NETWORK_POLICIES = ("harbor", "task", "off")
"""How a task's network settings become each phase's network (config key, e.g.
``evaluation.network``): ``harbor`` reads them as Harbor does (public unless the task says
otherwise), for evaluation; ``task`` the same but no network unless the task asks, the
safe choice for RL rollouts; ``off`` never any. See docs/network.md."""
NETWORK_MODES = ("public", "no-network", "allowlist")
"""Harbor's ``network_mode`` values (harbor/models/task/config.py, NetworkMode)."""


@dataclass(frozen=True)
class PhaseNetwork:
    """One phase's resolved network: Harbor's NetworkPolicy (mode + allowed hosts)."""

    mode: str = "no-network"
    allowed_hosts: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        """Whether the phase gets a network. An allowlist gets the full network: no
        backend here filters egress by host (docs/network.md)."""
        return self.mode != "no-network"

    def record(self) -> dict[str, Any]:
        return {
            "network_mode": self.mode,
            "allowed_hosts": list(self.allowed_hosts),
            "network": self.enabled,
            "enforced": "full network (allowlist not filtered)"
            if self.mode == "allowlist"
            else ("public" if self.enabled else "loopback only"),
        }


@dataclass(frozen=True)
class NetworkPlan:
    """Each phase's network for one task under one policy (Harbor's TrialNetworkPlan,
    agent phase and verifier phase)."""

    policy: str
    agent: PhaseNetwork
    verifier: PhaseNetwork

    def record(self) -> dict[str, Any]:
        return {"policy": self.policy, "agent": self.agent.record(),
                "verifier": self.verifier.record()}  # fmt: skip


def _phase_override(table: Mapping[str, Any], where: str) -> PhaseNetwork | None:
    """An ``[agent]``/``[verifier]`` override: only when it sets ``network_mode``."""
    mode = table.get("network_mode")
    hosts = table.get("allowed_hosts")
    if mode is None:
        if hosts is not None:
            raise TaskFormatError(
                f"task.toml: [{where}].allowed_hosts needs network_mode = 'allowlist'"
            )
        return None
    return _checked(str(mode), hosts, where)


def _checked(mode: str, hosts: Any, where: str) -> PhaseNetwork:
    if mode not in NETWORK_MODES:
        raise TaskFormatError(
            f"task.toml: [{where}].network_mode must be one of {', '.join(NETWORK_MODES)}, "
            f"got {mode!r}"
        )
    if hosts and mode != "allowlist":
        raise TaskFormatError(
            f"task.toml: [{where}].allowed_hosts is only valid with network_mode = 'allowlist'"
        )
    if hosts is not None and not (
        isinstance(hosts, list) and all(isinstance(h, str) for h in hosts)
    ):
        raise TaskFormatError(f"task.toml: [{where}].allowed_hosts must be a list of host names")
    return PhaseNetwork(mode, tuple(hosts or ()))


def _baseline(env: Mapping[str, Any], default: str, where: str) -> PhaseNetwork:
    """An ``[environment]`` table's network (Harbor: EnvironmentConfig.resolve_baseline).
    The deprecated ``allow_internet`` counts only when ``network_mode`` and
    ``allowed_hosts`` are both unset (TaskConfig._apply_legacy_allow_internet)."""
    if "network_mode" in env or env.get("allowed_hosts") is not None:
        return _checked(str(env.get("network_mode", default)), env.get("allowed_hosts"), where)
    if env.get("allow_internet") is not None:
        return PhaseNetwork("public" if env["allow_internet"] else "no-network")
    return PhaseNetwork(default)


def resolve_network(config: TaskConfig, policy: str = "task") -> NetworkPlan:
    """Each phase's network, as Harbor 0.26 resolves it (harbor/trial/network_policy.py,
    resolve_trial_network_plan), with the default changed by ``policy``.

    * baseline: ``[environment] network_mode`` (+ ``allowed_hosts``), else the
      deprecated ``allow_internet``, else the default: ``public`` under ``harbor``,
      ``no-network`` under ``task``;
    * agent phase: ``[agent] network_mode`` when set, else the baseline;
    * verifier phase: ``[verifier] network_mode`` when set, else the baseline, which
      for a separate verifier environment (``[verifier.environment]``, or
      ``environment_mode = "separate"``: a copy of ``[environment]``) is that
      environment's. Our verifier always runs in the agent's sandbox; only its network
      follows Harbor's separate-environment rule.

    ``off`` gives both phases no network whatever the task says. Run-specific extra
    allowlist hosts (Harbor's ``--allow-*-host``) have no counterpart here.
    """
    if policy not in NETWORK_POLICIES:
        raise ValueError(
            f"network policy {policy!r} is not one of {', '.join(NETWORK_POLICIES)} "
            "(config key evaluation.network)"
        )
    off = PhaseNetwork("no-network")
    if policy == "off":
        return NetworkPlan(policy, off, off)
    default = "public" if policy == "harbor" else "no-network"
    baseline = _baseline(config.environment, default, "environment")
    agent = _phase_override(config.agent, "agent") or baseline
    verifier_table = config.verifier
    separate_env = verifier_table.get("environment")
    if isinstance(separate_env, Mapping):
        verifier_baseline = _baseline(separate_env, default, "verifier.environment")
    else:  # shared (the default), or "separate" with a copy of [environment]
        verifier_baseline = baseline
    verifier = _phase_override(verifier_table, "verifier") or verifier_baseline
    return NetworkPlan(policy, agent, verifier)


@dataclass(frozen=True)
class Limits:
    """Per-task limits (from ``task.toml``) that every backend enforces."""

    memory_mb: int = 2048
    storage_mb: int = 10240
    """The most the agent can write to the sandbox's file system (``[environment]
    storage_mb``, Harbor's default otherwise); past it writes fail with ENOSPC."""
    cpus: float = 1.0
    pids: int = 1024
    command_timeout_sec: float = 120.0
    output_limit_bytes: int = 100_000
    """Output kept per command: the first and the last half of this, the middle cut."""
    network: bool = False
    """Whether the agent's phase has a network (Harbor's ``[agent]`` phase, resolved by
    :func:`resolve_network`)."""
    verifier_network: bool | None = None
    """Whether the verifier's phase has one; None: the same as the agent's."""
    network_plan: NetworkPlan | None = None
    """How the two were resolved from the task (policy and Harbor's modes), for the
    trial's record; None for limits made by hand."""
    verifier_timeout_sec: float = 600.0
    keep_agent_processes: bool = False
    """Leave the agent's processes running during verification (tasks whose tests talk to
    a service the agent started). They still cannot touch the verifier's ``/tests`` or
    ``/logs/verifier``: those are mounts of the verifier's own namespace."""
    pytest_verdict: tuple[str, ...] = ()
    """Test files (in ``tests/``) whose pytest exit status *is* the reward, read by the
    verifier's own process instead of a reward file (``[metadata] pytest_verdict``; our
    generated tasks set it). Empty: Harbor's ``test.sh`` and reward-file protocol."""

    @property
    def verifier_has_network(self) -> bool:
        return self.network if self.verifier_network is None else self.verifier_network

    @property
    def sandbox_network(self) -> bool:
        """Whether the sandbox as a whole is started with a network: when either phase
        needs one. The phase that must not have it runs in a network namespace of its
        own (only loopback), made by the control shell."""
        return self.network or self.verifier_has_network

    @classmethod
    def from_task(cls, task: Task, *, network_policy: str = "task", **overrides: Any) -> Limits:
        """Read limits from ``[environment]`` and our keys in ``[metadata]``, and each
        phase's network by ``network_policy`` (see :func:`resolve_network`): ``task``,
        the default, gives none unless the task asks; evaluation passes ``harbor``.
        """
        config = task.config
        plan = resolve_network(config, network_policy)
        meta = config.metadata
        values: dict[str, Any] = {
            "memory_mb": config.memory_mb,
            "storage_mb": int(config.get("environment", "storage_mb")),
            "cpus": float(config.cpus),
            "pids": int(meta.get("pids_limit", cls.pids)),
            "command_timeout_sec": float(meta.get("command_timeout_sec", cls.command_timeout_sec)),
            "output_limit_bytes": int(meta.get("output_limit_bytes", cls.output_limit_bytes)),
            "network": plan.agent.enabled,
            "verifier_network": plan.verifier.enabled,
            "network_plan": plan,
            "verifier_timeout_sec": float(config.get("verifier", "timeout_sec")),
            "keep_agent_processes": bool(meta.get("keep_agent_processes", False)),
            "pytest_verdict": config.pytest_verdict,
        }
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class ExecResult:
    """What one command printed (stdout and stderr together) and how it ended."""

    output: str
    exit_code: int
    duration_sec: float
    timed_out: bool = False
    truncated_bytes: int = 0
    oom_killed: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class VerifyResult:
    """The verifier's verdict: ``reward`` in [0, 1] plus every named reward it wrote."""

    reward: float
    rewards: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    output: str = ""
    duration_sec: float = 0.0


def _cgroup_dirs(pid: int, controller: str) -> list[Path]:
    """Host paths of ``pid``'s cgroup for a v1 controller, or its v2 cgroup."""
    dirs = []
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            dirs.append(Path("/sys/fs/cgroup") / controller / path.lstrip("/"))
        elif controllers == "" and (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
            dirs.append(Path("/sys/fs/cgroup") / path.lstrip("/"))
    return [d for d in dirs if d.is_dir()]


CAPABILITIES = [
    "chown",
    "dac_override",
    "dac_read_search",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "linux_immutable",
    "net_bind_service",
    "net_broadcast",
    "net_admin",
    "net_raw",
    "ipc_lock",
    "ipc_owner",
    "sys_module",
    "sys_rawio",
    "sys_chroot",
    "sys_ptrace",
    "sys_pacct",
    "sys_admin",
    "sys_boot",
    "sys_nice",
    "sys_resource",
    "sys_time",
    "sys_tty_config",
    "mknod",
    "lease",
    "audit_write",
    "audit_control",
    "setfcap",
    "mac_override",
    "mac_admin",
    "syslog",
    "wake_alarm",
    "block_suspend",
    "audit_read",
    "perfmon",
    "bpf",
    "checkpoint_restore",
]
"""Linux capability names by number (as setpriv spells them)."""


def capability_names(pid: int) -> list[str]:
    """The capabilities in a host process's bounding set."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            mask = int(line.split()[1], 16)
            return [name for bit, name in enumerate(CAPABILITIES) if mask >> bit & 1]
    raise SandboxError(f"/proc/{pid}/status has no CapBnd line")


def _freeze(dirs: list[Path], frozen: bool) -> None:
    for path in dirs:
        for name, value in (("freezer.state", "FROZEN" if frozen else "THAWED"),
                            ("cgroup.freeze", "1" if frozen else "0")):  # fmt: skip
            try:
                (path / name).write_text(value)
            except OSError:
                continue


def _proc_field(pid: int, index: int) -> int | None:
    """A numeric field of /proc/PID/stat (after the command name): 1 = ppid, 2 = pgid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[index])


class Channel:
    """A process with pipes to its stdin and (merged) stdout, read with deadlines."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        if process.stdin is None or process.stdout is None:
            raise SandboxError("control process needs stdin and stdout pipes")
        self.process = process
        self._stdin = process.stdin
        self._fd = process.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._buffer = bytearray()

    def send(self, data: bytes) -> None:
        try:
            self._stdin.write(data)
            self._stdin.flush()
        except (BrokenPipeError, ValueError) as error:
            raise SandboxDied(f"control shell is gone ({error})") from None

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select([self._fd], [], [], remaining)
        if not ready:
            raise TimeoutError
        chunk = os.read(self._fd, 1 << 16)
        if not chunk:
            code = self.process.poll()
            raise SandboxDied(f"control shell exited (status {code})")
        self._buffer += chunk

    def read_until(self, marker: bytes, deadline: float) -> bytes:
        """Bytes up to (not including) ``marker``; the marker is consumed."""
        while (index := self._buffer.find(marker)) < 0:
            self._fill(deadline)
        data = bytes(self._buffer[:index])
        del self._buffer[: index + len(marker)]
        return data

    def read_exact(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            self._fill(deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("control process %s did not exit", self.process.pid)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a dead shell: unsent bytes cannot go
                    stream.close()


# Shell functions defined once in the control shell. Every binary they use comes
# from the read-only toolbox, so an agent that breaks /bin or /usr cannot break
# timeouts, the output cap, uploads or the verifier.
_CONTROL_FUNCTIONS = r"""
exec 2>&1
# The image's PATH, as the backend started this shell with it (not /proc/1/environ:
# bwrap's own PID 1 carries the host's environment).
__tmax_path=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
export PATH=/opt/tmax/bin LC_ALL=C
S=/tmp/.tmax-session
C=$S/ctl
[ -d "$S" ] || { mkdir -p "$S" && chmod 700 "$S"; }
mkdir -p "$C" && chmod 700 "$C"
if [ -x /bin/bash ]; then __tmax_sh=/bin/bash; else __tmax_sh=/bin/sh; fi
# Builtin stat and rm (bash loadables shipped in the toolbox) save two execs per
# command; the external binaries are used where the loadables are missing.
enable -f /opt/tmax/lib/bash/stat stat 2>/dev/null && __tmax_bstat=1
enable -f /opt/tmax/lib/bash/rm rm 2>/dev/null
__n=0
__tmax_size() {
  if [ -n "$__tmax_bstat" ]; then stat -A __st "$1"; __size=${__st[size]}
  else __size=$(/opt/tmax/bin/stat -L -c %s "$1"); fi
}
__tmax_oom() {  # OOM kills seen by this cgroup, read with builtins only (no forks)
  local f key value
  __oom=0
  [ "$__tmax_oom_on" = 1 ] || return 0
  for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    if [ -r "$f" ]; then
      while read -r key value; do
        if [ "$key" = oom_kill ]; then __oom=$value; return; fi
      done < "$f"
    fi
  done
  __oom=0
}
__tmax_cwd= __tmax_env=
__tmax_take() {  # $1 fd, $2 most bytes: sets __taken to what the command left there
  __taken=
  __tmax_size "/proc/self/fd/$1"
  [ "$__size" -gt 0 ] && IFS= read -r -d '' -N "$2" __taken < "/proc/self/fd/$1"
  return 0
}
# Every file this shell uses for a command is new, under a name nobody can guess,
# opened once before the command starts and then used only through that descriptor
# (/proc/self/fd/N): whatever the agent's processes put at those paths (a FIFO, a link,
# a directory), no read or write of this shell follows a link, opens a FIFO or blocks.
# $C is also covered by an empty tmpfs in the agent's namespace where that can be done.
__tmax_open() {
  __tag=$SRANDOM$SRANDOM$SRANDOM
  exec {__x}>"$C/.cmd.$__tag" {__o}>"$C/.out.$__tag" {__c}>"$C/.cwd.$__tag" \
    {__e}>"$C/.env.$__tag"
}
__tmax_run() {  # $1 marker, $2 timeout (s), $3 head bytes, $4 tail bytes, $5 workdir
  local oom0 start rc out
  [ -n "$__tmax_cwd" ] || __tmax_cwd=$5
  __tmax_oom; oom0=$__oom; start=${EPOCHREALTIME/./}
  # Output goes to a fresh file, not a pipe: a background job the agent starts keeps
  # its (later unlinked) file open without making us wait for it. The session dir
  # is a small tmpfs, so endless output ends in ENOSPC for the writer, not a full disk.
  # The command (written by the caller), cwd and variables go in on fds 3-5; the
  # command's cwd and variables come back on 6-7.
  __tmax_agent_up
  timeout -k 2 "$2" "${__tmax_enter[@]}" "$__tmax_sh" -c '
    PATH=$1
    read -r __d <&5; cd "$__d" 2>/dev/null || cd /
    . /dev/fd/4 2>/dev/null
    exec 4<&- 5<&-
    . /dev/fd/3
    __rc=$?
    pwd >&6
    export -p >&7
    exit $__rc' sh "$__tmax_path" </dev/null >&"$__o" 2>&1 \
    3<"/proc/self/fd/$__x" 4<<<"$__tmax_env" 5<<<"$__tmax_cwd" 6>&"$__c" 7>&"$__e"
  rc=$?
  __tmax_take "$__c" 4096; [ -n "$__taken" ] && __tmax_cwd=${__taken%$'\n'}
  __tmax_take "$__e" 16777216; [ -n "$__taken" ] && __tmax_env=$__taken
  exec {__x}>&- {__c}>&- {__e}>&-
  rm -f "$C/.cmd.$__tag" "$C/.cwd.$__tag" "$C/.env.$__tag"
  out=/proc/self/fd/$__o
  __tmax_oom
  __tmax_size "$out"
  # Small outputs are relayed with builtins only (NUL bytes are dropped): a shell
  # that cannot fork right after a fork bomb must not need to.
  if [ "$__size" -le $(( $3 + $4 )) ]; then
    if [ "$__size" -gt 0 ]; then
      IFS= read -r -d '' -N "$__size" __buf < "$out"; printf '%s' "$__buf"
    fi
    printf '\n%s_SPLIT\n' "$1"
  else head -c "$3" "$out"; printf '\n%s_SPLIT\n' "$1"; tail -c "$4" "$out"
  fi
  exec {__o}>&-
  rm -f "$C/.out.$__tag"
  printf '\n%s %s %s %s %s\n' "$1" "$rc" "$__size" \
    "$(( (${EPOCHREALTIME/./} - start) / 1000 ))" "$(( __oom - oom0 ))"
}
# The agent's session lives in PID and mount namespaces of its own, entered afresh by
# every command with the agent's capabilities only: it cannot see, signal, ptrace or
# write to this shell, the verifier or the sandbox's init (kill -9 -1 ends only its own
# processes). __tmax_agent is the host-side unshare process holding the namespaces; its
# child is their init, which reaps orphans and ignores signals; when it dies every
# process in the namespace dies with it.
__tmax_agent=
__tmax_agent_up() {
  [ -n "$__tmax_agent" ] && [ -e "/proc/$__tmax_agent/ns/pid_for_children" ] && return 0
  local fd line proc errors=
  # A /proc of the namespace's own, masked like podman's. Where none may be mounted
  # (a user namespace under a locked /proc, as in unprivileged Apptainer) the old one
  # stays: the agent then sees the other processes' numbers but still cannot signal
  # them (not in its PID namespace) or open their fds or memory (a child user
  # namespace has no rights over its parent's processes).
  # Its init (tmax-enter --init, PID 1) masks that /proc like podman's (all of it
  # read-only, keys, timer_list, sched_debug, latency_stats hidden), brings up the
  # loopback of a phase without network, keeps the agent's capabilities only, then
  # reaps orphans and ignores signals.
  for proc in --mount-proc ""; do
    # The holder dies with this shell (setpriv's parent-death signal), and the
    # namespace with it (--kill-child): without a PID namespace of the sandbox's own
    # (Apptainer's "allow pid ns = no") nothing of the agent's outlives the sandbox.
    exec {fd}< <(exec setpriv --pdeathsig KILL unshare "${__tmax_unshare[@]}" \
      "${__tmax_agent_netopt[@]}" --pid \
      --mount --fork --kill-child --propagation private $proc -- /opt/tmax/bin/tmax-enter \
      --init "$__tmax_keep" ${proc:+--proc} "${__tmax_agent_netopt[@]/--net/--lo}" \
      --hide "$C" </dev/null 2>&1)
    __tmax_agent=$!
    while IFS= read -r -t 30 -u "$fd" line && [ "$line" != ready ]; do
      errors+="$line; "
    done
    exec {fd}<&-
    [ "$line" = ready ] && break
  done
  __tmax_enter=(tmax-enter "$__tmax_agent" "$__tmax_keep" "${__tmax_nsenter[@]}"
                "${__tmax_agent_netopt[@]}" --)
  [ "$line" = ready ] && return 0
  printf 'tmax: the agent namespace did not start: %s\n' "$errors"
  return 1
}
__tmax_agent_stop() {  # end every process of the agent, and wait until they are gone
  local pid ppid rest found=
  [ -n "$__tmax_agent" ] || return 0
  for pid in /proc/[0-9]*; do  # the namespace's init: killing it kills all of them
    pid=${pid#/proc/}
    read -r _ _ _ ppid rest < "/proc/$pid/stat" 2>/dev/null || continue
    [ "$ppid" = "$__tmax_agent" ] && kill -9 "$pid" 2>/dev/null && found=1
  done
  # unshare exits once its init, and so every process of the namespace, is gone
  [ -n "$found" ] || kill -9 "$__tmax_agent" 2>/dev/null
  wait "$__tmax_agent" 2>/dev/null
  __tmax_agent=
}
__tmax_open
if __tmax_agent_up >&"$__o"; then printf '__TMAX_READY__\n'
else printf '__TMAX_READY__ failed: '; head -c 2000 "/proc/self/fd/$__o"; printf '\n'; fi
exec {__x}>&- {__o}>&- {__c}>&- {__e}>&-; rm -f "$C/".*."$__tag"
"""


class Sandbox(ABC):
    """A started task sandbox: a persistent agent session, files in and out, a verifier.

    Use as a context manager; ``close()`` removes everything the sandbox created.
    """

    backend: ClassVar[str]
    oom_inside: ClassVar[bool] = True
    """Whether the sandbox's own cgroup is visible inside it (for counting OOM kills)."""
    own_user_namespace: ClassVar[bool] = False
    """Whether the agent's and the verifier's namespaces need a user namespace of their
    own (the control shell has no CAP_SYS_ADMIN, as under unprivileged Apptainer)."""
    dir: Path
    """The sandbox's own directory on the host (each backend sets it)."""
    checks_node_first: ClassVar[bool] = False
    """Whether a node is checked once (tmax.sandbox.preflight) before its first task's
    sandbox: where a missing piece of the node would otherwise fail every episode."""

    @classmethod
    @abstractmethod
    def for_task(cls, task_dir: Path, task: Task, limits: Limits, **common: Any) -> Self:
        """A (not yet started) sandbox for the task in ``task_dir``, its image prepared
        the way this backend runs it (``common``: toolbox, run_id, name)."""

    def __init__(
        self,
        image: str,
        limits: Limits | None = None,
        *,
        workdir: str = "/",
        run_id: str | None = None,
        name: str | None = None,
    ) -> None:
        self.image = image
        self.limits = limits or Limits()
        self.workdir = workdir
        self.run_id = run_id or os.environ.get("TMAX_RUN_ID", "default")
        self.sandbox_id = f"tmax-{name or 'task'}-{uuid.uuid4().hex[:10]}"
        self.sandbox_id = re.sub(r"[^A-Za-z0-9_.-]", "-", self.sandbox_id)
        self._channel: Channel | None = None
        self.on_start: list[Callable[[Sandbox], None]] = []
        """Run after the session is up, before anything else (e.g. image steps)."""
        self._control_pid: int | None = None
        self._cgroup_cache: dict[str, list[Path]] = {}
        self.reaped = 0
        self._protected: set[int] = set()
        self.died: str | None = None
        self._exhaustion_baseline = (0, 0)
        self.degraded: list[str] = []
        """Limits this sandbox runs without on this host, and why (also logged)."""
        plan = self.limits.network_plan
        for phase in ("agent", "verifier"):
            if plan is not None and getattr(plan, phase).mode == "allowlist":
                self.degraded.append(f"network: the {phase}'s allowlist is the full network")
        if self.verifier_netns and self.limits.keep_agent_processes:
            self.degraded.append(
                "network: the verifier's own namespace cannot reach the agent's services"
            )

    # --- the network of each phase ---------------------------------------------------

    @property
    def agent_netns(self) -> bool:
        """Whether the agent's session gets a network namespace of its own (loopback
        only): its phase has no network in a sandbox started with one."""
        return self.limits.sandbox_network and not self.limits.network

    @property
    def verifier_netns(self) -> bool:
        """Whether the verifier runs in a network namespace of its own (loopback only)."""
        return self.limits.sandbox_network and not self.limits.verifier_has_network

    @property
    def network(self) -> dict[str, Any]:
        """Each phase's resolved network, for the trial's record (``result.json``): the
        policy, Harbor's mode and allowed hosts per phase, whether it had a network, and
        how this sandbox gave it."""
        plan = self.limits.network_plan
        if plan is None:  # limits made by hand: only the two switches are known
            mode = {True: "public", False: "no-network"}
            plan = NetworkPlan(
                "explicit",
                PhaseNetwork(mode[self.limits.network]),
                PhaseNetwork(mode[self.limits.verifier_has_network]),
            )
        record = plan.record()
        record["agent"]["network"] = self.limits.network
        record["verifier"]["network"] = self.limits.verifier_has_network
        record["sandbox_network"] = self.limits.sandbox_network
        record["agent"]["own_namespace"] = self.agent_netns
        record["verifier"]["own_namespace"] = self.verifier_netns
        record["host"] = self.host_reach
        return record

    host_reach = "unreachable (no network)"
    """How a phase with network is kept from the host (``network["host"]``)."""

    def _netns_pid(self) -> int:
        """A host PID in the sandbox's own network namespace: the control shell, or
        else the first process below the backend's that is in another namespace than
        ours. Raises SandboxError when the sandbox shares the host's."""
        own = os.readlink("/proc/self/ns/net")

        def other(pid: int) -> bool:
            try:
                return os.readlink(f"/proc/{pid}/ns/net") != own
            except OSError:
                return False

        if self._control_pid is not None and other(self._control_pid):
            return self._control_pid
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    children.setdefault(parent, []).append(int(entry.name))
        queue = [self._channel.process.pid] if self._channel is not None else []
        queue += [pid for pid in (self._anchor_pid(),) if pid is not None]
        while queue:
            pid = queue.pop(0)
            if other(pid):
                return pid
            queue += children.get(pid, [])
        raise SandboxError("the sandbox has no network namespace of its own")

    user_mode_network: ClassVar[bool] = False
    """Whether the backend leaves a sandbox with network an empty namespace of its own,
    to be given pasta's user-mode networking (:func:`attach_pasta`) once up, with its
    PID in ``self.dir / "pasta.pid"`` (bwrap, Apptainer); podman brings its own."""

    def _network_up(self) -> None:
        """Once the sandbox is up: a sandbox with network reaches outside addresses, not
        the host. Its network namespace is its own (the host's loopback is not in it), and
        every address of the host's own interfaces is made unreachable in it by a
        ``prohibit`` route, set from the host (:func:`block_host_addresses`); the agent's
        processes hold no CAP_NET_ADMIN to lift it."""
        if not self.limits.sandbox_network:
            return
        anchor = self._netns_pid()
        if self.user_mode_network:
            attach_pasta(anchor, self.dir / "pasta.pid")
        blocked = block_host_addresses(anchor)
        self.host_reach = f"unreachable (own namespace; {blocked} host addresses prohibited)"
        if self.user_mode_network:
            self.host_reach += ", user-mode networking (pasta)"

    # --- what a backend implements -------------------------------------------------

    @abstractmethod
    def _start(self) -> subprocess.Popen[bytes]:
        """Create the sandbox; return the toolbox bash running inside it, with pipes."""

    @abstractmethod
    def _stop(self) -> None:
        """Remove everything ``_start`` created; must not raise if it is already gone."""

    @classmethod
    @abstractmethod
    def cleanup(cls, run_id: str | None = None) -> list[str]:
        """Remove resources left behind by crashed runs (all runs when ``run_id`` is None)."""

    def _anchor_pid(self) -> int | None:
        """Host PID of some process inside the sandbox's cgroup (None: not visible)."""
        return None

    def _agent_capability_numbers(self) -> str:
        """The agent's capabilities as tmax-enter and the verifier take them."""
        numbers = [str(CAPABILITIES.index(name)) for name in self.agent_capabilities()]
        return ",".join(numbers) or "-"

    def agent_capabilities(self) -> list[str]:
        """Capabilities the agent's commands (and the programs the tests run) keep: the
        ones the backend gives an ordinary container process. The control shell holds
        more (CAP_SYS_ADMIN for the namespaces) and never lends them."""
        return []

    def _cgroups(self, controller: str) -> list[Path]:
        """The sandbox's cgroup directories for a controller, found once and kept. A
        sandbox without a cgroup of its own (its anchor in ours, e.g. Apptainer without
        limits) has none: ours holds the trainer too, never to be swept as the sandbox."""
        if controller not in self._cgroup_cache:
            anchor = self._anchor_pid()
            if anchor is None:
                return []
            found = _cgroup_dirs(anchor, controller)
            own = found == _cgroup_dirs(os.getpid(), controller)
            self._cgroup_cache[controller] = [] if own else found
        return self._cgroup_cache[controller]

    def oom_kills(self) -> int | None:
        """Host-side count of OOM kills in the sandbox's memory cgroup (None: not
        visible; the control shell's in-sandbox count is used instead)."""
        for path in self._cgroups("memory"):
            for name in ("memory.events", "memory.oom_control"):
                try:
                    for line in (path / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
                except OSError:
                    continue
        return None

    def sandbox_pids(self) -> list[int]:
        """Host PIDs of every process in the sandbox's cgroup."""
        found: set[int] = set()
        for path in self._cgroups("pids"):
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def pids_limit_hits(self) -> int | None:
        """How often a fork in the sandbox failed on its PID limit (cgroup pids.events);
        None where the backend's cgroup is not visible."""
        for path in self._cgroups("pids"):
            try:
                for line in (path / "pids.events").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "max":
                        return int(value)
            except (OSError, ValueError):
                continue
        return None

    def exhausted(self) -> str | None:
        """What the sandbox's own processes used up since it started (memory, process
        slots), from the host's view of its cgroup; None when nothing (or not visible).

        A sandbox that dies with this set died of its agent's doing: the episode is a
        failed attempt with reward 0, not an infrastructure failure to be retried."""
        ooms, pid_hits = self._exhaustion_baseline
        found = []
        if (self.oom_kills() or 0) > ooms:
            found.append(f"memory (the OOM killer ran; limit {self.limits.memory_mb} MB)")
        if (self.pids_limit_hits() or 0) > pid_hits:
            found.append(f"processes (limit {self.limits.pids})")
        layer = self._storage_path()
        used = fullness(layer) if layer is not None else None
        if used is not None and used >= FULL_FRACTION:
            found.append(f"storage ({used:.0%} of {self.limits.storage_mb} MB used)")
        return f"the agent's processes exhausted {' and '.join(found)}" if found else None

    def _storage_path(self) -> Path | None:
        """A host path on the sandbox's size-limited writable layer, if it has one."""
        return None

    def agent_death(self, detail: str) -> str:
        """Why the sandbox died of its agent's doing: the episode is a failed attempt
        with reward 0, the reason recorded. It did when the agent exhausted something
        (memory, processes, storage), or when the sandbox stopped answering while its
        control shell was still alive: nothing but the agent's processes runs in it, and
        none of them can reach the control shell or its files, so a live shell that does
        not answer was starved or stalled by them. Only a sandbox whose control shell is
        gone without exhaustion (killed from outside, a backend that died) is the
        host's: raises SandboxDied, an infrastructure failure to retry."""
        exhausted = self.exhausted()
        if exhausted is not None:
            return f"{detail}; {exhausted}"
        if self._control_alive():
            return f"{detail}; its control shell was alive but starved by the agent's processes"
        raise SandboxDied(f"{detail}; no exhaustion seen")

    def _control_alive(self) -> bool:
        """Whether the control shell's process still runs (not gone, not a zombie)."""
        if self._control_pid is None or self._channel is None:
            return False
        if self._channel.process.poll() is not None:
            return False  # the backend's process is gone: the sandbox with it
        try:
            state = Path(f"/proc/{self._control_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return False
        return state[0] not in ("Z", "X", "T", "t")  # stopped: only the host can

    def _pids_nearly_full(self) -> bool:
        for path in self._cgroups("pids"):
            try:
                current = int((path / "pids.current").read_text())
                maximum = (path / "pids.max").read_text().strip()
            except (OSError, ValueError):
                continue
            if maximum != "max" and current >= int(maximum) - 4:
                return True
        return False

    def reap(self) -> int:
        """Kill, from the host, every process in the sandbox but its own init and the
        control shell. Used when the control shell is starved, e.g. a fork bomb holds
        every PID the sandbox may have; the overrunning command's output is lost."""
        if self._control_pid is None:
            return 0
        freezers = self._cgroups("freezer")
        killed = 0
        for _ in range(20):
            # Freeze the cgroup so nothing can fork while we sweep it; frozen
            # processes die of the pending SIGKILL as soon as they are thawed.
            _freeze(freezers, True)
            try:
                victims = [
                    pid
                    for pid in self.sandbox_pids()
                    if pid not in self._protected and pid != self._control_pid
                ]
                for pid in victims:
                    try:
                        os.kill(pid, 9)
                        killed += 1
                    except ProcessLookupError:
                        pass
            finally:
                _freeze(freezers, False)
            if not victims:
                break
            time.sleep(0.05)
        log.warning("%s: killed %d runaway process(es) from the host", self.sandbox_id, killed)
        return killed

    def _find_control(self) -> None:
        """Remember the control shell's host PID and the sandbox's own processes."""
        self._protected = set()
        self._control_pid = None
        for pid in self.sandbox_pids():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline[:2] == [f"{TOOLBOX}/bin/bash".encode(), b"--noprofile"]:
                self._control_pid = self._control_pid or pid
            else:
                self._protected.add(pid)  # init, bwrap's helpers: present before the agent

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        started = time.monotonic()
        self._cgroup_cache = {}
        try:
            self._channel = Channel(self._start())
            # Docker creates WORKDIR when it builds; a root file system used directly
            # (bwrap's fast path) may lack it, so the session makes sure it exists.
            userns = self.own_user_namespace
            workdir = shlex.quote(self.workdir)
            setup = (
                f"__tmax_oom_on={int(self.oom_inside)}\n"
                f"__tmax_keep={self._agent_capability_numbers()}\n"
                f"__tmax_unshare=({'--user --map-current-user' if userns else ''})\n"
                f"__tmax_nsenter=({'--user' if userns else ''})\n"
                f"__tmax_agent_netopt=({'--net' if self.agent_netns else ''})\n"
                f"[ -d {workdir} ] || mkdir -p -- {workdir} 2>/dev/null\n{_CONTROL_FUNCTIONS}"
            )
            self._channel.send(setup.encode())
            deadline = time.monotonic() + 60
            self._channel.read_until(b"__TMAX_READY__", deadline)
            failed = self._channel.read_until(b"\n", deadline).decode(errors="replace")
            if failed:  # the agent's namespaces could not be made: nothing is safe to run
                raise SandboxError(failed.strip())
        except (TimeoutError, SandboxError) as error:
            self.close()
            raise SandboxError(f"{self.backend} sandbox did not come up: {error!r}") from None
        self._find_control()
        try:
            self._network_up()
        except SandboxError as error:
            self.close()
            raise SandboxError(f"{self.backend} sandbox network: {error}") from None
        self._exhaustion_baseline = (self.oom_kills() or 0, self.pids_limit_hits() or 0)
        try:
            for hook in self.on_start:
                hook(self)
        except BaseException:
            self.close()
            raise
        log.debug("%s %s up in %.3fs", self.backend, self.sandbox_id, time.monotonic() - started)
        return self

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._stop()

    def __enter__(self) -> Self:
        return self.start() if self._channel is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def channel(self) -> Channel:
        if self._channel is None:
            raise SandboxError("sandbox is not started")
        if self.died:
            raise SandboxDied(self.died)
        return self._channel

    def _control(
        self, script: str, timeout: float, payload: bytes = b"", marker: str | None = None
    ) -> tuple[bytes, list[str]]:
        """Run ``script`` in the control shell; return its output and the marker fields.

        The marker is random per call, so nothing the agent prints can forge it.
        """
        marker = marker or f"__TMAX_END_{uuid.uuid4().hex}__"
        channel = self.channel
        channel.send(script.replace("@MARKER@", marker).encode() + b"\n" + payload)
        end = f"\n{marker} ".encode()
        try:
            try:
                out = channel.read_until(end, time.monotonic() + timeout + HOST_GRACE_SEC)
            except TimeoutError:
                # The in-sandbox timeout did not bring the shell back (e.g. no PIDs
                # left to fork): kill the agent's processes from the host, wait again.
                self.reaped = self.reap()
                if not self.reaped:
                    raise
                out = channel.read_until(end, time.monotonic() + HOST_GRACE_SEC)
            fields = channel.read_until(b"\n", time.monotonic() + HOST_GRACE_SEC).decode().split()
        except TimeoutError:
            self.died = f"sandbox stopped answering ({timeout:.0f}s command timeout + grace)"
            raise SandboxDied(self.died) from None
        except SandboxDied as error:
            self.died = str(error)
            raise
        return out, fields

    # --- the agent's session ----------------------------------------------------------

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the persistent session (cwd and exported variables carry
        over). The timeout is enforced inside the sandbox; output beyond the limit keeps
        its head and tail."""
        timeout = self.limits.command_timeout_sec if timeout is None else timeout
        half = max(1, self.limits.output_limit_bytes // 2)
        delimiter = f"__TMAX_CMD_{uuid.uuid4().hex}__"
        script = (
            f"__tmax_open\ncat >&\"$__x\" <<'{delimiter}'\n{command}\n{delimiter}\n"
            f"__tmax_run @MARKER@ {math.ceil(timeout)} {half} {half} {shlex.quote(self.workdir)}"
        )
        started = time.monotonic()
        if self._pids_nearly_full():
            self.reap()  # a background job has used up the PIDs: the shell could not fork
        host_ooms = self.oom_kills()
        pid_hits = self.pids_limit_hits()
        marker = f"__TMAX_END_{uuid.uuid4().hex}__"
        self.reaped = 0
        out, fields = self._control(script, timeout, marker=marker)
        if len(fields) < 4 or not all(x.lstrip("-").isdigit() for x in fields[:4]):
            # rc, output size, ms, OOM kills: one missing is a fork that failed in the
            # control shell itself (seen once, after a PID limit was hit); a death, which
            # is the agent's doing where it exhausted the sandbox
            self.died = f"the control shell ended a command with {fields!r}, not 'rc size ms ooms'"
            raise SandboxDied(self.died)
        rc, size, elapsed_ms, ooms = (int(x) for x in fields[:4])
        if host_ooms is not None:
            ooms = (self.oom_kills() or 0) - host_ooms
        head, _, tail = out.partition(f"\n{marker}_SPLIT\n".encode())
        omitted = max(0, size - len(head) - len(tail))
        data = head
        if omitted:
            data += f"\n[... {omitted} bytes of output omitted ...]\n".encode() + tail
        timed_out = rc in (124, 137) and elapsed_ms >= timeout * 1000 - 50
        if self.reaped:
            timed_out = True
            note = f"\n[tmax: command overran; {self.reaped} process(es) killed from the host]"
            data += note.encode()
        elif pid_hits is not None and (self.pids_limit_hits() or 0) > pid_hits:
            # The command hit the PID limit (a fork bomb, a runaway pool): whatever it
            # left behind would starve every later command, so clear the sandbox.
            killed = self.reap()
            note = (
                f"\n[tmax: the sandbox ran out of processes (limit {self.limits.pids}); "
                f"{killed} process(es) killed]"
            )
            data += note.encode()
        return ExecResult(
            output=data.decode("utf-8", errors="replace"),
            exit_code=rc,
            duration_sec=time.monotonic() - started,
            timed_out=timed_out,
            truncated_bytes=omitted,
            oom_killed=ooms > 0 and not timed_out,
        )

    # --- files ------------------------------------------------------------------------

    def upload(self, source: str | Path, destination: str) -> None:
        """Copy a host file or directory to ``destination`` inside the sandbox.

        A directory's contents land in ``destination``; a file lands at it.
        """
        source = Path(source)
        if source.is_dir():
            payload, target_dir = _tar(source), destination
        else:
            payload, target_dir = (
                _tar(source, Path(destination).name),
                str(Path(destination).parent),
            )
        quoted = shlex.quote(target_dir)
        script = (
            f"mkdir -p {quoted} && head -c {len(payload)} | tar -x -f - -C {quoted} "
            f"--no-same-owner; printf '\\n%s %s\\n' @MARKER@ $?"
        )
        out, fields = self._control(script, 300, payload)
        if fields[0] != "0":
            raise SandboxError(f"upload to {destination} failed: {out.decode(errors='replace')}")

    def download(self, source: str, destination: str | Path) -> Path:
        """Copy ``source`` (file or directory) out of the sandbox to ``destination``.

        Links and paths that would leave ``destination`` are skipped (with a warning),
        so a hostile sandbox cannot make the host write or read elsewhere.
        """
        parent, name = str(Path(source).parent), Path(source).name
        script = (
            f"__tmax_open; tar -c -f - -C {shlex.quote(parent)} {shlex.quote(name)} "
            '>&"$__o" 2>/dev/null; rc=$?; '
            'size=$(/opt/tmax/bin/stat -L -c %s "/proc/self/fd/$__o"); '
            'printf \'__TMAX_SIZE__ %s %s\\n\' "$rc" "$size"; cat "/proc/self/fd/$__o"; '
            'exec {__x}>&- {__o}>&- {__c}>&- {__e}>&-; rm -f "$C/".*."$__tag"; '
            "printf '\\n%s 0\\n' @MARKER@"
        )
        marker = f"__TMAX_END_{uuid.uuid4().hex}__"
        channel = self.channel
        channel.send(script.replace("@MARKER@", marker).encode() + b"\n")
        deadline = time.monotonic() + 300
        channel.read_until(b"__TMAX_SIZE__ ", deadline)
        rc, size = (int(x) for x in channel.read_until(b"\n", deadline).split())
        data = channel.read_exact(size, deadline)
        channel.read_until(f"\n{marker} 0\n".encode(), deadline)
        if rc != 0:
            raise SandboxError(f"download of {source} failed (tar status {rc})")
        destination = Path(destination)
        destination.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                try:
                    archive.extract(member, destination, filter="data")
                except tarfile.FilterError as error:
                    log.warning("download of %s: skipped %s (%s)", source, member.name, error)
        return destination / name

    # --- the verifier ---------------------------------------------------------------

    def verify(self, tests_dir: str | Path, timeout: float | None = None) -> VerifyResult:
        """Harbor's verifier protocol, run so that nothing the agent wrote decides it.

        The agent's processes are ended first (unless the task keeps them: a service the
        tests talk to). The tests then run from a fresh process, PID 1 of its own PID
        and mount namespaces (:mod:`tmax.sandbox.verifier_init`), non-dumpable, with the
        task's tests on a tmpfs of its own at ``/tests`` and another at
        ``/logs/verifier``: no agent process can see, signal, ptrace or write any of
        them. The tests and the programs they run have the agent's capabilities, under
        the toolbox's bash and Python with the toolbox first on PATH.

        With ``pytest_verdict`` the reward is pytest's exit status as that process saw
        it (the answer key is hidden from the programs the tests run); otherwise it is
        Harbor's reward file, read after every process the tests left is killed, and 0
        when ``test.sh`` was killed or ran out of time. ``reward.json`` counts only when
        the task's tests name it, so a program that writes one cannot outrank the
        ``reward.txt`` the tests write.
        """
        tests_dir = Path(tests_dir)
        timeout = self.limits.verifier_timeout_sec if timeout is None else timeout
        started = time.monotonic()
        if not self.limits.keep_agent_processes:
            try:
                self._control("__tmax_agent_stop; printf '\\n%s 0\\n' @MARKER@", 60)
            except SandboxDied as error:  # as below: the agent's doing, or infra raised
                return VerifyResult(0.0, reason=self.agent_death(f"verifier: {error}"))
        payload = _tar(tests_dir)
        mode = "pytest" if self.limits.pytest_verdict else "script"
        json_allowed = int(_names_reward_json(tests_dir))
        keep = self._agent_capability_numbers()
        delimiter = f"__TMAX_VERIFIER_{uuid.uuid4().hex}__"
        files = " ".join(shlex.quote(name) for name in self.limits.pytest_verdict)
        # Without a network of its own the verifier's first process makes a fresh
        # namespace's loopback usable before anything else (the tests' servers use it).
        source = (LOOPBACK_UP if self.verifier_netns else "") + _verifier_init()
        network = "--net " if self.verifier_netns else ""
        script = (
            f"__tmax_v=$(cat <<'{delimiter}'\n{source}\n{delimiter}\n)\n"
            f"head -c {len(payload)} | timeout -k 5 {math.ceil(timeout) + 30} unshare "
            f'"${{__tmax_unshare[@]}}" {network}--pid --mount --fork --kill-child '
            "--propagation private -- "
            f'{TOOLBOX}/bin/python3 -I -S -c "$__tmax_v" {mode} {math.ceil(timeout)} '
            f"{json_allowed} {keep} {shlex.quote(self.workdir)} {files} 2>&1; "
            "printf '\\n%s %s\\n' @MARKER@ $?"
        )
        try:
            out, fields = self._control(script, timeout + 40, payload)
        except SandboxDied as error:  # the agent's doing, or else raised again as infra
            return VerifyResult(0.0, reason=self.agent_death(f"verifier: {error}"))
        text = out.decode(errors="replace")
        files_found, test_output, status = _parse_verifier_output(text)
        elapsed = time.monotonic() - started
        if status is None:
            log.error("%s: the verifier did not finish: %s", self.sandbox_id, text[-2000:])
            return VerifyResult(
                0.0, reason=f"the verifier did not finish (status {fields[0]}): {text[-500:]}",
                output=test_output, duration_sec=elapsed,
            )  # fmt: skip
        code, signal_number, timed_out = status
        if timed_out:
            reason = f"verifier timed out after {timeout:.0f}s"
            return VerifyResult(0.0, reason=reason, output=test_output, duration_sec=elapsed)
        if signal_number:
            what = "pytest" if mode == "pytest" else "test.sh"
            reason = f"{what} was killed by signal {signal_number}"
            return VerifyResult(0.0, reason=reason, output=test_output, duration_sec=elapsed)
        if mode == "pytest":
            passed = code == 0
            return VerifyResult(
                float(passed), {"reward": float(passed)},
                reason=None if passed else f"pytest exit status {code}",
                output=test_output, duration_sec=elapsed,
            )  # fmt: skip
        result = reward_from_files(files_found)
        return VerifyResult(
            reward=result.reward,
            rewards=result.rewards,
            reason=result.reason,
            output=test_output,
            duration_sec=elapsed,
        )


def host_addresses() -> list[str]:
    """The host's own IPv4 and IPv6 addresses, every interface but the loopback (and
    link-local ones, which need a scope no sandbox has)."""
    try:
        result = subprocess.run(
            ["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"cannot list the host's addresses (iproute2's ip): {error}") from None
    found = []
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[1] == "lo" or fields[2] not in ("inet", "inet6"):
            continue
        address = fields[3].split("/")[0]
        if not address.lower().startswith("fe80:"):
            found.append(address)
    return found


def _really_root() -> bool:
    """Whether this process runs as root: what pasta and nsenter, which run as this
    process's user, will be (a backend's choice of user mode may follow other rules)."""
    return os.getresuid()[1] == 0


def attach_pasta(pid: int, pid_file: Path) -> None:
    """User-mode networking for the network namespace of ``pid`` (and its user
    namespace): pasta (Debian's passt) attaches a tap device there and carries its
    connections out through sockets of the host, with no port forwarded either way
    (``-t/-u/-T/-U none``) and the gateway address not mapped to the host
    (``--no-map-gw``), so the host's loopback stays out of reach. pasta may outlive
    the namespace (joined by path, as root, it does not see its processes end): its PID
    is written to ``pid_file``, and the sandbox's close, or the cleanup after a crash,
    kills it."""
    if shutil.which("pasta") is None:
        raise SandboxError("a sandbox with network needs pasta (Debian: apt-get install passt)")
    command = ["pasta", "--config-net", "-t", "none", "-u", "none", "-T", "none", "-U", "none",
               "--no-map-gw", "--quiet", "--pid", str(pid_file)]  # fmt: skip
    if _really_root():  # root reaches the namespace from its own user namespace
        command += ["--runas", "0:0", "--netns", f"/proc/{pid}/ns/net", "--netns-only"]
    else:  # a user joins the sandbox's user namespace (its own) first
        command.append(str(pid))
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"pasta did not start: {error}") from None
    if result.returncode != 0:
        raise SandboxError(f"pasta failed: {result.stderr.strip()[-500:]}")


def stop_pasta(pid_file: Path) -> None:
    with contextlib.suppress(OSError, ValueError):  # pasta ends with the namespace anyway
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


def block_host_addresses(pid: int) -> int:
    """Add a ``prohibit`` route for each of the host's addresses in the network namespace
    of ``pid`` (as root, from the host); return how many. Fails closed: a sandbox whose
    routes could not be set does not start."""
    addresses = host_addresses()
    lines = "".join(f"route add prohibit {a}/{128 if ':' in a else 32}\n" for a in addresses)
    # root reaches any network namespace; a user enters the (own) user namespace first
    user = [] if _really_root() else ["-U", "--preserve-credentials"]
    try:
        result = subprocess.run(
            ["nsenter", "-t", str(pid), *user, "-n", "ip", "-batch", "-"],
            input=lines, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"cannot block the host's addresses: {error}") from None
    if result.returncode != 0:
        raise SandboxError(f"cannot block the host's addresses: {result.stderr.strip()[-500:]}")
    return len(addresses)


def _tar(source: Path, name: str | None = None) -> bytes:
    """A tar stream of a directory's contents, or of one file stored as ``name``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        if name is not None:
            archive.add(source, arcname=name)
        else:
            for child in sorted(source.iterdir()):
                archive.add(child, arcname=child.name)
    return buffer.getvalue()


def _verifier_init() -> str:
    """The verifier's first process (its source, sent over the control channel)."""
    return (Path(__file__).with_name("verifier_init.py")).read_text()


def _names_reward_json(tests_dir: Path) -> bool:
    """Whether any of the task's test files mentions ``reward.json`` (only then may the
    verifier's reward.json outrank its reward.txt)."""
    for path in tests_dir.rglob("*"):
        try:
            if path.is_file() and b"reward.json" in path.read_bytes():
                return True
        except OSError:
            continue
    return False


def _parse_verifier_output(
    text: str,
) -> tuple[dict[str, str], str, tuple[int, int, bool] | None]:
    """Reward files, the test log and (exit code, signal, timed out) from the verifier's
    first process; the status is None when it did not get that far."""
    files: dict[str, str] = {}
    log_text = ""
    status = None
    for line in text.splitlines():
        if line.startswith("__TMAX_FILE__ "):
            _, name, *encoded = line.split(" ")
            files[name] = base64.b64decode("".join(encoded)).decode("utf-8", errors="replace")
        elif line.startswith("__TMAX_LOG__ "):
            encoded_log = line.removeprefix("__TMAX_LOG__ ")
            log_text = base64.b64decode(encoded_log).decode("utf-8", errors="replace")
        elif line.startswith("__TMAX_STATUS__ "):
            code, signal_number, timed_out = line.split()[1:4]
            status = (int(code), int(signal_number), timed_out == "1")
    return files, log_text, status


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def reward_from_files(files: Mapping[str, str]) -> VerifyResult:
    """Harbor's reading of reward files: ``reward.json`` (a number, or names to
    numbers with ``reward`` the main one) wins over ``reward.txt`` (one float)."""
    if "reward.json" in files:
        try:
            data = json.loads(files["reward.json"])
        except json.JSONDecodeError:
            return VerifyResult(0.0, reason="reward.json is not valid JSON")
        if isinstance(data, bool) or not isinstance(data, int | float | dict):
            return VerifyResult(0.0, reason="reward.json must hold a number or an object")
        if not isinstance(data, dict):
            data = {"reward": data}
        rewards: dict[str, float] = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                return VerifyResult(0.0, reason=f"reward.json: {key!r} is not a number")
            if not math.isfinite(value):
                return VerifyResult(0.0, reason=f"reward.json: {key!r} is not finite")
            rewards[key] = _clamp(float(value))
        main = rewards.get("reward", next(iter(rewards.values()), None))
        if main is None:
            return VerifyResult(0.0, reason="reward.json is empty")
        return VerifyResult(main, rewards)
    if "reward.txt" in files:
        text = files["reward.txt"].strip()
        try:
            value = float(text)
        except ValueError:
            return VerifyResult(0.0, reason=f"reward.txt is not a number: {text[:40]!r}")
        if not math.isfinite(value):
            return VerifyResult(0.0, reason="reward.txt is not finite")
        return VerifyResult(_clamp(value), {"reward": _clamp(value)})
    return VerifyResult(0.0, reason="the verifier wrote no reward file")
