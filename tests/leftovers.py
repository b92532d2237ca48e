"""What a test run leaves behind: processes, mounts, cgroups and containers of ours.

:class:`Snapshot` is taken when the pytest session starts and compared when it ends
(``tests/conftest.py``): anything of ours that appeared in between and is still there
fails the run, is listed, and is then removed, so one leaky test cannot make the next
run's numbers (or its machine) wrong. "Of ours" means: a process that carries the
session's marker variable (every process the tests start inherits it, until an
environment is cleared) or runs one of our programs (the toolbox's, bwrap, unshare,
podman's conmon, Slurm's daemons, a model server); a mount below a temporary or cache
directory; a cgroup of the bwrap backend's group; a container with the sandboxes'
label. Pre-existing ones never count.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "TMAX_TEST_SESSION"
"""Set in the session's environment: its value is in every process the tests start."""
OURS = ("/opt/tmax/", "tmax-enter", "bwrap", "unshare", "conmon", "slurmd", "slurmctld",
        "vllm", "transformers", "snakemake", "sleep infinity", "tmax")  # fmt: skip
"""Command-line fragments of the programs the tests start (where the marker is gone)."""
MOUNT_ROOTS = ("/tmp/", "/var/tmp/", str(Path.home() / ".cache"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
SETTLE_SEC = 5.0
"""How long processes get to finish exiting after the last test (a sandbox's teardown
is asynchronous in places: a killed process is reaped by its parent a moment later)."""


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (start time in ticks, parent pid, command line) of every live process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" or not cmdline:  # a zombie, or a kernel thread
            continue
        found[int(entry.name)] = (int(fields[19]), int(fields[1]), cmdline.strip())
    return found


def _marker(pid: int) -> str | None:
    """The session marker in a process's environment, if it has one."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = f"{MARKER}=".encode()
    found = [item[len(prefix) :] for item in environ.split(b"\0") if item.startswith(prefix)]
    return found[0].decode(errors="replace") if found else None


def _marked(pid: int, session: str) -> bool:
    return _marker(pid) == session


def _mounts() -> set[str]:
    points = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if point.startswith(MOUNT_ROOTS):
                points.add(point)
    return points


def _cgroups() -> set[Path]:
    groups = set()
    for tmax in [CGROUP_ROOT / "tmax", *CGROUP_ROOT.glob("*/tmax")]:
        with contextlib.suppress(OSError):
            groups.update(p for p in tmax.iterdir() if p.is_dir())
    return groups


def _containers() -> set[str]:
    if shutil.which("podman") is None or os.geteuid() != 0:
        return set()
    try:
        result = subprocess.run(
            ["podman", "ps", "-a", "--filter", "label=tmax.sandbox", "--format", "json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        listed = json.loads(result.stdout or "[]")
        return {f"{c['Id'][:12]} {c.get('Names', [''])[0]}" for c in listed}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return set()


def _descendants(root: int, now: dict[int, tuple[int, int, str]]) -> set[int]:
    """``root`` and every live process it started, directly or not."""
    found = {root}
    changed = True
    while changed:
        changed = False
        for pid, (_, parent, _) in now.items():
            if parent in found and pid not in found:
                found.add(pid)
                changed = True
    return found


def _contained(pid: int, now: dict[int, tuple[int, int, str]]) -> bool:
    """Whether ``pid`` runs under a container's monitor (a verifier's pytest in podman)."""
    seen = set()
    while pid in now and pid not in seen and pid > 1:
        seen.add(pid)
        _, parent, cmdline = now[pid]
        if "conmon" in cmdline.split()[0]:
            return True
        pid = parent
    return False


@dataclass
class Snapshot:
    session: str = field(default_factory=lambda: uuid.uuid4().hex)
    processes: dict[int, tuple[int, int, str]] = field(default_factory=_processes)
    mounts: set[str] = field(default_factory=_mounts)
    cgroups: set[Path] = field(default_factory=_cgroups)
    containers: set[str] = field(default_factory=_containers)

    def new_processes(self) -> dict[int, str]:
        """Processes of ours started since the snapshot that are not this process or
        one of its descendants still at work (pytest's own children). While another
        run is at work (:meth:`other_session`), only those with this session's marker:
        a process of ours by its command line alone (an orphan, a container's) may be
        the other run's."""
        now = _processes()
        mine = _descendants(os.getpid(), now)
        alone = self.other_session(now) is None
        left = {}
        for pid, (start, _, cmdline) in now.items():
            if pid in mine or self.processes.get(pid, (None,))[0] == start:
                continue
            if self._elsewhere(pid, now):
                continue  # a process of another run on this machine, still at work
            if _marked(pid, self.session) or (alone and any(part in cmdline for part in OURS)):
                left[pid] = cmdline
        return left

    def _ancestors(self, now: dict[int, tuple[int, int, str]]) -> set[int]:
        """This process and the processes it was started from (its shell, …)."""
        found, pid = set(), os.getpid()
        while pid in now and pid not in found and pid > 1:
            found.add(pid)
            pid = now[pid][1]
        return found

    def _elsewhere(self, pid: int, now: dict[int, tuple[int, int, str]]) -> bool:
        """Whether ``pid`` belongs to another run: it descends from a pytest process that
        is not this one, from a process marked with another session, or, unmarked, from
        a process that was running before this session began and is not one it was
        started from (a workflow or a benchmark started in another shell)."""
        marked = _marked(pid, self.session)
        mine = self._ancestors(now)
        seen = set()
        first = pid
        while pid in now and pid not in seen and pid > 1:
            seen.add(pid)
            start, parent, cmdline = now[pid]
            if pid != os.getpid() and any("pytest" in word for word in cmdline.split()[:3]):
                return True
            other = _marker(pid)
            if other is not None and other != self.session:
                return True
            before = self.processes.get(pid, (None,))[0] == start
            if pid != first and not marked and before and pid not in mine:
                return True
            pid = parent
        return False

    def other_session(self, now: dict[int, tuple[int, int, str]] | None = None) -> int | None:
        """A live process of another test run on this machine (a pytest process that is
        neither this one, nor started by it, nor inside a container; or a process
        marked with another session), if there is one."""
        now = _processes() if now is None else now
        mine = _descendants(os.getpid(), now)
        for pid, (start, _, cmdline) in now.items():
            if pid in mine:
                continue
            other = _marker(pid)
            if other is not None and other != self.session:
                return pid
            if any("pytest" in word for word in cmdline.split()[:3]) and not _contained(pid, now):
                return pid
            new = self.processes.get(pid, (None,))[0] != start
            if new and any(part in cmdline for part in OURS) and self._elsewhere(pid, now):
                return pid  # e.g. a sandbox of a workflow started in another shell
        return None

    def leftovers(self) -> dict[str, list[str]]:
        """What of ours appeared since the snapshot and is still there, by kind. While
        another test run is at work, a new mount, cgroup or container may be its own:
        then only processes (which carry their run's marker or ancestry) are counted."""
        deadline = time.monotonic() + SETTLE_SEC
        while (processes := self.new_processes()) and time.monotonic() < deadline:
            time.sleep(0.2)
        found = {"processes": [f"{pid} {cmd[:200]}" for pid, cmd in sorted(processes.items())]}
        if self.other_session() is None:
            found |= {
                "mounts": sorted(_mounts() - self.mounts),
                "cgroups": sorted(str(p) for p in _cgroups() - self.cgroups),
                "containers": sorted(_containers() - self.containers),
            }
        return {kind: items for kind, items in found.items() if items}

    def remove(self, found: dict[str, list[str]]) -> None:
        """Remove what :meth:`leftovers` found (processes, then mounts, cgroups and
        containers), so the next run starts clean."""
        for line in found.get("processes", []):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        for point in reversed(found.get("mounts", [])):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        for line in found.get("containers", []):
            container = line.split()[0]
            subprocess.run(["podman", "rm", "-f", container], capture_output=True, check=False)
        time.sleep(0.5)
        for group in found.get("cgroups", []):
            with contextlib.suppress(OSError):
                Path(group).rmdir()
