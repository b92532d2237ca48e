"""The RL loop on two CPU ranks (gloo) with the DeepSpeed ZeRO-3 learner: rank 0 draws
the groups and feeds the other rank its share, and the run trains exactly as one process
does, checkpoints from both ranks and resumes.

Run by pytest as the parent; each rank is this file run as a script (``--worker``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.rl.ranks import run_ranks
from tmax.rl.engines.local import TransformersEngine
from tmax.rl.launch.collective import balanced_shards
from tmax.rl.learners.learner import LocalLearner
from tmax.rl.learners.packing import enable_packing
from tmax.rl.learners.sequence_parallel import sequence_groups, split_token_mixers
from tmax.rl.trainer import RLSettings, Trainer

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
WORLD_SIZE = 2
LR = 1e-2
EPS = 1e-3
"""Adam's first steps move each weight by about ±lr whatever the size of its gradient, so
with the default eps (1e-8) gradient entries near zero turn float noise (the ranks sum in
another order) into differences of order lr. A large eps keeps the update smooth in the
gradient, so the two runs can be compared tightly."""
WORKER_TIMEOUT_S = 300
COLLECTIVE_TIMEOUT_S = 3.0


def settings(steps: int) -> RLSettings:
    # Synchronous (async_steps 0): the groups of a step come from the latest weights in
    # both runs, so the comparison does not depend on thread timing.
    # 4 samples of 4 tokens per micro-batch: several micro-batches per rank and step,
    # which ZeRO-3 must add up (not overwrite) before the step.
    return RLSettings(group_size=8, prompts_per_step=4, steps=steps, learning_rate=LR,
                      async_steps=0, checkpoint_every=2, micro_batch_tokens=16,
                      seed=0)  # fmt: skip


def tiny_model() -> torch.nn.Module:
    from tests.rl.test_trainer import tiny_model as build

    return build(0)


def target_env() -> object:
    from tests.rl.test_trainer import target_env as build

    return build()


class SlowEnv:
    """The target environment, but the first group of every step takes ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        self.inner = target_env()
        self.delay_s = delay_s
        self.drawn = 0

    def tasks(self) -> object:
        return self.inner.tasks()  # type: ignore[attr-defined]

    def sample_group(self, task: str, engine: object, group_size: int, seed: int) -> object:
        if self.drawn % settings(1).prompts_per_step == 0:
            time.sleep(self.delay_s)
        self.drawn += 1
        return self.inner.sample_group(task, engine, group_size, seed)  # type: ignore[attr-defined]


def run_slow_worker(out: Path) -> None:
    """Rank 0 collects each step's groups for longer than the training group's timeout
    (COLLECTIVE_TIMEOUT_S); the other rank waits for it on the control group."""
    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed

    where = init_distributed(timeout_s=COLLECTIVE_TIMEOUT_S)
    main = where.rank == 0
    learner = DeepSpeedLearner(tiny_model(), lr=LR, zero_stage=3, bf16=False, eps=EPS)
    engine = TransformersEngine(tiny_model()) if main else None
    env = SlowEnv(2 * COLLECTIVE_TIMEOUT_S) if main else None
    recipe = replace(settings(2), checkpoint_every=1, step_timeout_sec=60.0)
    state = Trainer(env, engine, learner, recipe, out / "run").train()  # type: ignore[arg-type]
    (out / f"rank{where.rank}.json").write_text(json.dumps({"steps": state.step}))


def run_sigterm_worker(out: Path) -> None:
    """Both ranks get SIGTERM (as srun forwards it) while rank 0 waits for groups that
    hang; both checkpoint the same step at once and stop, then resume to the end."""
    import os
    import threading

    from tests.rl.test_trainer import StuckEnv
    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed

    where = init_distributed(timeout_s=30.0)
    main = where.rank == 0
    (out / f"rank{where.rank}.pid").write_text(str(os.getpid()))
    recipe = replace(settings(6), async_steps=1, groups_in_flight=2, prompts_per_step=2,
                     checkpoint_every=100, stop_grace_sec=0.5)  # fmt: skip

    def trainer(env: object) -> Trainer:
        learner = DeepSpeedLearner(tiny_model(), lr=LR, zero_stage=3, bf16=False, eps=EPS)
        engine = TransformersEngine(tiny_model()) if main else None
        return Trainer(env, engine, learner, recipe, out / "run")  # type: ignore[arg-type]

    def every_rank() -> list[int]:
        return [int((out / f"rank{r}.pid").read_text()) for r in range(WORLD_SIZE)]

    stuck = StuckEnv(stuck_from=4, signalled=every_rank) if main else None
    first = trainer(stuck)
    stopped = first.train()
    hung = sum(t.name.startswith("rl-group-") and t.is_alive() for t in threading.enumerate())
    if stuck is not None:
        stuck.release.set()
    second = trainer(StuckEnv(stuck_from=10**6) if main else None)
    final = second.train()
    (out / f"rank{where.rank}.json").write_text(json.dumps({
        "stopped_at": stopped.step, "stop_requested": first.stop_requested, "hung": hung,
        "steps": final.step,
    }))  # fmt: skip


def run_push_failure_worker(out: Path) -> None:
    """Rank 0's weight push fails at the second step (an engine server died): every
    rank checkpoints that step and stops; fresh trainers resume to the end."""
    from tests.rl.test_trainer import PushFailsEngine
    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed

    where = init_distributed(timeout_s=30.0)
    main = where.rank == 0
    # 1 KiB buckets: the tiny model streams in many, and the push fails at the second
    recipe = replace(settings(4), checkpoint_every=100, push_bucket_mb=2**-10)

    def trainer(engine: object) -> Trainer:
        learner = DeepSpeedLearner(tiny_model(), lr=LR, zero_stage=3, bf16=False, eps=EPS)
        env = target_env() if main else None
        return Trainer(env, engine, learner, recipe, out / "run")  # type: ignore[arg-type]

    first = trainer(PushFailsEngine(tiny_model(), fail_at=2) if main else None)
    error = ""
    try:
        stopped = first.train().step
    except RuntimeError as failure:
        error, stopped = str(failure), first.state.step
    final = trainer(TransformersEngine(tiny_model()) if main else None).train()
    (out / f"rank{where.rank}.json").write_text(
        json.dumps({"stopped_at": stopped, "error": error, "steps": final.step})
    )


RANK0_EXIT = 17


def run_rank0_dies_worker(out: Path) -> None:
    """Rank 0 is killed in the middle of its first weight push (the process exits while
    a bucket is being sent): the other rank, in the same walk, fails with an error
    within the groups' timeouts instead of waiting for the job's time limit."""
    import os

    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed

    where = init_distributed(timeout_s=COLLECTIVE_TIMEOUT_S)
    main = where.rank == 0
    recipe = replace(settings(2), push_bucket_mb=2**-10, step_timeout_sec=20.0)
    engine = None
    if main:
        engine = TransformersEngine(tiny_model())
        sink = engine.weight_sink

        def dying_sink(version: int) -> object:
            inner, puts = sink(version), []

            def put(bucket: object, flat: torch.Tensor) -> None:
                puts.append(bucket)
                if len(puts) == 2:
                    os._exit(RANK0_EXIT)  # as SIGKILL or a lost node would: no goodbye

            inner.put = put  # type: ignore[method-assign]
            return inner

        engine.weight_sink = dying_sink  # type: ignore[method-assign]
    learner = DeepSpeedLearner(tiny_model(), lr=LR, zero_stage=3, bf16=False, eps=EPS)
    env = target_env() if main else None
    trainer = Trainer(env, engine, learner, recipe, out / "run")  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        trainer.train()
        error = ""
    except Exception as failure:
        error = f"{type(failure).__name__}: {failure}"
    (out / f"rank{where.rank}.json").write_text(json.dumps({
        "error": error, "seconds": time.monotonic() - started, "step": trainer.state.step,
    }))  # fmt: skip
    os._exit(0)  # the group's teardown would wait for the dead rank


def run_worker(out: Path) -> None:
    """One rank: 3 steps (checkpoints at 2 and 3), then a fresh trainer resumes to 4."""
    torch.set_num_threads(1)
    import deepspeed.ops

    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # see test_learner.py
    if (out / "slow").exists():
        run_slow_worker(out)
        return
    if (out / "sigterm").exists():
        run_sigterm_worker(out)
        return
    if (out / "push_failure").exists():
        run_push_failure_worker(out)
        return
    if (out / "rank0_dies").exists():
        run_rank0_dies_worker(out)
        return
    where = init_distributed()
    main = where.rank == 0
    # "sequence": the two ranks form one sequence group and split every episode;
    # "packed": micro-batches are rows of episodes end to end (rl.packing).
    shard = sequence_groups(WORLD_SIZE, timeout_s=60) if (out / "sequence").exists() else None
    packed = (out / "packed").exists()

    def trainer(steps: int) -> Trainer:
        model = tiny_model()
        if shard is not None:
            split_token_mixers(model, shard)
        if packed:
            enable_packing(model)
        learner = DeepSpeedLearner(model, lr=LR, zero_stage=3, bf16=False,
                                   max_grad_norm=1.0, eps=EPS)  # fmt: skip
        # Only rank 0 holds an engine and the tasks; it starts from the same weights.
        engine = TransformersEngine(tiny_model()) if main else None
        env = target_env() if main else None
        recipe = replace(settings(steps), packing=packed)
        return Trainer(env, engine, learner, recipe, out / "run",  # type: ignore[arg-type]
                       sequence=shard)  # fmt: skip

    first = trainer(3)
    first.train()
    second = trainer(4)
    latest = second.latest_checkpoint()
    resumed_from = int(latest.name.split("-")[1]) if latest else 0
    second.train()
    weights = second.learner.full_state_dict()
    if main:
        torch.save(weights, out / "weights.pt")
    (out / f"rank{where.rank}.json").write_text(
        json.dumps({"resumed_from": resumed_from, "steps": second.state.step})
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
@pytest.mark.parametrize("split", ["episodes", "sequence", "packed", "packed-sequence"])
def test_two_ranks_train_as_one_process_does(tmp_path: Path, split: str) -> None:
    """The ranks share the episodes (data parallel) or split each one (a sequence group),
    with right-padded micro-batches or packed rows; one process pads."""
    for mode in split.split("-"):
        if mode != "episodes":
            (tmp_path / mode).touch()
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S)

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    assert [r["resumed_from"] for r in ranks] == [3, 3]  # both ranks resumed the same checkpoint
    assert [r["steps"] for r in ranks] == [4, 4]
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))
    assert [c.name for c in checkpoints] == ["step-000004"]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    distributed = [json.loads(line) for line in lines]
    assert [m["step"] for m in distributed] == [1, 2, 3, 4]  # rank 0 alone logs

    torch.set_num_threads(1)
    model = tiny_model()
    reference = Trainer(target_env(), TransformersEngine(model),  # type: ignore[arg-type]
                        LocalLearner(model, lr=LR, max_grad_norm=1.0, eps=EPS), settings(4),
                        tmp_path / "local")  # fmt: skip
    reference.train()
    local = [
        json.loads(line) for line in (tmp_path / "local" / "metrics.jsonl").read_text().splitlines()
    ]
    for ours, theirs in zip(distributed, local, strict=True):
        assert ours["reward_mean"] == theirs["reward_mean"]  # the same episodes were drawn
        assert ours["response_tokens"] == theirs["response_tokens"]  # counted over both ranks
        assert ours["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=1e-5)
    weights = torch.load(tmp_path / "weights.pt", weights_only=True)
    for name, tensor in reference.learner.full_state_dict().items():
        assert torch.allclose(weights[name], tensor, atol=1e-5), name


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
def test_ranks_wait_for_a_slow_step_without_a_collective_timing_out(tmp_path: Path) -> None:
    """rl.step_timeout_sec, not the training group's rl.collective_timeout_sec, bounds how
    long the ranks wait for rank 0 to collect a step (at paper scale: hours against a
    watchdog of minutes)."""
    (tmp_path / "slow").touch()
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    assert [r["steps"] for r in ranks] == [2, 2]
    assert [c.name for c in (tmp_path / "run" / "checkpoints").glob("step-*")] == ["step-000002"]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
def test_sigterm_with_groups_in_flight_checkpoints_every_rank_and_the_resume_finishes(
    tmp_path: Path,
) -> None:
    (tmp_path / "sigterm").touch()
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    assert all(r["stop_requested"] for r in ranks)
    stopped_at = ranks[0]["stopped_at"]
    assert 1 <= stopped_at < 6 and [r["stopped_at"] for r in ranks] == [stopped_at] * 2
    assert ranks[0]["hung"] >= 1  # rank 0 stopped while groups were still being generated
    assert [r["steps"] for r in ranks] == [6, 6]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
def test_a_failed_weight_push_checkpoints_every_rank_before_the_run_stops(
    tmp_path: Path,
) -> None:
    (tmp_path / "push_failure").touch()
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    assert [r["stopped_at"] for r in ranks] == [2, 2]  # the failed push's step was kept
    assert "engine server 1" in ranks[0]["error"] and not ranks[1]["error"]
    assert [r["steps"] for r in ranks] == [4, 4]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
def test_rank0_killed_mid_push_fails_the_other_rank_within_the_timeouts(tmp_path: Path) -> None:
    (tmp_path / "rank0_dies").touch()
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S, codes=[RANK0_EXIT, 0])
    other = json.loads((tmp_path / "rank1.json").read_text())
    assert other["error"], "the surviving rank finished a push its rank 0 never did"
    assert other["step"] == 1  # the first step's update, then the push it never finished
    # the step's own work, then the push's gathers and meetings: bounded by the
    # control group's timeout (20 s) and the training group's (3 s), not by the job
    assert other["seconds"] < 60 + 20 + 3, other


def test_shards_balance_tokens_and_keep_every_episode() -> None:
    lengths = [50, 10, 40, 30, 30, 5]
    shards = balanced_shards(lengths, 2)
    assert sorted(i for shard in shards for i in shard) == list(range(len(lengths)))
    loads = [sum(lengths[i] for i in shard) for shard in shards]
    assert abs(loads[0] - loads[1]) <= max(lengths) and sum(loads) == 165
    assert balanced_shards([7, 7], 4) == [[0], [1], [], []]  # idle ranks get nothing
    with pytest.raises(ValueError, match="world_size"):
        balanced_shards([1], 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one rank of the distributed trainer test")
    parser.add_argument("--worker", type=Path, required=True, help="output folder")
    run_worker(parser.parse_args().worker)
    from tmax.rl.launch.ranks import leave_without_teardown

    leave_without_teardown(0)  # as a real rank ends: gloo's teardown can abort
