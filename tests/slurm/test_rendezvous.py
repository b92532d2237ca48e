"""How the training ranks of one attempt of a Slurm job find each other, and never a
previous attempt's (a cancelled or preempted job that Slurm requeues keeps its id; its
ranks may still be shutting down when the next attempt starts). No cluster needed: the
ranks' side reads Slurm's variables, the launcher's side checks ports on this machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest

from tests.conftest import ROOT
from tmax.rl.launch.ranks import port_is_free, rendezvous_env, rendezvous_port
from tmax.rl.learners.learner import RENDEZVOUS_KEY, distributed_env, init_distributed

EPHEMERAL = range(32768, 61000)
"""Linux's default range of ports lent to outgoing connections."""


def slurm_rank(rank: int, port: int | None = None, **more: str) -> dict[str, str]:
    """What ``srun`` gives rank ``rank`` of a two-task step of job 50 on this machine."""
    env = {"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(rank),
           "SLURM_JOB_ID": "50", "SLURM_STEP_ID": "0", "MASTER_ADDR": "127.0.0.1"}  # fmt: skip
    if port is not None:
        env["MASTER_PORT"] = str(port)
    return {**env, **more}


@contextmanager
def listening(port: int = 0) -> Iterator[int]:
    """A port some other process listens on (a previous attempt's rank 0, say)."""
    with socket.socket() as occupant:
        occupant.bind(("", port))
        occupant.listen()
        yield occupant.getsockname()[1]


def no_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this test process")


def test_no_two_attempts_of_a_job_share_a_rendezvous_port() -> None:
    for job in (50, 4242, 1234567):
        ports = {distributed_env(slurm_rank(0, SLURM_JOB_ID=str(job), SLURM_RESTART_COUNT=str(r)))
                 .master_port for r in range(100)}  # fmt: skip
        assert len(ports) == 100, job
    # Nor do jobs with nearby ids (jobs on shared nodes, Snakemake's resubmissions)
    # within their first restarts.
    nearby = [(job, restarts) for job in range(50, 80) for restarts in range(4)]
    ports = {distributed_env(slurm_rank(0, SLURM_JOB_ID=str(job), SLURM_RESTART_COUNT=str(r)))
             .master_port for job, r in nearby}  # fmt: skip
    assert len(ports) == len(nearby)
    # A restart count that is not a number is named.
    with pytest.raises(ValueError, match="SLURM_RESTART_COUNT='x'"):
        distributed_env(slurm_rank(0, SLURM_RESTART_COUNT="x"))


def test_the_launcher_picks_a_free_port_outside_the_ephemeral_range() -> None:
    first = rendezvous_port(50, 0, is_free=lambda _: True, ephemeral=EPHEMERAL)
    assert first == distributed_env(slurm_rank(0)).master_port == 29550
    # Held by another process (a previous attempt's rank 0 still shutting down): the next.
    assert rendezvous_port(50, 0, is_free=lambda port: port != first, ephemeral=EPHEMERAL) != first
    job = next(job for job in range(100, 200) if port_is_free(29500 + job))
    with listening(29500 + job) as held:
        chosen = rendezvous_port(job, 0, is_free=port_is_free, ephemeral=EPHEMERAL)
        assert chosen != held and port_is_free(chosen)
    # Job 4242's own port (33742) is one the node lends to outgoing connections.
    assert rendezvous_port(4242, 0, is_free=lambda _: True, ephemeral=EPHEMERAL) < EPHEMERAL.start
    with pytest.raises(RuntimeError, match="set MASTER_PORT to a free one"):
        rendezvous_port(50, 0, is_free=lambda _: False, ephemeral=EPHEMERAL)


def test_the_launcher_names_the_attempt_and_asks_slurm_for_its_restarts() -> None:
    asked: list[str] = []

    def describe(job_id: str) -> dict[str, str]:
        asked.append(job_id)
        return {"Restarts": "2"}

    # Snakemake's jobstep plugin strips SLURM_RESTART_COUNT: Slurm is asked.
    chosen = rendezvous_env({"SLURM_JOB_ID": "50"}, describe_job=describe, is_free=lambda _: True)
    assert asked == ["50"] and "slurm job 50 restart 2 launcher" in chosen["TMAX_RENDEZVOUS_ID"]
    assert chosen["MASTER_PORT"] == str(rendezvous_port(50, 2, is_free=lambda _: True))
    # A port the user chose stands; no Slurm job, nothing to choose.
    kept = rendezvous_env({"SLURM_JOB_ID": "50", "SLURM_RESTART_COUNT": "0",
                           "MASTER_PORT": "12345"}, describe_job=describe)  # fmt: skip
    assert "MASTER_PORT" not in kept and asked == ["50"]
    assert rendezvous_env({}) == {}


def test_rank_0_names_the_port_another_process_holds() -> None:
    no_process_group()
    with listening() as held, pytest.raises(RuntimeError, match="another process holds the port"):
        init_distributed(slurm_rank(0, held), backend="gloo", timeout_s=5)


def test_a_rank_refuses_the_rendezvous_of_another_attempt() -> None:
    """The previous attempt's rank 0 still serves the port: the new rank 1 must not join
    it (it would log "joined ... rank 1 of 2" and fail later, far from the cause)."""
    import torch.distributed as dist

    no_process_group()
    previous = dist.TCPStore("127.0.0.1", 0, 2, True, timedelta(seconds=10),
                             wait_for_workers=False)  # fmt: skip
    previous.set(RENDEZVOUS_KEY, "slurm job 50 restart 0 launcher node1:111")
    new = slurm_rank(
        1, previous.port, TMAX_RENDEZVOUS_ID="slurm job 50 restart 1 launcher node1:222"
    )
    with pytest.raises(RuntimeError, match=r"of another attempt \(slurm job 50 restart 0"):
        init_distributed(new, backend="gloo", timeout_s=5)
    assert not dist.is_initialized()
    # A store that names no attempt at all (not a rank 0 of ours) is refused too, in time.
    silent = dist.TCPStore("127.0.0.1", 0, 2, True, timedelta(seconds=10), wait_for_workers=False)
    with pytest.raises(RuntimeError, match="no rank 0 of this attempt"):
        init_distributed(slurm_rank(1, silent.port), backend="gloo", timeout_s=2)


RANK = """
import logging
from tmax.rl.launch.ranks import leave_without_teardown
from tmax.rl.learners.learner import init_distributed
logging.basicConfig(level=logging.INFO)
import torch, torch.distributed as dist
where = init_distributed(backend="gloo", timeout_s=60)
value = torch.tensor([where.rank + 1])
dist.all_reduce(value)
print(f"rank {where.rank}: {value.item()}", flush=True)
leave_without_teardown(0)  # as tmax.rl.launch.ranks ends: gloo's teardown can abort (-6)
"""


def test_the_ranks_of_one_attempt_meet_at_the_port_the_launcher_chose() -> None:
    chosen = rendezvous_env({"SLURM_JOB_ID": "50", "SLURM_RESTART_COUNT": "1"})
    assert port_is_free(int(chosen["MASTER_PORT"]))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MASTER_"))}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    ranks = [subprocess.Popen([sys.executable, "-c", RANK], env={**base, **slurm_rank(r), **chosen},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (0, 1)]  # fmt: skip
    outputs = [rank.communicate(timeout=120)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], outputs
    assert "rank 0: 3" in outputs[0] and "rank 1: 3" in outputs[1]
    assert f"via 127.0.0.1:{chosen['MASTER_PORT']}" in outputs[1]


def test_a_finished_rank_leaves_with_its_status_and_its_logs() -> None:
    """Without native teardown (:func:`tmax.rl.launch.ranks.leave_without_teardown`), but with
    everything written: buffered output and log records reach the file."""
    script = (
        "import logging, sys\n"
        "from tmax.rl.launch.ranks import leave_without_teardown\n"
        "logging.basicConfig(stream=sys.stdout)\n"
        "print('buffered', end='')\n"
        "logging.getLogger('tmax').warning('logged')\n"
        "leave_without_teardown(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 3 and "buffered" in done.stdout and "logged" in done.stdout
