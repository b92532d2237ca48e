"""The weights after a step, streamed bucket by bucket (tmax.rl.weights.streaming): every weight
once, at most two buckets held, a failure mid-stream that still finishes the walk, and
snapshots written shard by shard and swapped in whole. The ZeRO-3 ranks' side runs in
tests/rl/test_distributed_trainer.py (every push and snapshot there streams); a real vLLM
server's in tests/rl/test_remote.py."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.rl.test_trainer import tiny_model
from tmax.rl.learners.learner import LocalLearner
from tmax.rl.weights.streaming import SnapshotSink, StateDictSink, specs_of, stream_weights
from tmax.rl.weights.transfer import ALIGN, TensorSpec, buckets

LIMIT = 4096
"""Bytes per bucket: the tiny model streams in a few dozen."""


class Watched:
    """A learner whose gathers are watched: which tensors, and how many bucket buffers
    are alive each time one starts."""

    def __init__(self, learner: LocalLearner) -> None:
        self.learner = learner
        self.gathered_names: list[str] = []
        self.names = {id(t): n for n, t in learner.weight_tensors()}
        self.buffers: weakref.WeakSet[torch.Tensor] = weakref.WeakSet()
        self.most_alive = 0
        self.gathering = threading.Condition()

    def weight_tensors(self) -> list[tuple[str, torch.Tensor]]:
        return self.learner.weight_tensors()

    @contextmanager
    def gathered(self, tensor: torch.Tensor) -> Iterator[None]:
        with self.gathering:
            self.gathered_names.append(self.names[id(tensor)])
            self.most_alive = max(self.most_alive, len(self.buffers))
            self.gathering.notify_all()
        yield


class SlowSink(StateDictSink):
    """Takes each bucket only once the next bucket's gather has begun (so a stream that
    does not overlap the two never finishes a put), and records every buffer."""

    def __init__(self, watched: Watched, fail_at: int | None = None) -> None:
        super().__init__()
        self.watched, self.fail_at = watched, fail_at
        self.puts = 0
        self.aborted = self.finished = False
        self.overlapped = 0

    def begin(self, specs: Sequence[TensorSpec], limit: int) -> None:
        super().begin(specs, limit)
        self.count = len(buckets(specs, limit))

    def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
        self.watched.buffers.add(flat)
        self.puts += 1
        if self.puts == self.fail_at:
            raise RuntimeError("engine server 1 stopped: connection reset")
        if self.puts < self.count:  # wait for a tensor of a later bucket to be gathered
            with self.watched.gathering:
                started = self.watched.gathering.wait_for(
                    lambda: len(self.watched.gathered_names) > max(bucket) + 1, timeout=10
                )
            self.overlapped += started
        super().put(bucket, flat)

    def finish(self) -> None:
        self.finished = True

    def abort(self) -> None:
        self.aborted = True


def every_weight(learner: LocalLearner) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in learner.weight_tensors()}


def test_a_stream_hands_on_every_weight_once_in_bounded_buckets() -> None:
    learner = LocalLearner(tiny_model())
    sink = StateDictSink()
    sent = stream_weights(learner, sink, limit=LIMIT)
    expected = every_weight(learner)
    assert list(sink.weights) == list(expected)  # the model's order, the tied head once
    assert "lm_head.weight" not in sink.weights
    for name, tensor in expected.items():
        assert torch.equal(sink.weights[name], tensor), name
    specs = specs_of(learner.weight_tensors())
    layout = buckets(specs, LIMIT)
    assert len(layout) > 5
    largest = max(-(-s.nbytes // ALIGN) * ALIGN for s in specs)
    assert sent == sum(-(-specs[i].nbytes // ALIGN) * ALIGN for b in layout for i in b)
    assert sent <= len(layout) * max(LIMIT, largest)


def test_rank_zero_holds_two_buckets_at_most_and_gathers_while_one_is_sent() -> None:
    """The next bucket is gathered while the last is handed on (the put waits for it),
    and never a third while the first is still in the sink's hands."""
    watched = Watched(LocalLearner(tiny_model()))
    sink = SlowSink(watched)
    stream_weights(watched, sink, limit=LIMIT)
    assert sink.finished and not sink.aborted
    assert sink.overlapped == sink.count - 1  # every put saw the next gather start
    assert watched.most_alive <= 2
    assert list(sink.weights) == list(every_weight(watched.learner))


def test_a_sink_failing_mid_stream_still_walks_every_gather_then_raises() -> None:
    """The other ranks are in the same walk: an engine that dies at the third bucket
    stops the sending, not the gathers; the error comes after, and the sink is aborted."""
    watched = Watched(LocalLearner(tiny_model()))
    sink = SlowSink(watched, fail_at=3)
    with pytest.raises(RuntimeError, match="engine server 1 stopped"):
        stream_weights(watched, sink, limit=LIMIT)
    assert watched.gathered_names == [n for n, _ in watched.learner.weight_tensors()]
    assert sink.aborted and not sink.finished
    assert sink.puts == 3  # nothing handed on after the failure


def test_a_rank_without_a_sink_takes_part_in_the_gathers_only() -> None:
    watched = Watched(LocalLearner(tiny_model()))
    assert stream_weights(watched, None, limit=LIMIT) == 0
    assert watched.gathered_names == [n for n, _ in watched.learner.weight_tensors()]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from transformers import AutoTokenizer

    from tmax.models.tiny import ensure_tiny_model

    source = ensure_tiny_model(parent=tmp_path_factory.mktemp("tiny"))
    return source, AutoTokenizer.from_pretrained(source)


def test_a_snapshot_is_written_shard_by_shard_and_loads_as_the_weights(
    tmp_path: Path, checkpoint: tuple[Path, Any]
) -> None:
    import json

    from transformers import AutoModelForCausalLM

    source, tokenizer = checkpoint
    learner = LocalLearner(AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32))
    with torch.no_grad():
        for parameter in learner.model.parameters():
            parameter.add_(0.01)
    limit = 2**16
    stream_weights(learner, SnapshotSink(source, tmp_path / "snap", tokenizer), limit=limit)
    shards = sorted((tmp_path / "snap").glob("model-*-of-*.safetensors"))
    assert len(shards) == len(buckets(specs_of(learner.weight_tensors()), limit)) > 2
    index = json.loads((tmp_path / "snap" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {s.name for s in shards}
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "snap", dtype=torch.float32)
    weights = every_weight(learner)
    for name, tensor in loaded.state_dict().items():
        given = weights.get(name, weights.get("model.embed_tokens.weight"))
        assert torch.equal(tensor, given), name
    assert not list(tmp_path.glob(".snap*"))
    # a model of one bucket is one model.safetensors and no index, as save_pretrained
    # writes it (what the workflow's outputs and checkpoint selection name)
    stream_weights(learner, SnapshotSink(source, tmp_path / "one", tokenizer), limit=2**30)
    files = {p.name for p in (tmp_path / "one").iterdir()}
    assert "model.safetensors" in files and not any("-of-" in n or "index" in n for n in files)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "one", dtype=torch.float32)
    assert torch.equal(loaded.model.norm.weight, weights["model.norm.weight"])


def test_a_snapshot_that_fails_mid_way_leaves_the_previous_one(
    tmp_path: Path, checkpoint: tuple[Path, Any]
) -> None:
    from transformers import AutoModelForCausalLM

    source, tokenizer = checkpoint
    learner = LocalLearner(AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32))
    target = tmp_path / "snap"
    stream_weights(learner, SnapshotSink(source, target, tokenizer), limit=2**16)
    before = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}

    class DiskFull(SnapshotSink):
        def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
            if self.written == 2:
                raise OSError(28, "No space left on device")
            super().put(bucket, flat)

    with torch.no_grad():
        for parameter in learner.model.parameters():
            parameter.add_(1.0)
    with pytest.raises(OSError, match="No space left"):
        stream_weights(learner, DiskFull(source, target, tokenizer), limit=2**16)
    assert {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]
