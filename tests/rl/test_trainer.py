"""The RL loop: learning on a known-answer environment, zero-std filtering and active
sampling, staleness, micro-batch normalisation, checkpoint/resume and SIGTERM."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from tmax.rl.engines.local import Engine, TransformersEngine
from tmax.rl.episodes.environments import TargetTokenEnvironment
from tmax.rl.episodes.rollout import Sample
from tmax.rl.learners.learner import LocalLearner
from tmax.rl.loss import group_advantages
from tmax.rl.trainer import Group, RLSettings, Trainer, TrainerState, VersionLock
from tmax.rl.weights.streaming import StateDictSink, WeightSink

VOCAB = 16


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=True,
    )  # fmt: skip
    return AutoModelForCausalLM.from_config(config)


def target_env() -> TargetTokenEnvironment:
    """Four prompts with one known answer among 16 tokens: chance is 1/16."""
    return TargetTokenEnvironment({f"p{i}": ([1, 2 + i, 3], 7) for i in range(4)})


def make_trainer(tmp_path: Path, env: object, lr: float = 3e-2, **overrides: object) -> Trainer:
    model = tiny_model()
    settings = RLSettings(
        **{"group_size": 8, "prompts_per_step": 4, "steps": 10, "learning_rate": lr,
           "async_steps": 0, "checkpoint_every": 1000, "seed": 0, **overrides}  # type: ignore[arg-type]
    )  # fmt: skip
    return Trainer(env, TransformersEngine(model), LocalLearner(model, lr=lr), settings,
                   tmp_path)  # type: ignore[arg-type]  # fmt: skip


def curve(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_reward_rises_from_chance_to_near_one(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, target_env(), steps=40)
    trainer.train()
    rewards = [m["reward_mean"] for m in curve(tmp_path)]
    assert sum(rewards[:3]) / 3 < 0.3
    assert sum(rewards[-3:]) / 3 > 0.85, rewards
    last = [m for m in curve(tmp_path) if m["groups_trained"]][-1]
    for key in (
        "masked_fraction",
        "logp_diff_mean",
        "logp_diff_max",
        "entropy",
        "loss",
        "zero_std_fraction",
        "staleness_mean",
        "response_tokens_mean",
        "grad_norm",
    ):
        assert key in last  # fmt: skip


class FrozenEngine(TransformersEngine):
    """An engine that never takes new weights: every episode is sampled from the initial
    policy, so the behaviour log-probs μ are stale by any number of versions."""

    def update_weights(self, weights: object, version: int) -> None:  # type: ignore[override]
        self.policy_version = version  # tagged current, so no group is dropped as stale

    def weight_sink(self, version: int) -> WeightSink:
        engine = self

        class Discard(StateDictSink):
            def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
                pass

            def finish(self) -> None:
                engine.policy_version = version

        return Discard()


def target_probabilities(model: torch.nn.Module, env: TargetTokenEnvironment) -> list[float]:
    with torch.no_grad():
        return [
            float(model(input_ids=torch.tensor([prompt])).logits[0, -1].softmax(-1)[target])
            for prompt, target in env.prompts.values()
        ]


def test_dppo_learns_off_policy_from_stale_behaviour_log_probs(tmp_path: Path) -> None:
    """The trainer's policy π moves away from a frozen behaviour policy μ: the DPPO mask
    must stop only the tokens pushed further out of the trust region (positive advantage,
    π > μ + δ), and let the rest keep learning. Inverted, it stops everything inside the
    region and π never moves; left out, nothing is ever masked."""
    env = target_env()
    lr = 3e-2
    settings = RLSettings(group_size=8, prompts_per_step=4, steps=20, learning_rate=lr,
                          async_steps=0, checkpoint_every=1000, seed=0)  # fmt: skip
    learner = LocalLearner(tiny_model(), lr=lr)
    trainer = Trainer(env, FrozenEngine(tiny_model()), learner, settings, tmp_path)  # type: ignore[arg-type]
    before = target_probabilities(tiny_model(), env)
    trainer.train()
    after = target_probabilities(learner.model, env)
    assert max(before) < 0.1 and min(after) > 0.9, (before, after)
    metrics = curve(tmp_path)
    assert max(m["reward_mean"] for m in metrics) < 0.3  # the frozen engine stays at chance
    trained = [m for m in metrics if m["groups_trained"]]
    assert 0 < max(m["masked_fraction"] for m in trained) < 1  # it fired, on some tokens
    assert max(m["logp_diff_max"] for m in trained) > 1.0  # far off-policy by the end


def test_grpo_baseline_also_learns(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, target_env(), steps=40, loss="grpo")
    trainer.train()
    rewards = [m["reward_mean"] for m in curve(tmp_path)]
    assert sum(rewards[-3:]) / 3 > 0.85, rewards


class ScriptedEnv:
    """Groups with fixed rewards per task, to watch the filters."""

    def __init__(self, rewards: dict[str, list[float]]) -> None:
        self.rewards = rewards
        self.drawn: list[str] = []

    def tasks(self) -> Sequence[str]:
        return sorted(self.rewards)

    def sample_group(self, task: str, engine: Engine, group_size: int, seed: int) -> list[Sample]:
        self.drawn.append(task)
        version = engine.policy_version
        return [
            Sample(task, [1, 2, 3], [0, 0, 1], [0.0, 0.0, -2.0], r, version, "submitted", 1, 1, 1)
            for r in self.rewards[task][:group_size]
        ]


def test_zero_std_groups_are_dropped_and_replaced(tmp_path: Path) -> None:
    env = ScriptedEnv({"easy": [1.0] * 4, "hard": [0.0] * 4, "mixed": [0.0, 1.0, 1.0, 0.0]})
    trainer = make_trainer(tmp_path, env, group_size=4, prompts_per_step=2, steps=1,
                           max_sampling_rounds=4)  # fmt: skip
    trainer.train()
    [metrics] = curve(tmp_path)
    assert metrics["groups_trained"] == 2  # only "mixed" groups, refilled by active sampling
    assert metrics["groups_collected"] > 2
    assert 0 < metrics["zero_std_fraction"] < 1


@pytest.mark.parametrize(
    ("zero_std_filter", "trained"), [(True, 1), (False, 3)], ids=["filter", "no-filter"]
)
def test_the_zero_std_filter_works_without_active_sampling(
    tmp_path: Path, zero_std_filter: bool, trained: int
) -> None:
    """Active sampling off: a step draws prompts_per_step groups, no replacement, and
    the filter alone decides which of them are trained on."""
    env = ScriptedEnv({"easy": [1.0] * 4, "hard": [0.0] * 4, "mixed": [0.0, 1.0, 1.0, 0.0]})
    trainer = make_trainer(tmp_path, env, group_size=4, prompts_per_step=3, steps=1,
                           active_sampling=False, zero_std_filter=zero_std_filter)  # fmt: skip
    trainer.train()
    [metrics] = curve(tmp_path)
    assert len(env.drawn) == 3
    assert metrics["groups_collected"] == 3
    assert metrics["groups_trained"] == trained
    # The token normaliser counts only the trained groups' response tokens; the
    # learner's compute, every token of their 3-token sequences.
    assert metrics["response_tokens"] == trained * 4
    assert metrics["sequence_tokens"] == trained * 4 * 3


def test_a_step_of_only_uniform_groups_is_skipped_with_a_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = ScriptedEnv({"hard": [0.0] * 4, "harder": [0.0] * 4})
    trainer = make_trainer(tmp_path, env, group_size=4, prompts_per_step=2, steps=1,
                           max_sampling_rounds=2)  # fmt: skip
    before = [p.detach().clone() for p in trainer.learner.model.parameters()]
    with caplog.at_level(logging.WARNING, logger="tmax.rl"):
        trainer.train()
    assert "the tasks look too hard for this model" in caplog.text
    after = list(trainer.learner.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert len(env.drawn) == 4  # bounded: max_sampling_rounds × prompts_per_step


def test_stale_groups_are_dropped(tmp_path: Path) -> None:
    env = ScriptedEnv({"mixed": [0.0, 1.0, 1.0, 0.0]})
    trainer = make_trainer(tmp_path, env, group_size=4, prompts_per_step=1, steps=1,
                           async_steps=1)  # fmt: skip
    old = Group("mixed", env.sample_group("mixed", trainer.engine, 4, 0), -5, 0)
    trainer.state = TrainerState(step=0, policy_version=0, data_index=1, pending=[old])
    trainer.train()
    [metrics] = curve(tmp_path)
    assert metrics["groups_dropped_stale"] == 1 and metrics["staleness_max"] <= 1


@pytest.mark.parametrize("async_steps", [0, 1])
def test_the_starting_policys_level_is_what_version_0_played(
    tmp_path: Path, async_steps: int
) -> None:
    trainer = make_trainer(tmp_path, target_env(), steps=4, async_steps=async_steps)
    trainer.train()
    metrics = curve(tmp_path)
    first = metrics[0]  # every group of the first step was played by the starting policy
    assert first["episodes_start_policy"] == 8 * 4
    assert first["reward_start_policy_mean"] == pytest.approx(first["reward_mean"])
    later = [m["episodes_start_policy"] for m in metrics[1 + async_steps :]]
    assert later and set(later) == {0}
    assert all(m["reward_start_policy_mean"] is None for m in metrics[1 + async_steps :])


def test_micro_batches_share_one_token_normaliser(tmp_path: Path) -> None:
    """The gradient of a step does not depend on how the batch is cut into micro-batches."""
    trainer = make_trainer(tmp_path, target_env())
    groups = [
        Group(task, target_env().sample_group(task, trainer.engine, 8, seed=i), 0, i)
        for i, task in enumerate(["p0", "p1", "p2"])
    ]
    advantages = group_advantages(torch.tensor([g.rewards for g in groups]))
    samples = [s for g in groups for s in g.samples]
    gradients = []
    for budget in (10_000, 4):  # one micro-batch, or one sample per micro-batch
        trainer.settings = RLSettings(group_size=8, micro_batch_tokens=budget)
        trainer.learner.step = lambda: {}  # type: ignore[method-assign]  # keep the grads
        trainer.update(samples, advantages.flatten().tolist())
        params = trainer.learner.model.parameters()
        gradients.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
        trainer.learner.model.zero_grad(set_to_none=True)
    assert gradients[0].abs().max() > 0
    assert torch.allclose(gradients[0], gradients[1], atol=1e-7, rtol=1e-5)


def test_resume_gives_the_same_next_step_as_an_uninterrupted_run(tmp_path: Path) -> None:
    straight = make_trainer(tmp_path / "straight", target_env(), steps=4)
    straight.train()
    first = make_trainer(tmp_path / "resumed", target_env(), steps=2, checkpoint_every=2)
    first.train()
    second = make_trainer(tmp_path / "resumed", target_env(), steps=4, checkpoint_every=2)
    assert second.resume() and second.state.step == 2
    second.train()
    for a, b in zip(straight.learner.model.parameters(), second.learner.model.parameters(),
                    strict=True):  # fmt: skip
        assert torch.equal(a, b)
    assert (
        curve(tmp_path / "straight")[-1]["reward_mean"]
        == curve(tmp_path / "resumed")[-1]["reward_mean"]
    )


def test_a_checkpoint_written_before_the_folders_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``trainer.pt`` whose queued groups name ``tmax.rl.rollout.Sample`` (where it lived
    before rl/ had folders) loads: the interrupted run of an older version resumes."""
    import sys

    from tmax.rl.episodes import rollout

    first = make_trainer(tmp_path, target_env(), steps=2, checkpoint_every=2)
    first.train()
    path = first.latest_checkpoint() / "trainer.pt"
    saved = torch.load(path, weights_only=False)
    sample = Sample("p0", [1, 2, 3, 7], [0, 0, 0, 1], [0.0, 0.0, 0.0, -2.5], 1.0, 2, "completed",
                    0, 1, 1)  # fmt: skip
    saved["state"].pending = [Group("p0", [sample], policy_version=2, data_index=8)]
    with monkeypatch.context() as old_layout:
        old_layout.setattr(Sample, "__module__", "tmax.rl.rollout")
        old_layout.setitem(sys.modules, "tmax.rl.rollout", rollout)
        torch.save(saved, path)
    assert b"tmax.rl.rollout" in path.read_bytes()
    assert "tmax.rl.rollout" not in sys.modules

    second = make_trainer(tmp_path, target_env(), steps=4, checkpoint_every=2)
    assert second.resume() and second.state.step == 2
    [group] = second.state.pending
    assert group.samples == [sample] and type(group.samples[0]) is Sample


class StuckEnv:
    """The target environment, except that groups from data position ``stuck_from`` on
    hang (a command that cannot be interrupted) until ``release`` is set. Half a second
    after the first of them starts (the trainer is then waiting for them to collect a
    step), the processes ``signalled`` (this one) get SIGTERM, as from Slurm at
    preemption."""

    def __init__(
        self, stuck_from: int, signalled: Callable[[], list[int]] = lambda: [os.getpid()]
    ) -> None:
        self.inner = target_env()
        self.signalled = signalled
        self.stuck_from = stuck_from
        self.release = threading.Event()
        self.generated: list[int] = []
        self.cancelled = 0

    def tasks(self) -> Sequence[str]:
        return self.inner.tasks()

    def terminate(self) -> None:
        for pid in self.signalled():
            os.kill(pid, signal.SIGTERM)

    def cancel(self, stop: bool = True) -> None:
        self.cancelled += stop  # heard, but the stuck commands run on regardless

    def sample_group(self, task: str, engine: Engine, group_size: int, seed: int) -> list[Sample]:
        index = seed  # the trainer seeds a group with seed·7919 + its position; seed is 0
        if index >= self.stuck_from:
            if index == self.stuck_from:
                threading.Timer(0.5, self.terminate).start()
            self.release.wait()
        self.generated.append(index)
        return self.inner.sample_group(task, engine, group_size, seed)


def test_sigterm_checkpoints_at_once_without_waiting_for_groups_in_flight(
    tmp_path: Path,
) -> None:
    """Two groups a step, two in flight: SIGTERM while the third step's groups hang.
    The run must checkpoint and return while they still hang, saving their positions
    as unfinished, and the resumed run must generate them and reach every step."""
    env = StuckEnv(stuck_from=4)
    settings = {"group_size": 8, "prompts_per_step": 2, "async_steps": 1,
                "groups_in_flight": 2, "stop_grace_sec": 0.5}  # fmt: skip
    trainer = make_trainer(tmp_path, env, steps=5, **settings)
    assert threading.current_thread() is threading.main_thread()
    # A trainer that waited for the stuck groups gets them after 30 s and fails below.
    unstick = threading.Timer(30.0, env.release.set)
    unstick.start()
    try:
        state = trainer.train()
        hung = sum(t.name.startswith("rl-group-") and t.is_alive() for t in threading.enumerate())
        generated = list(env.generated)
    finally:
        unstick.cancel()
        env.release.set()
        for thread in threading.enumerate():
            if thread.name.startswith("rl-group-"):
                thread.join()
    assert trainer.stop_requested and env.cancelled
    saved = torch.load(trainer.latest_checkpoint() / "trainer.pt", weights_only=False)["state"]
    assert 4 in saved.unfinished
    assert hung == len(saved.unfinished)  # returned while they were still being generated
    assert 1 <= state.step == saved.step < 5
    assert [m["step"] for m in curve(tmp_path)] == list(range(1, state.step + 1))
    # Every position drawn is accounted for: generated (trained on or queued) or unfinished.
    assert {g.data_index for g in saved.pending} <= set(generated)
    assert set(generated) | set(saved.unfinished) == set(range(saved.data_index))

    resumed_env = StuckEnv(stuck_from=10**6)
    resumed = make_trainer(tmp_path, resumed_env, steps=5, **settings)
    final = resumed.train()
    assert final.step == 5 and [m["step"] for m in curve(tmp_path)] == [1, 2, 3, 4, 5]
    first = resumed_env.generated[: len(saved.unfinished)]
    assert sorted(first) == saved.unfinished  # the unfinished positions come first
    assert not set(first) & set(generated)


def test_sigterm_between_steps_checkpoints_and_stops(tmp_path: Path) -> None:
    """Inline generation (async_steps 0): the step under way finishes, then the run
    checkpoints and stops; the resumed run starts from that step."""
    env = target_env()
    trainer = make_trainer(tmp_path, env, steps=50)
    original = env.sample_group

    def sample_and_interrupt(*args: object, **kwargs: object) -> list[Sample]:
        if trainer.state.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    env.sample_group = sample_and_interrupt  # type: ignore[method-assign]
    state = trainer.train()
    assert trainer.stop_requested and 3 <= state.step < 50
    assert trainer.latest_checkpoint() is not None
    resumed = make_trainer(tmp_path, target_env(), steps=state.step + 1)
    assert resumed.resume() and resumed.state.step == state.step


def test_async_generation_runs_ahead_within_the_bound(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, target_env(), steps=6, async_steps=2)
    trainer.train()
    metrics = curve(tmp_path)
    assert len(metrics) == 6
    assert all(m["staleness_max"] <= 2 for m in metrics)


@pytest.mark.parametrize(("async_steps", "overlaps"), [(1, True), (0, False)],
                         ids=["async", "sync"])  # fmt: skip
def test_groups_generate_while_the_learner_updates(
    tmp_path: Path, async_steps: int, overlaps: bool
) -> None:
    """Asynchronous mode: the next groups are being generated while an update runs
    (each update is made to take 0.3 s); synchronous mode: never."""
    env = target_env()
    trainer = make_trainer(tmp_path, env, steps=4, async_steps=async_steps)
    updates: list[tuple[float, float]] = []
    starts: list[float] = []
    learner_step, sample_group = trainer.learner.step, env.sample_group

    def slow_step() -> dict[str, float]:
        began = time.monotonic()
        threading.Event().wait(0.3)
        result = learner_step()
        updates.append((began, time.monotonic()))
        return result

    def timed_group(*args: object, **kwargs: object) -> list[Sample]:
        starts.append(time.monotonic())
        return sample_group(*args, **kwargs)  # type: ignore[arg-type]

    trainer.learner.step = slow_step  # type: ignore[method-assign]
    env.sample_group = timed_group  # type: ignore[method-assign]
    trainer.train()
    assert len(updates) >= 3
    during = [t for t in starts if any(a < t < b for a, b in updates)]
    assert bool(during) is overlaps, (updates, starts)


def test_several_groups_generate_at_once_within_the_bound(tmp_path: Path) -> None:
    env = target_env()
    original = env.sample_group
    lock = threading.Lock()
    running, most = [0], [0]

    def slow_group(*args: object, **kwargs: object) -> list[Sample]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            threading.Event().wait(0.05)  # long enough for the others to start
            return original(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            with lock:
                running[0] -= 1

    env.sample_group = slow_group  # type: ignore[method-assign]
    trainer = make_trainer(tmp_path, env, steps=5, async_steps=1, groups_in_flight=3)
    state = trainer.train()
    metrics = curve(tmp_path)
    assert len(metrics) == 5 and state.policy_version == 5
    assert most[0] == 3
    assert all(m["staleness_max"] <= 1 for m in metrics)


def test_a_weight_update_waits_for_running_groups_and_goes_before_new_ones() -> None:
    lock = VersionLock()
    events: list[str] = []
    reader_in, writer_waiting = threading.Event(), threading.Event()

    def reader(name: str, hold: float) -> None:
        with lock.shared():
            events.append(f"{name} in")
            reader_in.set()
            threading.Event().wait(hold)
            events.append(f"{name} out")

    def writer() -> None:
        writer_waiting.set()
        with lock.exclusive():
            events.append("update")

    first = threading.Thread(target=reader, args=("group1", 0.2))
    first.start()
    reader_in.wait()
    update = threading.Thread(target=writer)
    update.start()
    writer_waiting.wait()
    while lock._writers_waiting == 0:  # until the update is queued behind group1
        threading.Event().wait(0.005)
    second = threading.Thread(target=reader, args=("group2", 0.0))
    second.start()
    for thread in (first, update, second):
        thread.join()
    assert events == ["group1 in", "group1 out", "update", "group2 in", "group2 out"]


def test_snapshots_are_taken_at_their_steps_before_the_checkpoint(tmp_path: Path) -> None:
    """Checkpoint selection's snapshots: the weights after exactly those steps, handed
    over before that step's checkpoint (so a resumed run already has them)."""
    trainer = make_trainer(tmp_path, target_env(), steps=4, checkpoint_every=2)
    taken: list[tuple[int, StateDictSink, bool]] = []

    def keep(step: int) -> StateDictSink:
        checkpointed = (tmp_path / f"checkpoints/step-{step:06d}").exists()
        taken.append((step, StateDictSink(), checkpointed))
        return taken[-1][1]

    trainer.snapshot_steps, trainer.snapshot = frozenset({1, 4}), keep
    trainer.train()
    assert [(step, checkpointed) for step, _, checkpointed in taken] == [(1, False), (4, False)]
    final = trainer.learner.full_state_dict()
    assert all(torch.equal(taken[-1][1].weights[name], final[name]) for name in final)
    assert any(not torch.equal(taken[0][1].weights[name], final[name]) for name in final)


def test_gradient_checkpointing_recomputes_layers_and_keeps_the_gradient() -> None:
    """rl.gradient_checkpointing: the same gradient, with every decoder layer run again in
    the backward pass (its activations were not kept)."""
    from tmax.rl.learners.learner import enable_gradient_checkpointing
    from tmax.rl.loss import sequence_logprobs

    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    gradients, calls = [], []
    for checkpointing in (False, True):
        model = tiny_model()
        if checkpointing:
            enable_gradient_checkpointing(model)
        model.train()
        forwards: list[object] = []
        model.model.layers[0].mlp.register_forward_pre_hook(lambda *args: forwards.append(args))  # noqa: B023
        logprobs, _ = sequence_logprobs(model, ids, torch.ones_like(ids))
        logprobs.sum().backward()
        calls.append(len(forwards))
        gradients.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert calls == [1, 2]
    assert torch.allclose(gradients[0], gradients[1], atol=1e-6)


class FailingEnv(ScriptedEnv):
    """ScriptedEnv whose episodes of the tasks in ``broken`` failed (sandbox errors)."""

    def __init__(self, rewards: dict[str, list[float]], broken: set[str]) -> None:
        super().__init__(rewards)
        self.broken = broken

    def sample_group(self, task: str, engine: Engine, group_size: int, seed: int) -> list[Sample]:
        samples = super().sample_group(task, engine, group_size, seed)
        if task in self.broken:
            samples = [
                Sample(task, s.tokens, s.loss_mask, s.behaviour_logprobs, 0.0, s.policy_version,
                       "failed", 0, 1, 1, failure="SandboxError: control shell died")
                for s in samples
            ]  # fmt: skip
        return samples


def test_failed_episodes_are_counted_and_a_step_of_only_failures_stops_the_run(
    tmp_path: Path,
) -> None:
    env = FailingEnv({"mixed": [0.0, 1.0, 1.0, 0.0], "broken": [1.0] * 4}, {"broken"})
    trainer = make_trainer(tmp_path / "some", env, group_size=4, prompts_per_step=2, steps=1,
                           active_sampling=False)  # fmt: skip
    trainer.train()
    [metrics] = curve(tmp_path / "some")
    assert metrics["episodes_failed"] == 4 and metrics["groups_trained"] == 1
    env = FailingEnv({"broken": [1.0] * 4}, {"broken"})
    trainer = make_trainer(tmp_path / "all", env, group_size=4, prompts_per_step=1, steps=1)
    with pytest.raises(
        RuntimeError, match=r"every one of the 16 episodes drawn failed.*control shell died"
    ):
        trainer.train()


class PushFailsEngine(TransformersEngine):
    """Its weight push fails at one version, as when an engine server dies."""

    def __init__(self, model: torch.nn.Module, fail_at: int) -> None:
        super().__init__(model)
        self.fail_at = fail_at

    def weight_sink(self, version: int) -> WeightSink:
        sink = super().weight_sink(version)
        if version != self.fail_at:
            return sink
        put, received = sink.put, []

        def dies_on_the_second_bucket(bucket: Sequence[int], flat: torch.Tensor) -> None:
            received.append(bucket)
            if len(received) == 2:
                raise RuntimeError("engine server 1 (node-3:8000) stopped: connection refused")
            put(bucket, flat)

        sink.put = dies_on_the_second_bucket  # type: ignore[method-assign]
        return sink


class GenerationFailsEnv(ScriptedEnv):
    """Generation itself fails from one data position on (every engine server gone)."""

    def __init__(self, rewards: dict[str, list[float]], fail_from: int) -> None:
        super().__init__(rewards)
        self.fail_from = fail_from

    def sample_group(self, task: str, engine: Engine, group_size: int, seed: int) -> list[Sample]:
        if seed >= self.fail_from:  # seed = the data position (the run's seed is 0)
            raise RuntimeError("every engine server is gone")
        return super().sample_group(task, engine, group_size, seed)


@pytest.mark.parametrize("fault", ["push", "generation"])
@pytest.mark.parametrize("async_steps", [0, 1])
def test_an_engine_failure_checkpoints_before_the_run_stops(
    tmp_path: Path, fault: str, async_steps: int
) -> None:
    """A failed weight push (the update is kept) or failed generation stops the run
    with a checkpoint of the last step, so the resubmitted job loses no step."""
    rewards = {"mixed": [0.0, 1.0, 1.0, 0.0]}
    settings = {"group_size": 4, "prompts_per_step": 1, "steps": 6, "async_steps": async_steps,
                "push_bucket_mb": 2**-10}  # fmt: skip  # many buckets: the push fails mid-way
    model = tiny_model()
    if fault == "push":
        env: ScriptedEnv = ScriptedEnv(rewards)
        engine: TransformersEngine = PushFailsEngine(model, fail_at=3)
    else:
        env, engine = GenerationFailsEnv(rewards, fail_from=3), TransformersEngine(model)
    trainer = Trainer(env, engine, LocalLearner(model, lr=3e-2), RLSettings(**settings),
                      tmp_path)  # type: ignore[arg-type]  # fmt: skip
    message = "stopped at step 3 .*connection refused" if fault == "push" else "engine server"
    with pytest.raises(RuntimeError, match=message):
        trainer.train()
    # Async generation runs ahead, so it may fail while an earlier step is collected.
    assert trainer.state.step in ({3} if fault == "push" or not async_steps else {2, 3})
    latest = trainer.latest_checkpoint()
    assert latest is not None and latest.name == f"step-{trainer.state.step:06d}"
    resumed = make_trainer(tmp_path, ScriptedEnv(rewards), **settings)  # type: ignore[arg-type]
    assert resumed.train().step == 6
    assert [m["step"] for m in curve(tmp_path)] == [1, 2, 3, 4, 5, 6]
