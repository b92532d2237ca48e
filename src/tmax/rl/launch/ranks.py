"""Training ranks across a Slurm allocation (paper: DeepSpeed ZeRO-3 over the training nodes).

The workflow's ``rl_train`` job is one Slurm job whose allocation holds every training
node (the slurm profile asks for ``nodes``, one task per node, and ``mpi: srun`` so the
job's command runs in the batch step instead of inside an ``srun`` of its own). That
command is the *launcher*: it decides where it stands with :func:`placement` and, in an
allocation of several tasks, starts the ranks with one ``srun``::

    srun --ntasks=<nodes x ranks per node> --ntasks-per-node=<ranks per node> \\
         python -m tmax.rl.stage <run_dir>/launch.json

Each rank reads its place from Slurm's environment (``SLURM_PROCID``, ``SLURM_NTASKS``,
``SLURM_LOCALID``, the step's node list; see :func:`tmax.rl.learners.learner.distributed_env`)
and joins the process group at the port the launcher chose for this attempt
(:func:`rendezvous_env`); rank 0 also holds the sandboxes and the inference engine.
One rank per GPU on GPU nodes, the allocation's tasks per node on CPU nodes
(``rl.ranks_per_node`` overrides). ``srun`` forwards SIGTERM (preemption, ``scancel``)
to every rank; they checkpoint and stop together.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tmax.io import write_json
from tmax.settings import RLSection, RLValues

log = logging.getLogger("tmax.rl")

LAUNCH_FILE = "launch.json"
"""The ranks' arguments, written by the launcher into the run directory."""


@dataclass(frozen=True)
class Placement:
    """What this process is in the training job."""

    role: Literal["single", "launcher", "rank"]
    nodes: int = 1
    tasks: int = 1


def placement(
    environ: Mapping[str, str] | None = None,
    *,
    describe_job: Callable[[str], Mapping[str, str]] | None = None,
) -> Placement:
    """``launcher`` in a Slurm batch step whose allocation has several tasks or nodes (the
    job's own command: it must start the ranks); ``rank`` inside a job step of several
    tasks (started by ``srun``, or by a user's own ``srun``/``torchrun``); else ``single``.

    The batch step looks like rank 0 of ``SLURM_NTASKS`` (Slurm sets ``SLURM_PROCID=0``
    there too); only the absence of ``SLURM_STEP_ID`` tells it apart from a real rank.
    Snakemake's slurm-jobstep plugin strips every ``SLURM_*`` variable but the job id
    before it runs a rule, so the allocation's size is asked of Slurm
    (``describe_job``, default ``scontrol show job``) when the variables are gone.
    """
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return Placement("rank" if int(env["WORLD_SIZE"]) > 1 else "single")
    if "SLURM_JOB_ID" not in env:
        return Placement("single")
    if "SLURM_STEP_ID" in env:
        tasks = int(env.get("SLURM_NTASKS") or 1)
        nodes = int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or 1)
        return Placement("rank", nodes, tasks) if tasks > 1 else Placement("single")
    if "SLURM_NTASKS" in env:
        tasks = int(env["SLURM_NTASKS"])
        nodes = int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or 1)
    else:
        job = (describe_job or scontrol_job)(env["SLURM_JOB_ID"])
        tasks, nodes = int(job.get("NumTasks") or 1), int(job.get("NumNodes") or 1)
    if tasks <= 1 and nodes <= 1:
        return Placement("single")
    return Placement("launcher", nodes, tasks)


def scontrol_job(job_id: str) -> dict[str, str]:
    """``scontrol show job -o <id>`` as a dict (``NumNodes``, ``NumTasks``, ...)."""
    try:
        result = subprocess.run(["scontrol", "show", "job", "-o", job_id], check=True,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as error:
        raise RuntimeError(f"cannot ask Slurm about job {job_id}: {error}") from error
    return dict(field.split("=", 1) for field in result.stdout.split() if "=" in field)


def visible_gpus(environ: Mapping[str, str] | None = None) -> int:
    """GPUs this node gives the job: Slurm's ``SLURM_GPUS_ON_NODE``, else the count CUDA
    sees (0 on CPU machines)."""
    env = os.environ if environ is None else environ
    if (env.get("SLURM_GPUS_ON_NODE") or "").isdigit():
        return int(env["SLURM_GPUS_ON_NODE"])
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def srun_command(
    argument_file: Path,
    *,
    nodes: int,
    ranks_per_node: int,
    log_dir: Path,
    python: str = sys.executable,
    relative: int = 0,
    module: str = "tmax.rl.stage",
    log_name: str = "rank%t.log",
    kill_on_bad_exit: bool = True,
) -> list[str]:
    """One ``srun`` that starts ``python -m module argument_file`` ``ranks_per_node``
    times on each of ``nodes`` nodes, from the allocation's node number ``relative`` on
    (training ranks from 0; engine servers after them); each task's output goes to
    ``log_dir/log_name``. With ``kill_on_bad_exit`` (training ranks), if one task dies
    Slurm kills the rest instead of leaving them waiting in a collective; engine servers
    are independent, and the others serve on when one dies."""
    if nodes < 1 or ranks_per_node < 1:
        raise ValueError(f"need at least one node and one rank per node (got {nodes}, "
                         f"{ranks_per_node})")  # fmt: skip
    return [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={nodes * ranks_per_node}",
        f"--ntasks-per-node={ranks_per_node}",
        f"--relative={relative}",
        f"--kill-on-bad-exit={int(kill_on_bad_exit)}",
        "--cpu-bind=none",
        f"--output={log_dir / log_name}",
        python,
        "-m",
        module,
        str(argument_file),
    ]


@dataclass(frozen=True)
class Layout:
    """How a training job's nodes are split between training ranks and engine servers."""

    training_nodes: int
    ranks_per_node: int
    inference_nodes: int = 0
    engines_per_node: int = 0

    @property
    def engine_servers(self) -> int:
        return self.inference_nodes * self.engines_per_node

    def describe(self) -> str:
        """The learner's layout (what a checkpoint depends on; engines are not part of it)."""
        return f"{self.training_nodes}x{self.ranks_per_node}"


def split_nodes(
    where: Placement, rl: RLValues, *, gpus_per_node: Callable[[], int] = visible_gpus
) -> Layout:
    """The first ``nodes − rl.inference_nodes`` nodes train, the rest serve the engines."""
    rl = RLSection.of(rl)
    inference = rl.inference_nodes
    training = where.nodes - inference
    if training < 1:
        raise ValueError(
            f"rl.inference_nodes is {inference} but the training job has {where.nodes} "
            f"node(s), leaving none to train on: the job's nodes are rl.training_nodes + "
            "rl.inference_nodes (rules/common.smk::training_job); a profile or command "
            "line that overrides rl_train's nodes must keep at least one training node"
        )
    gpus = gpus_per_node()
    tasks_per_node = max(1, where.tasks // where.nodes)
    per_node = rl.ranks_per_node or gpus or tasks_per_node
    engines = 0
    if inference:
        engines = rl.engines_per_node or max(1, gpus // rl.engine_tensor_parallel)
    return Layout(training, per_node, inference, engines)


def launch_ranks(
    arguments: Mapping[str, Any],
    run_dir: Path,
    *,
    nodes: int,
    ranks_per_node: int,
    servers: subprocess.Popen[bytes] | None = None,
    servers_closed: Callable[[], bool] = lambda: False,
) -> None:
    """Start ``ranks_per_node`` training ranks on each of the first ``nodes`` nodes with one
    ``srun`` and wait for them (and, with ``servers``, the engine servers' ``srun``).

    ``arguments`` are :func:`tmax.rl.stage.train_rank`'s keyword arguments (paths as
    strings); they are written to ``run_dir/launch.json`` for the ranks to read. A rank
    that fails makes this raise with the tail of every log; so do engine servers that
    fail while the ranks run (the ranks are then stopped), unless ``servers_closed()``
    says rank 0 had already told them to exit. Servers still running when the ranks are
    done are stopped.
    """
    if shutil.which("srun") is None:
        raise RuntimeError("srun not found: a multi-task Slurm allocation needs Slurm's srun")
    log_dir = run_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    launch_file = run_dir / LAUNCH_FILE
    write_json(launch_file, dict(arguments))
    command = srun_command(launch_file, nodes=nodes, ranks_per_node=ranks_per_node,
                           log_dir=log_dir)  # fmt: skip
    log.info("starting %d training rank(s) on %d node(s): %s", nodes * ranks_per_node, nodes,
             " ".join(command))  # fmt: skip
    process = subprocess.Popen(command, env={**_rank_env(arguments), **rendezvous_env()})
    steps = [process] if servers is None else [process, servers]

    def forward(signum: int, frame: Any) -> None:
        for step in steps:
            if step.poll() is None:
                step.send_signal(signum)

    # Preemption or scancel reaches the batch step first: pass it on (srun forwards
    # SIGTERM to every task); the ranks checkpoint and exit.
    previous = signal.signal(signal.SIGTERM, forward)
    try:
        code = _wait_for_ranks(process, servers, log_dir, servers_closed)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if servers is not None:
            _stop(servers, grace_s=60.0)
    if code != 0:
        raise RuntimeError(
            f"training ranks failed (srun exit status {code}):\n" + rank_log_tails(log_dir)
        )


def _wait_for_ranks(
    process: subprocess.Popen[bytes],
    servers: subprocess.Popen[bytes] | None,
    log_dir: Path,
    servers_closed: Callable[[], bool],
) -> int:
    while True:
        try:
            return process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        failed = servers is not None and servers.poll() not in (None, 0)
        if failed and not servers_closed():
            assert servers is not None
            _stop(process, grace_s=60.0)
            raise RuntimeError(
                f"every engine server ended (srun exit status {servers.returncode}) while "
                "training ran; the ranks were stopped:\n" + rank_log_tails(log_dir)
            )


def _stop(process: subprocess.Popen[bytes], *, grace_s: float) -> None:
    """Wait up to ``grace_s`` for a step that should be ending, then SIGTERM, then kill."""
    for action in (None, process.terminate, process.kill):
        if action is not None:
            action()
        try:
            process.wait(timeout=grace_s if action is None else 30.0)
            return
        except subprocess.TimeoutExpired:
            continue


RENDEZVOUS_PROBES = 200
"""How many ports after the first choice the launcher tries before it gives up."""


def rendezvous_env(
    environ: Mapping[str, str] | None = None,
    *,
    describe_job: Callable[[str], Mapping[str, str]] | None = None,
    is_free: Callable[[int], bool] | None = None,
) -> dict[str, str]:
    """``MASTER_PORT`` and ``TMAX_RENDEZVOUS_ID`` for the ranks of this attempt of the job.

    The launcher runs on the allocation's first node, where rank 0 starts, so it can
    check the port there: :func:`rendezvous_port` of the job id and restart count (a
    requeued job keeps its id; ``SLURM_RESTART_COUNT``, else ``scontrol``'s
    ``Restarts``). A ``MASTER_PORT`` already set stands. The id names this launch; a rank
    that reaches another attempt's rank 0 refuses it
    (:func:`tmax.rl.learners.learner.init_distributed`).
    """
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        return {}
    restarts = env.get("SLURM_RESTART_COUNT", "")
    if not restarts.isdigit():
        try:
            restarts = (describe_job or scontrol_job)(job_id).get("Restarts") or "0"
        except RuntimeError as error:
            log.warning("restart count of job %s unknown (%s); taking 0", job_id, error)
            restarts = "0"
    launcher = f"{socket.gethostname()}:{os.getpid()}"
    attempt = f"slurm job {job_id} restart {restarts} launcher {launcher}"
    chosen = {"TMAX_RENDEZVOUS_ID": attempt}
    if not env.get("MASTER_PORT"):
        port = rendezvous_port(int(job_id), int(restarts), is_free=is_free or port_is_free)
        chosen["MASTER_PORT"] = str(port)
        log.info("ranks rendezvous at port %d (%s)", port, attempt)
    return chosen


def rendezvous_port(
    job_id: int,
    restarts: int,
    *,
    is_free: Callable[[int], bool],
    ephemeral: range | None = None,
) -> int:
    """:func:`~tmax.rl.learners.learner.slurm_rendezvous_port` (no two attempts of a job share it),
    else the next port of its window (29500-39499) that ``is_free``. Ports this node lends
    to outgoing connections (``ephemeral``) are skipped: any connection may take one
    between this check and rank 0's listen, and a rank's own connect can land on it."""
    from tmax.rl.learners.learner import DEFAULT_MASTER_PORT, slurm_rendezvous_port

    ephemeral = ephemeral_ports() if ephemeral is None else ephemeral
    window = range(DEFAULT_MASTER_PORT, DEFAULT_MASTER_PORT + 10000)
    usable = [port for port in window if port not in ephemeral] or list(window)
    first = slurm_rendezvous_port(job_id, restarts)
    start = next((i for i, port in enumerate(usable) if port >= first), 0)  # first, or after
    tried = [usable[(start + step) % len(usable)] for step in range(RENDEZVOUS_PROBES)]
    for port in dict.fromkeys(tried):
        if is_free(port):
            return port
    raise RuntimeError(
        f"no free port for the ranks' rendezvous on {socket.gethostname()}: ports "
        f"{tried[0]}..{tried[-1]} are all taken (training ranks of earlier attempts still "
        "running?); set MASTER_PORT to a free one"
    )


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` of this node now, as rank 0's store will
    (every address, ``SO_REUSEADDR``)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
            probe.listen()
        except OSError:
            return False
    return True


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The ports this node lends to outgoing connections (Linux's default: 32768-60999)."""
    try:
        low, high = (int(value) for value in path.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def _rank_env(arguments: Mapping[str, Any]) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(arguments.get("threads", 1))),
        # Ranks import tmax from the same tree as the launcher (a bare env, --sdm conda).
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep),
    }


def start_engine_servers(
    settings_file: Path, layout: Layout, log_dir: Path, *, threads: int = 1
) -> subprocess.Popen[bytes]:
    """One ``srun`` of ``layout.engines_per_node`` engine servers on each inference node
    (the nodes after the training ones); each writes its address beside
    ``settings_file`` when ready (:mod:`tmax.rl.engines.remote`)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    command = srun_command(
        settings_file, nodes=layout.inference_nodes, ranks_per_node=layout.engines_per_node,
        log_dir=log_dir, relative=layout.training_nodes, module="tmax.rl.engines.remote",
        log_name="engine%t.log", kill_on_bad_exit=False,
    )  # fmt: skip
    log.info("starting %d engine server(s) on %d node(s): %s", layout.engine_servers,
             layout.inference_nodes, " ".join(command))  # fmt: skip
    return subprocess.Popen(command, env=_rank_env({"threads": threads}))


def rank_log_tails(log_dir: Path, lines: int = 20) -> str:
    parts = []
    for pattern in ("rank*.log", "engine*.log"):
        for path in sorted(log_dir.glob(pattern)):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path}\n" + "\n".join(tail))
    return "\n".join(parts) or f"(no rank logs in {log_dir})"


def leave_without_teardown(status: int) -> None:
    """End a rank whose work is done (its checkpoints and snapshots are on disk) without
    tearing down torch's native state. Gloo's threads left to interpreter teardown can
    abort the process ("terminate called without an active exception", srun exit 134),
    failing an attempt that succeeded, so Slurm and Snakemake run it again; destroying
    the groups instead can block on a peer."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
