"""Where a training process stands in a Slurm job, and the srun line that starts the ranks
(the real launch on a local Slurm cluster is in tests/slurm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tmax.rl.launch.ranks import (
    Layout,
    Placement,
    placement,
    rank_log_tails,
    split_nodes,
    srun_command,
)

BATCH_STEP = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "SLURM_PROCID": "0",
              "SLURM_JOB_NUM_NODES": "2"}  # fmt: skip
"""What Slurm sets in a job's batch step: it looks like rank 0 of 2, but is not a rank."""


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Placement("single")),
        ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1", "SLURM_PROCID": "0"}, Placement("single")),
        # a one-task job step (how the slurm plugin runs every other rule)
        ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"}, Placement("single")),
        # the batch step after Snakemake's jobstep plugin stripped SLURM_* but the job id
        ({"SLURM_JOB_ID": "8"}, Placement("launcher", nodes=2, tasks=2)),
        ({"SLURM_JOB_ID": "9"}, Placement("single")),
        (BATCH_STEP, Placement("launcher", nodes=2, tasks=2)),
        ({**BATCH_STEP, "SLURM_STEP_ID": "0"}, Placement("rank", nodes=2, tasks=2)),
        # torchrun's variables decide (srun ... torchrun keeps Slurm's too)
        ({**BATCH_STEP, "RANK": "1", "WORLD_SIZE": "4"}, Placement("rank")),
        ({"RANK": "0", "WORLD_SIZE": "1"}, Placement("single")),
    ],
)
def test_placement_tells_the_batch_step_from_a_rank(
    environ: dict[str, str], expected: Placement
) -> None:
    jobs = {"8": {"NumNodes": "2", "NumTasks": "2"}, "9": {"NumNodes": "1", "NumTasks": "1"}}
    assert placement(environ, describe_job=jobs.__getitem__) == expected


def test_srun_starts_ranks_per_node_on_every_node(tmp_path: Path) -> None:
    command = srun_command(tmp_path / "launch.json", nodes=2, ranks_per_node=8,
                           log_dir=tmp_path / "logs", python="python")  # fmt: skip
    assert command[:7] == ["srun", "--nodes=2", "--ntasks=16", "--ntasks-per-node=8",
                           "--relative=0", "--kill-on-bad-exit=1", "--cpu-bind=none"]  # fmt: skip
    assert f"--output={tmp_path / 'logs' / 'rank%t.log'}" in command
    assert command[-3:] == ["-m", "tmax.rl.stage", str(tmp_path / "launch.json")]
    with pytest.raises(ValueError, match="at least one node"):
        srun_command(tmp_path / "launch.json", nodes=2, ranks_per_node=0, log_dir=tmp_path)


def test_a_failed_launch_quotes_every_rank_log(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_text("step 1\nRuntimeError: boom\n")
    (tmp_path / "rank1.log").write_text("waiting\n")
    tails = rank_log_tails(tmp_path)
    assert "rank0.log" in tails and "RuntimeError: boom" in tails and "rank1.log" in tails
    assert "no rank logs" in rank_log_tails(tmp_path / "missing")


def test_engine_servers_start_on_the_nodes_after_the_training_ones(tmp_path: Path) -> None:
    command = srun_command(tmp_path / "server.json", nodes=6, ranks_per_node=8,
                           log_dir=tmp_path, relative=2, module="tmax.rl.engines.remote",
                           log_name="engine%t.log", python="python")  # fmt: skip
    assert "--relative=2" in command and "--ntasks=48" in command
    assert f"--output={tmp_path / 'engine%t.log'}" in command
    assert command[-2:] == ["tmax.rl.engines.remote", str(tmp_path / "server.json")]


@pytest.mark.parametrize(
    ("where", "rl", "gpus", "expected"),
    [
        # the paper: 8 nodes of 8 GPUs, 6 of them for engines, one engine per GPU
        (Placement("launcher", 8, 8), {"inference_nodes": 6}, 8, Layout(2, 8, 6, 8)),
        # tensor parallel 2: four engines per node
        (Placement("launcher", 4, 4), {"inference_nodes": 2, "engine_tensor_parallel": 2}, 8,
         Layout(2, 8, 2, 4)),
        # CPU nodes: the allocation's tasks per node train, one engine per node
        (Placement("launcher", 3, 3), {"inference_nodes": 1}, 0, Layout(2, 1, 1, 1)),
        (Placement("launcher", 1, 2), {}, 0, Layout(1, 2)),
        (Placement("launcher", 2, 2), {"ranks_per_node": 4, "engines_per_node": 3,
                                       "inference_nodes": 1}, 0, Layout(1, 4, 1, 3)),
    ],
)  # fmt: skip
def test_nodes_split_between_training_and_engines(
    where: Placement, rl: dict, gpus: int, expected: Layout
) -> None:
    layout = split_nodes(where, rl, gpus_per_node=lambda: gpus)
    assert layout == expected
    assert layout.engine_servers == expected.inference_nodes * expected.engines_per_node


def test_no_node_left_to_train_on_is_an_error() -> None:
    with pytest.raises(ValueError, match="leaving none to train on"):
        split_nodes(Placement("launcher", 2, 2), {"inference_nodes": 6}, gpus_per_node=lambda: 8)


def test_engine_servers_that_die_stop_training_unless_they_were_told_to_exit(
    tmp_path: Path,
) -> None:
    import subprocess

    from tmax.rl.launch.ranks import _wait_for_ranks

    def steps() -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
        ranks = subprocess.Popen(["sleep", "3"])
        servers = subprocess.Popen(["sh", "-c", "exit 134"])  # aborted, as at teardown
        return ranks, servers

    ranks, servers = steps()
    assert _wait_for_ranks(ranks, servers, tmp_path, lambda: True) == 0
    ranks, servers = steps()
    with pytest.raises(RuntimeError, match=r"every engine server ended \(srun exit status 134\)"):
        _wait_for_ranks(ranks, servers, tmp_path, lambda: False)
    assert ranks.poll() is not None  # the ranks were stopped
