"""The RL loop (paper §4): DPPO on groups of sandboxed episodes, asynchronous.

One step, top to bottom (``Trainer.step``):

    groups   = the next prompts_per_step groups from the generator, each group_size
               episodes of one task, produced up to async_steps policy versions ahead
    groups   = without zero-std groups (all rewards equal: no signal), refilled by
               active sampling up to a bound
    A        = r − mean_group(r)                                (centred advantages)
    loss     = DPPO(π_trainer, μ_engine, A) / response tokens of the whole batch
    learner  : backward per micro-batch, one optimizer step (AdamW, constant lr)
    engine   ← the new weights (policy version + 1)

Distribution lives behind two small interfaces: the Engine (tmax.rl.engines.local: in-process
transformers on CPU, vLLM on GPUs) and the Learner (tmax.rl.learners.learner: one process, or
DeepSpeed ZeRO-3 across ranks). Checkpoints (every ``checkpoint_every`` steps and on
SIGTERM) hold the model, optimizer, RNG states, the data position, the generated groups
not yet trained on and the positions still being generated, so a resumed run continues
where it stopped. Neither waits for the groups in flight: a SIGTERM abandons them and
checkpoints at once (or after the update under way), within ``stop_grace_sec``.

With several ranks (torch.distributed initialised, e.g. by the DeepSpeed learner), every
rank runs ``Trainer.train``; rank 0 alone holds the environment and the engine, draws
and filters the groups, computes advantages and hands each rank its share of episodes
(tmax.rl.launch.collective). The loss is normalised by the token count of all ranks, weights
are gathered for the engine on all ranks and pushed by rank 0, checkpoints are written
by all ranks into one folder, and a SIGTERM on any rank stops all of them after a
checkpoint.
"""

from __future__ import annotations

import json
import logging
import pickle
import queue
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

import torch

from tmax.config import schema_default
from tmax.io import write_json
from tmax.rl.engines.local import Engine
from tmax.rl.episodes.rollout import EpisodeCancelled, Sample
from tmax.rl.launch import collective
from tmax.rl.learners.learner import Learner
from tmax.rl.learners.packing import pack_rows
from tmax.rl.learners.sequence_parallel import SequenceShard
from tmax.rl.loss import (
    dppo_loss,
    global_token_count,
    group_advantages,
    grpo_loss,
    sequence_logprobs,
    zero_std_groups,
)
from tmax.rl.weights.streaming import MIB, WeightSink, stream_weights
from tmax.settings import RLSection
from tmax.tracking import Tracker, job_tracker

log = logging.getLogger("tmax.rl")


def _default(key: str, kind: type) -> Any:
    """``rl.<key>``'s default from the config schema, as the field's type (``21600`` is
    the float ``21600.0`` for a float field, as it was when written here)."""
    return kind(schema_default("rl", key))


@dataclass(frozen=True)
class RLSettings:
    """The recipe (paper Table 13). The defaults are the config schema's (the paper's),
    read from it: written once."""

    loss: str = _default("loss", str)
    dppo_divergence: str = _default("dppo_divergence", str)
    dppo_threshold: float = _default("dppo_threshold", float)
    clip_low: float = _default("clip_low", float)
    clip_high: float = _default("clip_high", float)
    group_size: int = _default("group_size", int)
    prompts_per_step: int = _default("prompts_per_step", int)
    steps: int = _default("steps", int)
    learning_rate: float = _default("learning_rate", float)
    advantage: str = _default("advantage", str)
    temperature: float = _default("temperature", float)
    async_steps: int = _default("async_steps", int)
    zero_std_filter: bool = _default("zero_std_filter", bool)
    active_sampling: bool = _default("active_sampling", bool)
    max_sampling_rounds: int = _default("max_sampling_rounds", int)
    """Active sampling draws at most this many times prompts_per_step groups per step."""
    fp32_lm_head: bool = _default("fp32_lm_head", bool)
    checkpoint_every: int = _default("checkpoint_every", int)
    micro_batch_tokens: int = _default("micro_batch_tokens", int)
    packing: bool = _default("packing", bool)
    """Micro-batches are rows of whole episodes end to end instead of right-padded
    episodes (:mod:`tmax.rl.learners.packing`); the same gradient, fewer token slots."""
    groups_in_flight: int = _default("groups_in_flight", int)
    """Groups generated at once (asynchronous mode): their turns share the engine's
    batches, e.g. 8 × 32 episodes in flight for the paper's 8 prompts × 32 samples."""
    step_timeout_sec: float = _default("step_timeout_sec", float)
    """How long the other ranks wait for rank 0's next order (collecting a step's
    groups, pushing weights once the groups being generated let it) before the job
    fails: above the longest step. They wait on the control group, not under the
    training group's (NCCL) watchdog."""
    stop_grace_sec: float = _default("stop_grace_sec", float)
    """After SIGTERM: the checkpoint is written at once (the groups being generated are
    abandoned, not waited for; they are generated again after the resume), and the
    abandoned episodes get what is left of this long to remove their sandboxes."""
    push_bucket_mb: float = _default("push_bucket_mb", float)
    """The weight push and the snapshots stream in buckets of this many MiB
    (:mod:`tmax.rl.weights.streaming`): rank 0 holds two of them, not the model."""
    seed: int = 0

    @classmethod
    def from_config(cls, rl: RLSection | Mapping[str, Any], seed: int) -> RLSettings:
        """The recipe part of a model's rl section (the object or its mapping)."""
        if isinstance(rl, RLSection):
            rl = rl.asdict()
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in rl.items() if k in known}, seed=seed)


class Environment(Protocol):
    """Where groups come from: sandboxed tasks, or a synthetic test environment."""

    def tasks(self) -> Sequence[str]: ...

    def sample_group(
        self, task: str, engine: Engine, group_size: int, seed: int
    ) -> list[Sample]: ...


@dataclass
class Group:
    task: str
    samples: list[Sample]
    policy_version: int
    data_index: int

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples]


@dataclass
class StepOrder:
    """The step protocol: what rank 0 tells every rank to do in one step, one object
    per rank, consumed by the same code on every rank (:meth:`Trainer.execute`), so the
    ranks' collectives cannot fall out of order."""

    train: bool
    """An optimizer step on the episodes below, then new weights for the engine (all
    ranks gather them). False when the step had no informative group."""
    samples: list[Sample]
    """This rank's share of the step's episodes (balanced by tokens)."""
    advantages: list[float]
    """One per sample."""
    snapshot: bool
    """Gather the weights after the step for a snapshot (rank 0 writes it)."""
    checkpoint: bool
    """Write a checkpoint after the step (every rank writes its learner shard)."""
    stop: bool = False
    """The run is stopping (SIGTERM) and this step was abandoned while its groups were
    collected: no update; every rank writes the checkpoint and leaves the loop."""


@dataclass
class TrainerState:
    """What a checkpoint must restore beyond the weights and the optimizer."""

    step: int = 0
    policy_version: int = 0
    """Optimizer updates applied so far: the version of the weights the engine serves
    (a step with nothing to train on does not change it)."""
    data_index: int = 0
    """How many groups the generator has drawn (the data position)."""
    pending: list[Group] = field(default_factory=list)
    """Generated groups not yet trained on."""
    unfinished: list[int] = field(default_factory=list)
    """Data positions claimed but not generated yet (in flight at the checkpoint): the
    resumed run generates them first, so no position is skipped."""

    def __setstate__(self, saved: dict[str, Any]) -> None:
        # Checkpoints written before a field existed load with its default.
        self.__dict__.update({"unfinished": [], **saved})


MOVED_MODULES = {"tmax.rl.rollout": "tmax.rl.episodes.rollout"}
"""Where the classes a ``trainer.pt`` holds lived before ``tmax.rl`` was split into
folders, for those that moved: its state is this module's classes and the queued groups'
samples (``Sample``). A checkpoint of an interrupted run written by the old layout still resumes."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED_MODULES.get(module, module), name)


_checkpoint_pickle = SimpleNamespace(__name__="pickle", Unpickler=_Unpickler, load=pickle.load)
"""The pickle module torch.load unpickles ``trainer.pt`` with (torch subclasses its
``Unpickler``, so the renaming runs under torch's own)."""


class VersionLock:
    """Groups hold it shared while they generate; a weight update holds it alone, so
    the weights never change under a group (every sample of a group has one policy
    version). A waiting update goes before groups that have not started yet."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self, give_up: Callable[[], bool] | None = None) -> Iterator[bool]:
        """Yields True once held alone; False if ``give_up()`` became true while
        waiting (the caller then skips what needed the lock)."""
        acquired = False
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writing or self._readers:
                    if give_up is not None and give_up():
                        break
                    self._cond.wait(timeout=0.2)
                else:
                    self._writing = acquired = True
            finally:
                self._writers_waiting -= 1
                self._cond.notify_all()
        try:
            yield acquired
        finally:
            if acquired:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()


class StopRequested(Exception):
    """The run is stopping (SIGTERM): the step being collected is abandoned."""


class GroupProducer:
    """Generates groups in data order, at most ``async_steps`` policy versions ahead of
    the trainer: ``groups_in_flight`` at a time, each in its own thread, when
    ``async_steps`` > 0; inline and one at a time otherwise. Groups join the queue as
    they finish, so with several in flight a short one may overtake a long one.

    Every claimed data position is either queued, being generated (``unfinished``) or
    handed to the trainer, so a checkpoint can be taken at any moment without waiting
    for the groups in flight (:meth:`snapshot`): the resumed run generates the
    unfinished positions again, first."""

    def __init__(
        self,
        env: Environment,
        engine: Engine,
        settings: RLSettings,
        state: TrainerState,
        engine_lock: VersionLock,
    ) -> None:
        self.env, self.engine, self.settings = env, engine, settings
        self.tasks = list(env.tasks())
        if not self.tasks:
            raise ValueError("the environment has no tasks to train on")
        self.data_index = state.data_index
        self._redo = sorted(state.unfinished)
        self.unfinished: set[int] = set()
        self.engine_lock = engine_lock
        self.ready: queue.Queue[Group] = queue.Queue()
        for group in state.pending:
            self.ready.put(group)
        cancel = getattr(env, "cancel", None)
        if cancel is not None:
            cancel(False)  # a previous run on this environment may have stopped it
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []
        self.error: BaseException | None = None
        """What ended generation, if anything did (not an episode's failure: those are
        failed episodes; a bug, or every engine server gone)."""

    def task_at(self, index: int) -> str:
        """Epochs over the tasks, each in its own seeded order."""
        epoch, offset = divmod(index, len(self.tasks))
        order = list(self.tasks)
        random.Random(self.settings.seed * 1_000_003 + epoch).shuffle(order)
        return order[offset]

    def claim(self) -> tuple[int, str]:
        """The next data position (those left unfinished by the last run first) and its
        task; the caller generates it."""
        with self._lock:
            if self._redo:
                index = self._redo.pop(0)
            else:
                index = self.data_index
                self.data_index += 1
            self.unfinished.add(index)
        return index, self.task_at(index)

    def generate(self, index: int, task: str) -> Group:
        # The engine's weights do not change while a group is generated: the trainer
        # pushes new weights only when no group holds the lock, and every sample is tagged.
        with self.engine_lock.shared():
            version = self.engine.policy_version
            samples = self.env.sample_group(
                task, self.engine, self.settings.group_size,
                seed=self.settings.seed * 7919 + index,
            )  # fmt: skip
        return Group(task, samples, version, index)

    def produce_one(self) -> Group:
        """One group, generated in the caller's thread (an abandoned one stays unfinished)."""
        index, task = self.claim()
        group = self.generate(index, task)
        with self._lock:
            self.unfinished.discard(index)
        return group

    def start(self) -> None:
        if self.settings.async_steps > 0 and self._thread is None:
            self._halt.clear()
            self._thread = threading.Thread(target=self._run, name="rl-generator", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        settings = self.settings
        # Run ahead by at most async_steps steps' worth of groups, queued or in flight.
        limit = (settings.async_steps + 1) * settings.prompts_per_step
        parallel = max(1, settings.groups_in_flight)
        while not self._halt.is_set() and self.error is None:
            with self._lock:
                busy = len(self.unfinished)
                room = busy < parallel and self.ready.qsize() + busy < limit
            if not room:
                time.sleep(0.01)
                continue
            index, task = self.claim()
            # Daemon threads: a stopping run does not wait for the groups in flight.
            worker = threading.Thread(target=self._work, args=(index, task),
                                      name=f"rl-group-{index}", daemon=True)  # fmt: skip
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
            worker.start()

    def _work(self, index: int, task: str) -> None:
        try:
            group = self.generate(index, task)
        except EpisodeCancelled:
            return  # stays unfinished: generated again after the resume
        except BaseException as error:
            self.error = error  # next_group raises it in the trainer's thread
            log.exception("generating group %d (%s) failed", index, task)
            return
        with self._lock:
            self.unfinished.discard(index)
            self.ready.put(group)

    def snapshot(self) -> tuple[int, list[Group], list[int]]:
        """(data position, queued groups, unfinished positions), consistent with each
        other, without stopping generation."""
        with self._lock:
            unfinished = sorted(self.unfinished | set(self._redo))
            return self.data_index, list(self.ready.queue), unfinished

    def give_back(self, groups: Sequence[Group]) -> None:
        """Queue groups again (a step abandoned while collecting them)."""
        with self._lock:
            for group in groups:
                self.ready.put(group)

    def halt(self) -> None:
        """Claim no more groups (those in flight go on)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def abandon(self, deadline: float) -> int:
        """Halt, tell the environment to abandon its episodes (if it can), and wait for
        the groups in flight until ``deadline`` (monotonic clock); returns how many are
        still running then."""
        self.halt()
        cancel = getattr(self.env, "cancel", None)
        if cancel is not None:
            cancel()
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        running = sum(w.is_alive() for w in self._workers)
        if running:
            log.warning("%d group(s) still generating at exit; their data positions are "
                        "saved as unfinished", running)  # fmt: skip
        return running

    def next_group(self, stopping: Callable[[], bool] = lambda: False) -> Group:
        """The next finished group; raises :class:`StopRequested` once ``stopping()``."""
        if self._thread is None:
            if stopping():
                raise StopRequested
            if self.ready.empty():
                return self.produce_one()
            return self.ready.get()
        while True:
            try:
                return self.ready.get(timeout=0.2)
            except queue.Empty:
                if self.error is not None:
                    raise RuntimeError(f"generating groups failed: {self.error!r}") from (
                        self.error
                    )
                if stopping():
                    raise StopRequested from None
                if not self._thread.is_alive():
                    raise RuntimeError("the generator thread ended") from None


class Trainer:
    def __init__(
        self,
        env: Environment | None,
        engine: Engine | None,
        learner: Learner,
        settings: RLSettings,
        run_dir: Path,
        *,
        snapshot_steps: Collection[int] = (),
        snapshot: Callable[[int], WeightSink] | None = None,
        sequence: SequenceShard | None = None,
        tracker: Tracker | None = None,
    ) -> None:
        """``env`` and ``engine`` are needed on rank 0 only (None on the other ranks).

        With ``sequence`` (``rl.sequence_parallel_size`` > 1,
        :mod:`tmax.rl.learners.sequence_parallel`) the ranks of each sequence group get the
        same episodes and each scores its slice of every sequence; the episodes are shared
        by tokens over the groups.

        After each step in ``snapshot_steps`` the weights are streamed (a collective) into
        the sink rank 0's ``snapshot(step)`` returns (checkpoint selection keeps them),
        before that step's checkpoint, so a resumed run never lacks an earlier snapshot.

        Rank 0 logs each step's metrics to ``run_dir/metrics.jsonl`` and to ``tracker``
        (by default the job's, :func:`tmax.tracking.job_tracker`, opened when training
        starts, with the settings as config); it is closed when training ends.
        """
        self.rank, self.world_size = collective.rank_and_size()
        self.sequence = sequence
        self.sequence_size = sequence.size if sequence is not None else 1
        if self.world_size % self.sequence_size:
            raise ValueError(f"{self.world_size} ranks do not split into sequence groups of "
                             f"{self.sequence_size}")  # fmt: skip
        self.env, self.engine, self.learner, self.settings = env, engine, learner, settings
        self.run_dir = run_dir
        self.checkpoints = run_dir / "checkpoints"
        self.metrics_path = run_dir / "metrics.jsonl"
        self.state = TrainerState()
        self.stop_requested = False
        self._sigterm_at: float | None = None
        self.failure: BaseException | None = None
        """Rank 0: what stopped the run other than SIGTERM (generation failed, a weight
        push failed): the run checkpoints first, then raises it."""
        self.engine_lock = VersionLock()
        self.snapshot_steps = frozenset(snapshot_steps)
        self.snapshot = snapshot
        self.tracker: Tracker | None = tracker
        self.control: Any = None
        """The control group the ranks wait on for rank 0 (:mod:`tmax.rl.launch.collective`)."""
        self.producer: GroupProducer | None = None
        self._started = time.monotonic()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # --- the loop ---------------------------------------------------------------------------

    def train(self) -> TrainerState:
        """Train to ``settings.steps``, resuming from the latest checkpoint if any.

        Every rank runs this loop. Per step: all ranks agree whether any got SIGTERM
        (then checkpoint and stop); rank 0 collects and filters the groups and sends each
        rank its :class:`StepOrder`; every rank executes its order."""
        if self.is_main and (self.env is None or self.engine is None):
            raise ValueError("rank 0 needs the environment and the engine to train")
        if self.control is None:
            self.control = collective.control_group(self.settings.step_timeout_sec)
        self.resume()
        torch.manual_seed(self.settings.seed + self.state.step)
        if self.is_main:  # rank 0 alone logs
            self.tracker = self.tracker or job_tracker(self.run_dir)
            self.tracker.log_config({"rl_settings": asdict(self.settings)})
        previous = signal.getsignal(signal.SIGTERM)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
        self.producer = None
        if self.is_main:
            assert self.env is not None and self.engine is not None
            self.producer = GroupProducer(self.env, self.engine, self.settings, self.state,
                                          self.engine_lock)  # fmt: skip
            self.producer.start()
        saved_at = self.state.step if self.latest_checkpoint() is not None else None
        try:
            while True:
                stop = collective.any_rank(self.stop_requested, self.control)
                if stop or self.state.step >= self.settings.steps:
                    break
                orders: list[StepOrder] | None = None
                metrics: dict[str, Any] = {}
                if self.is_main:
                    orders, metrics = self.collect()
                order = collective.scatter(orders, self.control)
                if order.stop:
                    stop = True
                    break
                metrics.update(self.execute(order))
                if self.is_main:
                    self.log_metrics(metrics)
                if order.checkpoint:
                    saved_at = self.state.step
            if stop and saved_at != self.state.step:
                self.checkpoint()
            if stop and self._sigterm_at is not None:
                took = time.monotonic() - self._sigterm_at
                level = logging.WARNING if took <= self.settings.stop_grace_sec else logging.ERROR
                log.log(level, "checkpoint written %.1fs after SIGTERM (grace: %.1fs)", took,
                        self.settings.stop_grace_sec)  # fmt: skip
        finally:
            if self.producer is not None:
                began = self._sigterm_at if self._sigterm_at is not None else time.monotonic()
                self.producer.abandon(began + self.settings.stop_grace_sec)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, previous)
            if self.tracker is not None:
                self.tracker.close()
                self.tracker = None
        self.stop_requested = stop
        if self.failure is not None:
            raise RuntimeError(
                f"stopped at step {self.state.step} (checkpoint saved; a resumed run starts "
                f"fresh engines from it): {self.failure}"
            ) from self.failure
        if stop:
            log.warning("stopped by SIGTERM at step %d; checkpoint saved", self.state.step)
        return self.state

    def collect(self) -> tuple[list[StepOrder], dict[str, Any]]:
        """Rank 0: the step's groups, filtered, their advantages, split over the ranks
        into one order each; and the step's metrics so far."""
        producer, settings = self.producer, self.settings
        assert producer is not None
        self._started = time.monotonic()
        groups: list[Group] = []
        collected: list[Group] = []
        dropped_stale, rounds = 0, 0
        # Without active sampling a step draws prompts_per_step groups and trains on the
        # informative ones; with it, zero-std groups are replaced by new draws, up to a bound.
        draws = settings.prompts_per_step * (
            settings.max_sampling_rounds if settings.active_sampling else 1
        )
        while len(groups) < settings.prompts_per_step:
            if rounds >= draws:
                break
            rounds += 1
            try:
                group = producer.next_group(lambda: self.stop_requested)
            except Exception as error:
                # SIGTERM while collecting, or generation failed (every engine server
                # gone, a bug): no step; what was drawn is queued again and saved with
                # the checkpoint, the groups in flight are not waited for.
                if not isinstance(error, StopRequested | EpisodeCancelled):
                    self.failure = error
                    log.error("step %d: generating groups failed (%s); checkpointing and "
                              "stopping", self.state.step + 1, error)  # fmt: skip
                producer.give_back(collected)
                nothing = StepOrder(False, [], [], snapshot=False, checkpoint=False, stop=True)
                return [nothing] * self.world_size, {}
            staleness = self.state.policy_version - group.policy_version
            if staleness > settings.async_steps:
                dropped_stale += 1
                continue
            collected.append(group)
            informative = not settings.zero_std_filter or not bool(
                zero_std_groups(torch.tensor([group.rewards]))[0]
            )
            if informative:
                groups.append(group)
        drawn = [s for g in collected for s in g.samples]
        failed = [s for s in drawn if s.exit_status == "failed"]
        if drawn and len(failed) == len(drawn):
            raise RuntimeError(
                f"step {self.state.step + 1}: every one of the {len(drawn)} episodes drawn "
                f"failed (sandbox, engine or verifier errors), e.g. {failed[0].failure}"
            )
        if not groups:
            rewards = [r for g in collected for r in g.rewards]
            mean = sum(rewards) / len(rewards) if rewards else 0.0
            hint = "too hard" if mean == 0 else "too easy" if mean == 1 else "uniform"
            log.warning(
                "step %d: all %d groups drawn had zero reward variance (mean reward %.2f: "
                "the tasks look %s for this model); no update this step",
                self.state.step, len(collected), mean, hint,
            )  # fmt: skip
        rewards = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
        samples = [s for g in groups for s in g.samples]
        flat: list[float] = []
        if groups:
            advantages = group_advantages(rewards, normalize_std=settings.advantage == "std")
            flat = advantages.flatten().tolist()
        # Shared by tokens over the data-parallel groups; the ranks of a sequence group
        # (consecutive ranks) get the same order.
        groups_of_ranks = self.world_size // self.sequence_size
        split = collective.balanced_shards([len(s.tokens) for s in samples], groups_of_ranks)
        step = self.state.step + 1
        due = step % settings.checkpoint_every == 0 or step == settings.steps
        orders = [
            StepOrder(
                train=bool(groups),
                samples=[samples[i] for i in part],
                advantages=[flat[i] for i in part],
                snapshot=step in self.snapshot_steps,
                checkpoint=due,
            )
            for part in split
            for _ in range(self.sequence_size)
        ]
        version = self.state.policy_version

        def staleness_of(group: Group) -> int:
            return version - group.policy_version

        all_rewards = [r for g in collected for r in g.rewards]
        # the starting policy's own level (the SFT model's), what RL must improve on
        start_rewards = [r for g in collected if g.policy_version == 0 for r in g.rewards]
        zero_std = (
            zero_std_groups(torch.tensor([g.rewards for g in collected])).tolist()
            if collected
            else []
        )
        metrics = {
            "step": step,
            "reward_mean": sum(all_rewards) / len(all_rewards) if all_rewards else 0.0,
            "reward_trained_mean": float(rewards.mean()) if groups else None,
            "reward_start_policy_mean": (
                sum(start_rewards) / len(start_rewards) if start_rewards else None
            ),
            "episodes_start_policy": len(start_rewards),
            "groups_collected": len(collected),
            "groups_trained": len(groups),
            "zero_std_fraction": sum(zero_std) / len(zero_std) if zero_std else 0.0,
            "groups_dropped_stale": dropped_stale,
            "episodes_failed": len(failed),
            "staleness_mean": (
                sum(staleness_of(g) for g in groups) / len(groups) if groups else 0.0
            ),
            "staleness_max": max((staleness_of(g) for g in groups), default=0),
            "response_tokens_mean": (
                sum(s.response_tokens for s in samples) / len(samples) if samples else 0.0
            ),
            "tool_calls_mean": (
                sum(s.tool_calls for s in samples) / len(samples) if samples else 0.0
            ),
        }
        return orders, metrics

    def execute(self, order: StepOrder) -> dict[str, Any]:
        """One step as ``order`` says, on every rank: the update (its metrics are
        returned), the weight push, the snapshot and the checkpoint."""
        update = self.update(order.samples, order.advantages) if order.train else {}
        self.state.step += 1
        if order.train:
            self.state.policy_version += 1
            self.push()
        update["policy_version"] = self.state.policy_version
        update["step_time_sec"] = time.monotonic() - self._started if self.is_main else 0.0
        if order.snapshot:
            self.write_snapshot()
        if order.checkpoint:
            self.checkpoint()
        return update

    @property
    def push_bucket_bytes(self) -> int:
        return max(1, int(self.settings.push_bucket_mb * MIB))

    def push(self) -> None:
        """The new weights into the engines, streamed bucket by bucket (every rank takes
        part in the gathers, :mod:`tmax.rl.weights.streaming`). Rank 0 first waits for the groups
        being generated (a stopping run does not: the resumed run pushes the checkpoint's
        weights first); meanwhile the others wait on the control group for its word: the
        bucket size to walk in, or none."""
        if not self.is_main:
            limit = collective.broadcast(None, self.control)
            if limit is not None:
                stream_weights(self.learner, None, limit=limit, control=self.control)
            return
        assert self.engine is not None
        with self.engine_lock.exclusive(lambda: self.stop_requested) as alone:
            sink, failure = None, None
            if alone and not self.stop_requested:
                try:
                    sink = self.engine.weight_sink(self.state.policy_version)
                except Exception as error:
                    failure = error
            limit = self._bucket_bytes(sink) if sink is not None else None
            collective.broadcast(limit, self.control)
            if sink is not None and limit is not None:
                try:
                    stream_weights(self.learner, sink, limit=limit, control=self.control)
                except Exception as error:  # e.g. an engine server died
                    failure = error
            if failure is not None:
                # The update is done: keep it. Every rank checkpoints this step and
                # stops; a resumed run pushes it to fresh engines.
                log.error("step %d: weight push failed (%s); checkpointing and stopping",
                          self.state.step, failure)  # fmt: skip
                self.failure, self.stop_requested = failure, True

    def _bucket_bytes(self, sink: WeightSink) -> int:
        """The engines' bucket size where they were told one when their weight group
        formed (they cut the stream by it), else ``rl.push_bucket_mb``."""
        return int(getattr(sink, "bucket_bytes", None) or self.push_bucket_bytes)

    def checkpoint(self) -> None:
        """A checkpoint with the data position exact, taken while generation goes on:
        the finished groups are saved as pending, those in flight as unfinished."""
        if self.producer is not None:
            snapshot = self.producer.snapshot()
            self.state.data_index, self.state.pending, self.state.unfinished = snapshot
        self.save_checkpoint()

    def update(self, samples: Sequence[Sample], advantages: Sequence[float]) -> dict[str, float]:
        """The loss over this rank's micro-batches (normalised by the whole step's
        response tokens, all ranks together), one optimizer step."""
        settings = self.settings
        batches = list(micro_batches(samples, advantages, settings.micro_batch_tokens,
                                     pack=settings.packing))  # fmt: skip
        if self.sequence is not None:  # this rank scores its slice of every sequence
            batches = [_slice_scores(b, self.sequence) for b in batches]
        total_tokens = global_token_count(b["response_mask"] for b in batches)
        # Under ZeRO-3 every forward/backward is a collective: all ranks run as many
        # micro-batches as the busiest one, the others padding with empty ones.
        rounds = collective.all_max(len(batches))
        # every token the learner runs forward and backward (prompts and tool output
        # too; a sequence group's ranks share theirs): what an SFT control is matched to
        sequence_tokens = sum(float(b["attention_mask"].sum()) for b in batches)
        sums: dict[str, float] = {"sequence_tokens": sequence_tokens / self.sequence_size}
        empty = _empty_batch()
        if self.sequence is not None:
            empty = _slice_scores(empty, self.sequence)
        batches += [empty] * (rounds - len(batches))
        model = self.learner.model
        model.train()
        device = next(model.parameters()).device
        maxima: dict[str, float] = {}
        for batch in batches:
            # (a packed row's episode lengths stay on the CPU: the kernels loop over them)
            batch = {k: t if k == "segments" else t.to(device) for k, t in batch.items()}
            logprobs, entropy = sequence_logprobs(
                model,
                batch["input_ids"],
                batch["attention_mask"],
                temperature=settings.temperature,
                fp32_lm_head=settings.fp32_lm_head,
                shard=self.sequence,
                segments=batch.get("segments"),
            )
            mask = batch["response_mask"]
            if settings.loss == "dppo":
                loss, stats = dppo_loss(
                    logprobs, batch["behaviour_logprobs"], batch["advantages"], mask,
                    delta=settings.dppo_threshold, divergence=settings.dppo_divergence,
                    total_tokens=total_tokens,
                )  # fmt: skip
            else:
                loss, stats = grpo_loss(
                    logprobs, batch["behaviour_logprobs"], batch["advantages"], mask,
                    clip_low=settings.clip_low, clip_high=settings.clip_high,
                    total_tokens=total_tokens,
                )  # fmt: skip
            self.learner.backward(loss)
            tokens = int(mask.sum())
            stats = dict(stats)
            stats["loss"] = float(loss.detach())
            stats["entropy"] = float((entropy.detach() * mask).sum() / max(1, tokens))
            sums["tokens"] = sums.get("tokens", 0.0) + tokens
            for key, value in stats.items():
                if key == "response_tokens":
                    continue
                if key.endswith("_max"):
                    maxima[key] = max(maxima.get(key, 0.0), float(value))
                elif key == "loss":
                    sums[key] = sums.get(key, 0.0) + float(value)
                else:
                    sums[key] = sums.get(key, 0.0) + float(value) * tokens
        sums, maxima = collective.reduce_stats(sums, maxima)
        weights = sums.pop("tokens", 0.0)
        sequence_tokens = sums.pop("sequence_tokens", 0.0)
        result = {k: (v if k == "loss" else v / max(1.0, weights)) for k, v in sums.items()}
        result.update(maxima)
        result.update(self.learner.step())
        result["response_tokens"] = total_tokens
        result["sequence_tokens"] = int(sequence_tokens)
        return result

    # --- checkpoints -----------------------------------------------------------------------

    def write_snapshot(self) -> None:
        """The weights after this step, streamed into the sink ``snapshot`` gives rank 0
        (every rank takes part in gathering them). A snapshot that cannot be written
        fails the step on rank 0, after the others have finished the walk."""
        sink = self.snapshot(self.state.step) if self.is_main and self.snapshot else None
        stream_weights(self.learner, sink, limit=self.push_bucket_bytes,
                       control=self.control)  # fmt: skip

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        log.warning("SIGTERM: abandoning the episodes in flight; checkpointing now, or "
                    "after the update under way")  # fmt: skip
        self.stop_requested = True
        if self._sigterm_at is None:
            self._sigterm_at = time.monotonic()
        cancel = getattr(self.env, "cancel", None)
        if cancel is not None:
            cancel()

    def save_checkpoint(self) -> Path:
        """Model, optimizer (the learner's), RNG states, data position, queued groups.

        Written to a temporary directory, then renamed: a kill mid-save leaves the
        previous checkpoint intact. Older checkpoints are removed. With several ranks
        every rank writes its learner shard into the same folder (a shared file system)
        and rank 0 writes the rest and renames.
        """
        final = self.checkpoints / f"step-{self.state.step:06d}"
        tmp = self.checkpoints / f".tmp-step-{self.state.step:06d}"
        if self.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        collective.barrier(self.control)
        self.learner.save(tmp / "learner")
        if self.is_main:
            torch.save(
                {
                    "state": self.state,
                    "torch_rng": torch.get_rng_state(),
                    "python_rng": random.getstate(),
                    "settings": asdict(self.settings),
                },
                tmp / "trainer.pt",
            )
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
            for old in sorted(self.checkpoints.glob("step-*"))[:-1]:
                shutil.rmtree(old, ignore_errors=True)
            log.info("checkpoint: %s", final)
        collective.barrier(self.control)
        return final

    def latest_checkpoint(self) -> Path | None:
        found = sorted(self.checkpoints.glob("step-*"))
        return found[-1] if found else None

    def resume(self) -> bool:
        """Load the latest checkpoint (rank 0 picks it; every rank loads its shard)."""
        checkpoint = collective.broadcast(
            self.latest_checkpoint() if self.is_main else None, self.control
        )
        if checkpoint is None:
            return False
        self.learner.load(checkpoint / "learner")
        saved = torch.load(
            checkpoint / "trainer.pt", weights_only=False, pickle_module=_checkpoint_pickle
        )
        self.state = saved["state"]
        torch.set_rng_state(saved["torch_rng"])
        random.setstate(saved["python_rng"])
        sink = None
        if self.is_main:
            assert self.engine is not None
            sink = self.engine.weight_sink(self.state.policy_version)
        limit = collective.broadcast(self._bucket_bytes(sink) if sink else None, self.control)
        stream_weights(self.learner, sink, limit=limit, control=self.control)
        if self.is_main:
            log.info("resumed from %s (step %d)", checkpoint, self.state.step)
        return True

    # --- metrics -----------------------------------------------------------------------------

    def log_metrics(self, metrics: Mapping[str, Any]) -> None:
        self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
        with self.metrics_path.open("a") as handle:
            handle.write(json.dumps(metrics, sort_keys=True) + "\n")
        if self.tracker is not None:
            self.tracker.log(metrics, step=metrics["step"])
        log.info(
            "step %d: reward %.3f, zero-std %.2f, masked %.4f, |Δlogp| %.4f, loss %.4g, %.1fs",
            metrics["step"], metrics["reward_mean"], metrics["zero_std_fraction"],
            metrics.get("masked_fraction", 0.0), metrics.get("logp_diff_mean", 0.0),
            metrics.get("loss", 0.0), metrics["step_time_sec"],
        )  # fmt: skip


def micro_batches(
    samples: Sequence[Sample],
    advantages: Sequence[float],
    token_budget: int,
    *,
    pack: bool = False,
) -> Iterator[dict[str, torch.Tensor]]:
    """Right-padded micro-batches of whole samples, at most ``token_budget`` tokens
    (padding included) each; tensors are aligned to next-token positions (length T−1).

    With ``pack`` each micro-batch is one row of whole samples end to end
    (:func:`tmax.rl.learners.packing.pack_rows`), with per-token advantages and the samples'
    lengths as ``segments``. A sample longer than the budget is a micro-batch of its own
    either way."""
    if pack:
        for row in pack_rows([len(s.tokens) for s in samples], token_budget):
            yield _pack([samples[i] for i in row], [advantages[i] for i in row])
        return
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].tokens))
    batch: list[int] = []
    for index in order:
        longest = max([len(samples[i].tokens) for i in batch] + [len(samples[index].tokens)])
        if batch and longest * (len(batch) + 1) > token_budget:
            yield _collate([samples[i] for i in batch], [advantages[i] for i in batch])
            batch = []
        batch.append(index)
    if batch:
        yield _collate([samples[i] for i in batch], [advantages[i] for i in batch])


def _collate(samples: Sequence[Sample], advantages: Sequence[float]) -> dict[str, torch.Tensor]:
    length = max(len(s.tokens) for s in samples)
    size = (len(samples), length)
    input_ids = torch.zeros(size, dtype=torch.long)
    attention = torch.zeros(size, dtype=torch.long)
    loss_mask = torch.zeros(size, dtype=torch.float32)
    behaviour = torch.zeros(size, dtype=torch.float32)
    for row, sample in enumerate(samples):
        n = len(sample.tokens)
        input_ids[row, :n] = torch.tensor(sample.tokens)
        attention[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(sample.loss_mask, dtype=torch.float32)
        behaviour[row, :n] = torch.tensor(sample.behaviour_logprobs, dtype=torch.float32)
    # Position t of the log-probs scores token t+1.
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "response_mask": loss_mask[:, 1:],
        "behaviour_logprobs": behaviour[:, 1:],
        "advantages": torch.tensor(advantages, dtype=torch.float32),
    }


def _pack(samples: Sequence[Sample], advantages: Sequence[float]) -> dict[str, torch.Tensor]:
    """One row of ``samples`` end to end. Position t scores token t+1, so it carries the
    advantage of the sample that token belongs to; each sample's first token is never
    scored (in a row of its own there is no position before it)."""
    tokens: list[int] = []
    loss_mask: list[float] = []
    behaviour: list[float] = []
    per_token: list[float] = []
    for sample, advantage in zip(samples, advantages, strict=True):
        tokens += sample.tokens
        loss_mask += [0.0, *(float(m) for m in sample.loss_mask[1:])]
        behaviour += [0.0, *sample.behaviour_logprobs[1:]]
        per_token += [float(advantage)] * len(sample.tokens)
    return {
        "input_ids": torch.tensor([tokens], dtype=torch.long),
        "attention_mask": torch.ones(1, len(tokens), dtype=torch.long),
        "response_mask": torch.tensor([loss_mask[1:]], dtype=torch.float32),
        "behaviour_logprobs": torch.tensor([behaviour[1:]], dtype=torch.float32),
        "advantages": torch.tensor([per_token[1:]], dtype=torch.float32),
        "segments": torch.tensor([len(s.tokens) for s in samples], dtype=torch.long),
    }


def _slice_scores(batch: dict[str, torch.Tensor], shard: SequenceShard) -> dict[str, torch.Tensor]:
    """``batch`` with its next-token tensors cut to this rank's slice of the positions
    (the tokens stay whole: :func:`tmax.rl.loss.sequence_logprobs` slices them)."""
    length = batch["input_ids"].shape[1]
    return {
        **batch,
        "response_mask": shard.split_scores(batch["response_mask"], length),
        "behaviour_logprobs": shard.split_scores(batch["behaviour_logprobs"], length),
        **({"advantages": shard.split_scores(batch["advantages"], length)}
           if batch["advantages"].dim() == 2 else {}),  # packed: one per position
    }  # fmt: skip


def _empty_batch() -> dict[str, torch.Tensor]:
    """A two-token micro-batch with no response token: a forward and backward that
    contribute nothing (what a rank with fewer episodes runs to keep in step)."""
    return _collate([Sample("", [0, 0], [0, 0], [0.0, 0.0], 0.0, 0, "", 0, 0, 0)], [0.0])


def write_run_summary(
    run_dir: Path, output: Path, pool: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The learning curve as the workflow's declared output (with ``pool``: how the
    training tasks were chosen, :func:`tmax.rl.stage.rl_pool`)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines if line.strip()]
    summary: dict[str, Any] = {"steps": len(metrics), "curve": metrics}
    if pool is not None:
        summary["pool"] = dict(pool)
    write_json(output, summary)
    return summary
