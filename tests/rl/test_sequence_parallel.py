"""Sequence parallelism: two CPU ranks that split every sequence score and differentiate
exactly what one process does with the whole sequence, for softmax attention (Qwen3) and
for the Gated DeltaNet hybrid (Qwen3.5), with and without gradient checkpointing, a
packed row of the hybrid (rl.packing), and under DeepSpeed ZeRO-3 through the trainer's
own update.

The multi-rank test runs this file as a script (``--worker``) in two processes talking
over gloo; the parent computes the single-process reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.rl.ranks import run_ranks  # noqa: E402
from tmax.rl.learners.sequence_parallel import (  # noqa: E402
    SequenceShard,
    sequence_groups,
    split_token_mixers,
)
from tmax.rl.loss import sequence_logprobs  # noqa: E402

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
WORLD_SIZE = 2
WORKER_TIMEOUT_S = 240
LENGTHS = (13, 8, 11)  # right-padded rows; 13 tokens split over 2 ranks pads to 14
VOCAB = 96


def tiny(kind: str, seed: int = 0) -> torch.nn.Module:
    """A float32 Qwen3 (softmax attention only) or Qwen3.5 text hybrid (3 Gated DeltaNet
    layers, 1 attention layer), untied, sdpa attention."""
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.models.qwen3_5 import Qwen3_5TextConfig

    common = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
              "tie_word_embeddings": False, "pad_token_id": 0, "eos_token_id": 1}  # fmt: skip
    if kind == "qwen3":
        config: Any = Qwen3Config(num_hidden_layers=2, max_position_embeddings=64, **common)
    else:
        config = Qwen3_5TextConfig(
            num_hidden_layers=4, full_attention_interval=4, linear_num_key_heads=2,
            linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
            linear_conv_kernel_dim=4, **common,
        )  # fmt: skip
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded rows, their attention mask, and a response mask over next-token
    positions (every other scored token, so the loss is not uniform)."""
    generator = torch.Generator().manual_seed(7)
    length = max(LENGTHS)
    ids = torch.randint(2, VOCAB, (len(LENGTHS), length), generator=generator)
    mask = torch.zeros(len(LENGTHS), length, dtype=torch.long)
    for row, n in enumerate(LENGTHS):
        mask[row, :n] = 1
    response = mask[:, 1:].float() * (torch.arange(length - 1) % 2 == 0).float()
    return ids.masked_fill(mask == 0, 0), mask, response


def loss_and_grads(
    model: torch.nn.Module, shard: SequenceShard | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """This rank's log-probs and the gradient of its summed weighted log-probs."""
    ids, mask, response = batch()
    logp, _ = sequence_logprobs(model, ids, mask, shard=shard)
    if shard is not None:
        response = shard.split_scores(response, ids.shape[1])
    weights = torch.linspace(0.5, 1.5, response.shape[1])  # position-dependent gradient
    model.zero_grad()
    (-(logp * response * weights).sum()).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), grads


def reference(kind: str, checkpointing: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model = tiny(kind)
    if checkpointing:
        from tmax.rl.learners.learner import enable_gradient_checkpointing

        model.train()
        enable_gradient_checkpointing(model)
    ids, mask, response = batch()
    logp, _ = sequence_logprobs(model, ids, mask)
    # The same weights as the ranks use: theirs are laid out on a 14-position grid.
    weights = torch.linspace(0.5, 1.5, 7)
    grid = torch.cat([weights, weights])[: response.shape[1]]
    model.zero_grad()
    (-(logp * response * grid).sum()).backward()
    return logp.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


PACKED = (13, 8, 10)
"""A packed row of three episodes: 31 tokens, so two ranks pad it by one."""


def packed_row() -> tuple[torch.Tensor, torch.Tensor]:
    ids, _, _ = batch()
    row = torch.cat([ids[r, :n] for r, n in enumerate(PACKED)]).unsqueeze(0)
    return row, torch.tensor(PACKED)


def packed_grads(
    model: torch.nn.Module, shard: SequenceShard | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Log-probs of the packed row (this rank's slice) and the gradient of their sum
    weighted by position over the whole padded row."""
    row, segments = packed_row()
    logp, _ = sequence_logprobs(model, row, torch.ones_like(row), shard=shard, segments=segments)
    weights = torch.linspace(0.5, 1.5, 2 * 16)  # the row's 31 tokens padded for 2 ranks
    if shard is None:
        weights = weights[: logp.shape[1]]
    else:
        weights = weights[shard.rank * logp.shape[1] : (shard.rank + 1) * logp.shape[1]]
    model.zero_grad()
    (-(logp * weights).sum()).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), grads


def packed_model(shard: SequenceShard | None) -> torch.nn.Module:
    """The Qwen3.5 hybrid packed, with gradient checkpointing (and split over ``shard``)."""
    from tmax.rl.learners.learner import enable_gradient_checkpointing
    from tmax.rl.learners.packing import enable_packing

    model = tiny("qwen3_5")
    if shard is not None:
        split_token_mixers(model, shard)
    enable_packing(model)
    model.train()
    enable_gradient_checkpointing(model)
    return model


# --------------------------------------------------------------------------------------------
# One process


def test_slices_of_every_rank_make_up_the_whole_sequence() -> None:
    ids, mask, response = batch()
    pieces = [SequenceShard(None, r, 3).split_tokens(ids, mask) for r in range(3)]
    local, positions, targets, is_token = (torch.cat(p, dim=1) for p in zip(*pieces, strict=True))
    length = ids.shape[1]
    assert torch.equal(local[:, :length], ids) and not local[:, length:].any()
    assert torch.equal(positions[0], torch.arange(local.shape[1]))
    assert torch.equal(targets[:, : length - 1], ids[:, 1:])
    assert torch.equal(is_token[:, : length - 1], mask[:, 1:].bool())
    assert not is_token[:, length - 1 :].any()  # the last position and the padding score nothing
    scores = torch.cat(
        [SequenceShard(None, r, 3).split_scores(response, length) for r in range(3)], 1
    )
    assert torch.equal(scores[:, : length - 1], response) and not scores[:, length - 1 :].any()


def test_sequence_groups_need_several_ranks_and_a_causal_kernel() -> None:
    assert sequence_groups(1, timeout_s=60) is None
    with pytest.raises(ValueError, match=r"rl\.sequence_parallel_size is 2, but this run trains"):
        sequence_groups(2, timeout_s=60)
    from transformers import AutoModelForCausalLM

    eager = AutoModelForCausalLM.from_config(tiny("qwen3").config, attn_implementation="eager")
    with pytest.raises(ValueError, match=r"causal without a mask.*'eager'"):
        split_token_mixers(eager, SequenceShard(None, 0, 2))
    assert (
        split_token_mixers(tiny("qwen3_5"), SequenceShard(None, 0, 2)) == 4
    )  # 3 GDN + 1 attention


# --------------------------------------------------------------------------------------------
# Two ranks


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
def test_two_ranks_splitting_each_sequence_match_one_process(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S)
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD_SIZE)]
    for kind in ("qwen3", "qwen3_5"):
        for checkpointing in (False, True):
            key = f"{kind}-{'ckpt' if checkpointing else 'plain'}"
            logp, grads = reference(kind, checkpointing)
            joined = torch.cat([r[key]["logp"] for r in results], dim=1)
            length = logp.shape[1]
            torch.testing.assert_close(joined[:, :length], logp, rtol=1e-5, atol=1e-6, msg=key)
            assert grads.keys() == results[0][key]["grads"].keys()
            for name, grad in grads.items():
                summed = sum(r[key]["grads"][name] for r in results)  # ZeRO-3 sums them too
                torch.testing.assert_close(summed, grad, rtol=1e-4, atol=1e-6, msg=f"{key} {name}")
    # A packed row of the hybrid, split over the two ranks, against one process packed.
    logp, grads = packed_grads(packed_model(None), None)
    joined = torch.cat([r["packed"]["logp"] for r in results], dim=1)
    torch.testing.assert_close(joined[:, : logp.shape[1]], logp, rtol=1e-5, atol=1e-6)
    for name, grad in grads.items():
        summed = sum(r["packed"]["grads"][name] for r in results)
        torch.testing.assert_close(summed, grad, rtol=1e-4, atol=1e-6, msg=f"packed {name}")
    # The trainer's own update under ZeRO-3 with checkpointing, against one process.
    stats = json.loads((tmp_path / "trainer.json").read_text())
    local = local_update(tmp_path / "local")
    assert stats["ranks"][0]["response_tokens"] == local["response_tokens"]
    assert stats["ranks"][0]["grad_norm"] == pytest.approx(local["grad_norm"], rel=1e-4)
    assert stats["ranks"][0]["loss"] == pytest.approx(local["loss"], rel=1e-4, abs=1e-7)
    weights = torch.load(tmp_path / "weights.pt", weights_only=True)
    for name, value in local["weights"].items():
        torch.testing.assert_close(weights[name], value, rtol=1e-4, atol=1e-5, msg=name)


def samples() -> tuple[list[Any], list[float]]:
    from tmax.rl.episodes.rollout import Sample

    ids, _, response = batch()
    rows = []
    for row, n in enumerate(LENGTHS):
        tokens = ids[row, :n].tolist()
        loss_mask = [0] + [int(v) for v in response[row, : n - 1].tolist()]
        behaviour = [0.0] + [-1.0 - 0.1 * t * v for t, v in enumerate(loss_mask[1:])]
        rows.append(Sample("t", tokens, loss_mask, behaviour, 1.0, 0, "done", 0, 1, sum(loss_mask)))
    return rows, [1.0, -0.5, 0.25]


def update_with(learner: Any, shard: SequenceShard | None, run_dir: Path) -> dict[str, Any]:
    """One DPPO update of three samples (three micro-batches) through the trainer."""
    from tmax.rl.trainer import RLSettings, Trainer

    settings = RLSettings(micro_batch_tokens=16, temperature=1.0)
    trainer = Trainer(None, None, learner, settings, run_dir, sequence=shard)
    rows, advantages = samples()
    return trainer.update(rows, advantages)


def local_update(run_dir: Path) -> dict[str, Any]:
    from tmax.rl.learners.learner import LocalLearner, enable_gradient_checkpointing

    model = tiny("qwen3_5")
    enable_gradient_checkpointing(model)
    learner = LocalLearner(model, lr=1e-2)
    stats = update_with(learner, None, run_dir)
    return {**stats, "weights": learner.full_state_dict()}


# --------------------------------------------------------------------------------------------
# The worker (one rank)


def run_worker(out: Path) -> None:
    from tmax.rl.learners.learner import (
        DeepSpeedLearner,
        enable_gradient_checkpointing,
        init_distributed,
    )

    torch.set_num_threads(1)
    rank = init_distributed(timeout_s=120).rank
    shard = sequence_groups(WORLD_SIZE, timeout_s=120)
    assert shard is not None and shard.rank == rank
    results: dict[str, Any] = {}
    for kind in ("qwen3", "qwen3_5"):
        for checkpointing in (False, True):
            model = tiny(kind)
            split_token_mixers(model, shard)
            if checkpointing:
                model.train()
                enable_gradient_checkpointing(model)
            logp, grads = loss_and_grads(model, shard)
            key = f"{kind}-{'ckpt' if checkpointing else 'plain'}"
            results[key] = {"logp": logp, "grads": grads}
    logp, grads = packed_grads(packed_model(shard), shard)
    results["packed"] = {"logp": logp, "grads": grads}
    torch.save(results, out / f"rank{rank}.pt")

    model = tiny("qwen3_5")
    split_token_mixers(model, shard)
    enable_gradient_checkpointing(model)
    learner = DeepSpeedLearner(model, lr=1e-2, zero_stage=3)
    stats = update_with(learner, shard, out / f"run{rank}")
    weights = learner.full_state_dict()
    gathered: list[Any] = [None] * WORLD_SIZE
    torch.distributed.all_gather_object(gathered, stats)
    if rank == 0:
        torch.save(weights, out / "weights.pt")
        (out / "trainer.json").write_text(json.dumps({"ranks": gathered}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one rank of the sequence-parallel test")
    parser.add_argument("--worker", type=Path, required=True, help="output folder")
    run_worker(parser.parse_args().worker)
    from tmax.rl.launch.ranks import leave_without_teardown

    leave_without_teardown(0)  # as a real rank ends: gloo's teardown can abort
