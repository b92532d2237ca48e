"""A real one-node Slurm cluster on localhost, for the tests and the benchmark.

Debian's slurmctld, slurmd and munge (installed by ``./setup.sh test`` when root) are
started with a one-node slurm.conf, and stopped afterwards. The configuration is
installed as /etc/slurm/slurm.conf only while the cluster runs, as on a real cluster:
Snakemake's slurm-jobstep plugin strips ``SLURM_CONF`` (with every ``SLURM_*`` variable
but the job id) from a rule's environment, so the ``srun`` inside a job must find it
there. It is removed on stop because with a system-wide slurm.conf and no controller,
the slurm plugin's ``scontrol`` call at import makes *every* ``snakemake`` command 10 s
slower. A slurm.conf that this module did not write is never touched: the cluster
refuses to start instead.

The node declares more CPUs than the machine has (``config_overrides``) so that a
workflow's small jobs can run side by side, as they do with ``--cores`` locally.

With ``nodes`` > 1 the cluster has that many nodes on this one host (Slurm's multiple
slurmd: ``tmax1``, ``tmax2``, ... each a slurmd of its own on its own port), so a job can
hold several nodes and place job steps on them with ``srun --relative``. Their names do
not resolve, so ``MASTER_ADDR`` points training ranks at 127.0.0.1 while it runs, as a
user would set it on a cluster whose node names are not host names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

PARTITION = "debug"
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MUNGE_PID = Path("/run/munge/munged.pid")
MARKER = "# written by tmax-repro tests/slurm/cluster.py; removed when the cluster stops"
COMMANDS = ("slurmctld", "slurmd", "munged", "sbatch", "srun", "squeue", "scontrol")
"""What a local cluster needs: its daemons and the clients the tests call."""


class SlurmUnavailable(RuntimeError):
    """Slurm cannot run here (not root, or its Debian packages are missing)."""


def missing_requirements() -> str | None:
    """Why a local cluster cannot start here, or None when it can."""
    if os.geteuid() != 0:
        return "starting slurmctld/slurmd needs root"
    absent = [name for name in COMMANDS if shutil.which(name, path=_sbin_path()) is None]
    if absent:
        return (
            "Slurm is not installed (missing: " + ", ".join(absent) + "); "
            "as root, ./setup.sh test installs slurmctld slurmd slurm-client munge"
        )
    if SYSTEM_CONF.exists() and not SYSTEM_CONF.read_text().startswith(MARKER):
        return f"{SYSTEM_CONF} belongs to another Slurm installation; not starting a test cluster"
    return None


def _sbin_path() -> str:
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("cannot read MemTotal from /proc/meminfo")


FIRST_SLURMD_PORT = 17101
"""Nodes of a several-node cluster listen on this port and the ones after it."""


def node_names(host: str, nodes: int) -> list[str]:
    """The host itself for one node; ``tmax1`` ... ``tmaxN`` for several."""
    return [host] if nodes == 1 else [f"tmax{i}" for i in range(1, nodes + 1)]


def slurm_conf(root: Path, *, node: str, cpus: int, memory_mb: int, nodes: int = 1) -> str:
    """A one-partition configuration with everything under ``root``: one node named
    ``node`` (this host), or ``nodes`` nodes on this host, each with ``cpus`` CPUs and
    ``memory_mb`` of memory."""
    if nodes == 1:
        declare = f"NodeName={node} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN"
    else:
        last = FIRST_SLURMD_PORT + nodes - 1
        declare = (f"NodeName=tmax[1-{nodes}] NodeHostname={node} NodeAddr=127.0.0.1 "
                   f"Port={FIRST_SLURMD_PORT}-{last} CPUs={cpus} RealMemory={memory_mb} "
                   "State=UNKNOWN")  # fmt: skip
    per_node = "" if nodes == 1 else "-%n"
    return "\n".join(
        [
            MARKER,
            "ClusterName=tmax-local",
            f"SlurmctldHost={node}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / ('spool' + per_node)}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / ('slurmd' + per_node + '.pid')}",
            f"SlurmctldLogFile={root / 'slurmctld.log'}",
            f"SlurmdLogFile={root / ('slurmd' + per_node + '.log')}",
            # No cgroups: the process tracker and task plugin that need nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SchedulerType=sched/backfill",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "ReturnToService=2",
            # Finished jobs stay visible to squeue (no slurmdbd, so no sacct).
            "MinJobAge=600",
            "SlurmdParameters=config_overrides",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            declare,
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


class LocalSlurm:
    """slurmctld + one slurmd per node (+ munged when it is not running) on this host.

    ``cpus`` and ``memory_mb`` are per node; memory defaults to the machine's less 2 GB,
    shared out over the nodes."""

    def __init__(
        self, root: Path, *, cpus: int = 8, memory_mb: int | None = None, nodes: int = 1
    ) -> None:
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.nodes = nodes
        self.names = node_names(self.node, nodes)
        self.cpus = cpus
        self.memory_mb = memory_mb or max(2000, (_memory_mb() - 2000) // nodes)
        self.conf = root / "slurm.conf"
        self._daemons: list[subprocess.Popen[bytes]] = []
        self._master_addr: str | None = None
        self._munge_started = False

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment whose Slurm commands talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = _sbin_path()
        return env

    def start(self, timeout: float = 60.0) -> LocalSlurm:
        reason = missing_requirements()
        if reason:
            raise SlurmUnavailable(reason)
        for folder in ("state", "spool"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(slurm_conf(self.root, node=self.node, cpus=self.cpus,
                                        memory_mb=self.memory_mb, nodes=self.nodes))  # fmt: skip
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.conf, SYSTEM_CONF)
        if self.nodes > 1:
            self._master_addr = os.environ.get("MASTER_ADDR")
            os.environ["MASTER_ADDR"] = "127.0.0.1"
        try:
            self._start_munge()
            env = self.env()
            commands = [("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])]
            for name in self.names:
                only = ["-N", name] if self.nodes > 1 else []
                commands.append((f"slurmd-{name}", ["slurmd", "-D", *only, "-f", str(self.conf)]))
            for label, command in commands:
                log = (self.root / f"{label}.out").open("wb")
                self._daemons.append(
                    subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
                )
            self._wait_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_munge(self) -> None:
        if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
            return
        for folder in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
            Path(folder).mkdir(parents=True, exist_ok=True)
            shutil.chown(folder, "munge", "munge")
        subprocess.run(
            ["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True, capture_output=True
        )
        self._munge_started = True

    def _stop_munge(self) -> None:
        """Stop the munged this cluster started; one that was already running stays."""
        if not self._munge_started:
            return
        self._munge_started = False
        try:
            pid = int(MUNGE_PID.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            subprocess.run(["pkill", "-x", "munged"], capture_output=True)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            for daemon in self._daemons:
                if daemon.poll() is not None:
                    raise RuntimeError(f"{daemon.args[0]} exited:\n{self.logs()}")
            result = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env()
            )
            state = result.stdout.strip()
            states = state.split()
            idle = len(states) == self.nodes and all(s.startswith("idle") for s in states)
            if result.returncode == 0 and idle:
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"the Slurm nodes are not idle after {timeout:.0f} s ({state!r}):\n{self.logs()}"
        )

    def logs(self, lines: int = 30) -> str:
        parts = []
        for path in sorted(self.root.glob("slurm*.log")) + sorted(self.root.glob("slurm*.out")):
            name = path.name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel what is left and stop the daemons this cluster started."""
        if self._daemons:
            subprocess.run(["scancel", "--full", "-u", "root"], env=self.env(), capture_output=True)
        for daemon in reversed(self._daemons):
            daemon.terminate()
        for daemon in reversed(self._daemons):
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        self._daemons.clear()
        self._stop_munge()
        if self.nodes > 1:
            if self._master_addr is None:
                os.environ.pop("MASTER_ADDR", None)
            else:
                os.environ["MASTER_ADDR"] = self._master_addr
        if SYSTEM_CONF.exists() and SYSTEM_CONF.read_text().startswith(MARKER):
            SYSTEM_CONF.unlink()

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


GPU_KEYS = ("gpu", "gpu_model", "gres", "cpus_per_gpu", "slurm_partition", "slurm_account")


def fit_profile(
    profile: dict, *, configfile: str, cpus: int = 2, mem_mb: str = "1000 * attempt"
) -> dict:
    """The project's slurm profile, cut down to what this cluster can give.

    Everything that shapes how the workflow runs on Slurm stays (executor, retries,
    rerun triggers, job groups, log folder, the training job's ``mpi``/``tasks``); what
    no laptop has goes: partitions and accounts (the local one is the default), GPUs,
    and memory beyond ``mem_mb`` (still doubled on a retry). Status is
    polled with squeue (no slurmdbd here) and early, so small jobs do not wait 40 s.
    """
    fitted = dict(profile)
    fitted["configfile"] = configfile
    fitted["slurm-status-command"] = "squeue"
    fitted["slurm-init-seconds-before-status-checks"] = 2
    fitted["latency-wait"] = 5
    defaults = {k: v for k, v in fitted.get("default-resources", {}).items() if k not in GPU_KEYS}
    defaults.update(mem_mb=mem_mb, cpus_per_task=1)
    fitted["default-resources"] = defaults
    rules = {}
    for rule, resources in fitted.get("set-resources", {}).items():
        kept = {k: v for k, v in resources.items() if k not in GPU_KEYS}
        kept["mem_mb"] = mem_mb
        if "cpus_per_task" in kept:
            kept["cpus_per_task"] = min(int(kept["cpus_per_task"]), cpus)
        rules[rule] = kept
    fitted["set-resources"] = rules
    return fitted
