"""Sequence packing (``rl.packing``): a row of episodes end to end scores and
differentiates each episode exactly as a right-padded batch does, for softmax attention
(Qwen3) and the Gated DeltaNet hybrid (Qwen3.5), with and without gradient
checkpointing, and the trainer's update on packed rows is the padded one's.

Two ranks (ZeRO-3, packed rows, and packed rows split over a sequence group) are in
``test_distributed_trainer.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.rl.test_sequence_parallel import VOCAB, tiny  # noqa: E402
from tmax.rl.learners.packing import (  # noqa: E402
    enable_packing,
    pack_rows,
    packed_positions,
    scoring_mask,
    segment_bounds,
)
from tmax.rl.loss import sequence_logprobs  # noqa: E402

LENGTHS = (13, 8, 11, 1, 70)
"""Episodes of the packed row: one of a single token (scores nothing), one past the
Gated DeltaNet's chunk of 64 (its state must still restart at the next episode)."""


def episodes() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randint(2, VOCAB, (n,), generator=generator) for n in LENGTHS]


def padded(eps: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros(len(eps), max(LENGTHS), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, episode in enumerate(eps):
        ids[row, : len(episode)] = episode
        mask[row, : len(episode)] = 1
    return ids, mask


def weighted_grads(model: torch.nn.Module, logp: torch.Tensor) -> dict[str, torch.Tensor]:
    weights = torch.linspace(0.5, 1.5, logp.numel()).reshape(logp.shape)
    model.zero_grad()
    (-(logp * weights).sum()).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def test_rows_hold_whole_episodes_within_the_budget() -> None:
    lengths = [5, 9, 3, 20, 7, 7, 1, 12]
    rows = pack_rows(lengths, 16)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert [row for row in rows if sum(lengths[i] for i in row) > 16] == [[3]]  # 20 alone
    assert rows == [[3], [7, 2, 6], [1, 4], [5, 0]]  # first fit, longest first
    # right-padded micro-batches of 16 slots would need 5: [1 3 5] [7 7] [9] [12] [20]
    assert pack_rows(lengths, 16) == rows  # deterministic
    with pytest.raises(ValueError, match="micro_batch_tokens"):
        pack_rows(lengths, 0)


def test_positions_restart_and_each_episodes_last_position_scores_nothing() -> None:
    segments = torch.tensor([3, 2, 4])
    assert packed_positions(segments, 9).tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]
    assert packed_positions(segments, 11).tolist()[0][9:] == [0, 1]  # padding: its own
    assert scoring_mask(torch.ones(1, 9, dtype=torch.long), segments).tolist() == [
        [1, 1, 1, 0, 1, 0, 1, 1, 1]
    ]
    assert segment_bounds([3, 2], 7) == [(0, 3), (3, 5), (5, 7)]
    with pytest.raises(ValueError, match="do not fit"):
        segment_bounds([3, 2], 4)
    with pytest.raises(ValueError, match="at least one token"):
        segment_bounds([3, 0], 4)


def test_a_sequence_group_slices_the_packed_positions() -> None:
    from tmax.rl.learners.sequence_parallel import SequenceShard

    segments = torch.tensor([3, 4])  # 7 tokens over 3 ranks: 9 slots, 2 of padding
    row = torch.arange(2, 9).unsqueeze(0)
    mask = scoring_mask(torch.ones_like(row), segments)
    whole = packed_positions(segments, 7)
    pieces = [SequenceShard(None, r, 3).split_tokens(row, mask, whole) for r in range(3)]
    assert torch.cat([p[1] for p in pieces], dim=1).tolist() == [[0, 1, 2, 0, 1, 2, 3, 4, 5]]
    scores = torch.cat([p[3] for p in pieces], dim=1).tolist()[0]
    assert scores == [True, True, False, True, True, True, False, False, False]


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointed"])
@pytest.mark.parametrize("kind", ["qwen3", "qwen3_5"])
def test_a_packed_row_scores_each_episode_as_if_alone(kind: str, checkpointing: bool) -> None:
    model = tiny(kind)
    enable_packing(model)
    if checkpointing:
        from tmax.rl.learners.learner import enable_gradient_checkpointing

        model.train()
        enable_gradient_checkpointing(model)
    eps = episodes()
    ids, mask = padded(eps)
    logp, _ = sequence_logprobs(model, ids, mask)
    # The padded batch's scores laid end to end as the packed row holds them: each
    # episode's n − 1 scored positions, then a 0 where it ends (not the row's last).
    pieces = []
    for row, n in enumerate(LENGTHS):
        pieces += [logp[row, : n - 1], torch.zeros(1)]
    expected = torch.cat(pieces)[:-1].unsqueeze(0)
    reference = weighted_grads(model, expected)

    row = torch.cat(eps).unsqueeze(0)
    packed, packed_entropy = sequence_logprobs(
        model, row, torch.ones_like(row), segments=torch.tensor(LENGTHS)
    )
    torch.testing.assert_close(packed, expected.detach(), rtol=1e-5, atol=1e-6)
    assert packed_entropy[0, LENGTHS[0] - 1] == 0  # an episode's end scores nothing
    grads = weighted_grads(model, packed)
    assert grads.keys() == reference.keys()
    for name, grad in reference.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_packing_refuses_what_it_cannot_cut() -> None:
    from transformers import AutoModelForCausalLM

    eager = AutoModelForCausalLM.from_config(tiny("qwen3").config, attn_implementation="eager")
    with pytest.raises(ValueError, match=r"rl\.packing needs an attention kernel.*'eager'"):
        enable_packing(eager)
    row = torch.arange(2, 12).unsqueeze(0)
    with pytest.raises(ValueError, match="enable_packing"):
        sequence_logprobs(tiny("qwen3"), row, torch.ones_like(row), segments=torch.tensor([4, 6]))
    model = tiny("qwen3")
    enable_packing(model)
    two = torch.cat([row, row])
    with pytest.raises(ValueError, match="one row"):
        sequence_logprobs(model, two, torch.ones_like(two), segments=torch.tensor([4, 6]))


def update(pack: bool, run_dir: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor], int]:
    """One DPPO update of the test's episodes through the trainer, packed or padded."""
    from tmax.rl.episodes.rollout import Sample
    from tmax.rl.learners.learner import LocalLearner, enable_gradient_checkpointing
    from tmax.rl.trainer import RLSettings, Trainer, micro_batches

    model = tiny("qwen3_5")
    enable_packing(model)
    enable_gradient_checkpointing(model)
    learner = LocalLearner(model, lr=1e-2)
    rows = []
    for episode in episodes():
        tokens = episode.tolist()
        loss_mask = [0] + [int(t % 3 != 0) for t in range(1, len(tokens))]
        behaviour = [0.0] + [-1.0 - 0.05 * t * m for t, m in enumerate(loss_mask[1:])]
        rows.append(Sample("t", tokens, loss_mask, behaviour, 1.0, 0, "done", 0, 1, sum(loss_mask)))
    advantages = [1.0, -0.5, 0.25, 2.0, -1.0]
    settings = RLSettings(micro_batch_tokens=24, temperature=1.0, packing=pack)
    batches = len(list(micro_batches(rows, advantages, 24, pack=pack)))
    stats = Trainer(None, None, learner, settings, run_dir).update(rows, advantages)  # type: ignore[arg-type]
    return stats, learner.full_state_dict(), batches


def test_the_packed_update_is_the_padded_one(tmp_path: Path) -> None:
    padded_stats, padded_weights, padded_batches = update(False, tmp_path / "padded")
    packed_stats, packed_weights, packed_batches = update(True, tmp_path / "packed")
    assert (padded_batches, packed_batches) == (4, 3)  # [1 8] [11] [13] [70]; [70] [13 11] [8 1]
    assert packed_stats["response_tokens"] == padded_stats["response_tokens"]
    for key in ("loss", "grad_norm", "masked_fraction", "entropy"):
        assert packed_stats[key] == pytest.approx(padded_stats[key], rel=1e-5, abs=1e-7), key
    for name, value in padded_weights.items():
        torch.testing.assert_close(packed_weights[name], value, rtol=1e-5, atol=1e-6, msg=name)
