"""The weight-transfer wire format (tmax.rl.weights.transfer): byte buckets any dtype can
be read back from, a sender that refuses tensors the receivers do not expect, and a real
gloo broadcast between two ranks (the vLLM side: tests/rl/test_remote.py)."""

from __future__ import annotations

import threading

import pytest
import torch

from tmax.rl.weights import transfer as wt


def weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {
        "embed.weight": torch.randn(7, 3),
        "layer.norm": torch.randn(5).to(torch.bfloat16),
        "layer.count": torch.arange(3, dtype=torch.int64),
        "head.bias": torch.randn(1).to(torch.float16),
    }


def test_buckets_respect_the_limit_and_keep_order() -> None:
    specs = wt.tensor_specs(weights())
    assert [s.nbytes for s in specs] == [84, 10, 24, 2]
    assert wt.buckets(specs, limit=48) == [[0], [1, 2], [3]]  # 84→96 alone, 16 + 32, 16
    assert wt.buckets(specs, limit=96) == [[0], [1, 2, 3]]
    assert wt.buckets(specs, limit=10_000) == [[0, 1, 2, 3]]
    assert wt.buckets(specs, limit=1) == [[0], [1], [2], [3]]  # each alone when too big
    with pytest.raises(ValueError, match="positive"):
        wt.buckets(specs, limit=0)


def test_pack_then_unpack_gives_every_tensor_back_bit_exact() -> None:
    source = weights()
    specs = wt.tensor_specs(source)
    [bucket] = wt.buckets(specs)
    offsets, total = wt._layout(specs, bucket)
    assert all(offset % wt.ALIGN == 0 for offset in offsets)
    flat = wt.pack(list(source.values()), offsets, total, "cpu")
    for name, tensor in wt.unpack(flat, specs, bucket, offsets):
        assert tensor.dtype == source[name].dtype
        assert torch.equal(tensor, source[name])


def test_update_info_round_trips_and_rejects_ragged_lists() -> None:
    specs = wt.tensor_specs(weights())
    info = wt.update_info(specs)
    assert wt.specs_from_update_info(info) == specs
    with pytest.raises(ValueError, match="differ in length"):
        wt.specs_from_update_info({**info, "shapes": info["shapes"][:-1]})


class Recorder:
    def __init__(self) -> None:
        self.sent: list[torch.Tensor] = []

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> None:
        self.sent.append(tensor.clone())


def test_a_tensor_the_receivers_do_not_expect_is_refused_by_name() -> None:
    source = weights()
    specs = wt.tensor_specs(source)
    wrong = dict(source, **{"layer.norm": torch.zeros(5)})  # float32, announced bfloat16
    with pytest.raises(ValueError, match=r"layer\.norm"):
        wt.send_buckets(Recorder(), specs, wrong.items(), limit=16)
    with pytest.raises(ValueError, match=r"ended before 'head\.bias'"):
        wt.send_buckets(Recorder(), specs, list(source.items())[:3])
    with pytest.raises(ValueError, match="more weights"):
        wt.send_buckets(Recorder(), specs[:2], source.items())


def test_weights_cross_a_real_gloo_group_bucket_by_bucket() -> None:
    source = weights()
    specs = wt.tensor_specs(source)
    port, complete = wt.TorchGroup.open("127.0.0.1", 2)
    received: list[list[tuple[str, torch.Tensor]]] = []

    def receiver() -> None:
        group = wt.TorchGroup.join("127.0.0.1", port, 1, 2)
        for pairs in wt.receive_buckets(group, specs, limit=48):
            received.append([(name, tensor.clone()) for name, tensor in pairs])

    thread = threading.Thread(target=receiver)
    thread.start()
    sender = complete()
    sent = wt.send_buckets(sender, specs, source.items(), limit=48)
    thread.join(timeout=60)
    assert sent == 96 + 48 + 16
    assert [[name for name, _ in pairs] for pairs in received] == [
        ["embed.weight"],
        ["layer.norm", "layer.count"],
        ["head.bias"],
    ]
    for name, tensor in (pair for pairs in received for pair in pairs):
        assert torch.equal(tensor, source[name])
