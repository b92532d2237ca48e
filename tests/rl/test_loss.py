"""The RL core: advantages, zero-std groups, the DPPO mask and loss, GRPO, the FP32 LM head."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tmax.rl.loss import (  # noqa: E402 — after the importorskip
    KL_PROB_EPS,
    binary_divergence,
    dppo_loss,
    dppo_mask,
    global_token_count,
    group_advantages,
    grpo_loss,
    sequence_logprobs,
    token_logprobs,
    zero_std_groups,
)

F64 = torch.float64


def logs(*probs: float) -> torch.Tensor:
    """Log-probabilities of the given probabilities, as a float64 ``[1, n]`` row."""
    return torch.tensor([probs], dtype=F64).log()


# --------------------------------------------------------------------------------------------
# Advantages and zero-std groups
# --------------------------------------------------------------------------------------------


REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])


def test_advantages_are_centred_per_group() -> None:
    # A = r − mean_group(r): group means 0.5, 1, 0.25.
    expected = torch.tensor(
        [[0.5, -0.5, -0.5, 0.5], [0.0, 0.0, 0.0, 0.0], [-0.25, -0.25, -0.25, 0.75]]
    )
    advantages = group_advantages(REWARDS)
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(advantages.sum(dim=1), torch.zeros(3))


def test_advantages_divided_by_the_population_std() -> None:
    # Group 0: std = 0.5. Group 2: var = (3·0.25² + 0.75²)/4 = 0.1875, std = 0.4330127.
    # Group 1 has std 0: eps keeps it at 0 instead of 0/0.
    std2 = math.sqrt(0.1875)
    expected = torch.tensor(
        [
            [1.0, -1.0, -1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0],
            [-0.25 / std2, -0.25 / std2, -0.25 / std2, 0.75 / std2],
        ]
    )
    advantages = group_advantages(REWARDS, normalize_std=True, eps=1e-12)
    torch.testing.assert_close(advantages[[0, 2]], expected[[0, 2]], atol=1e-6, rtol=0)
    assert torch.equal(advantages[1], torch.zeros(4))
    # The default eps (1e-6) is only a guard: it changes nothing visible at this scale.
    torch.testing.assert_close(
        group_advantages(REWARDS, normalize_std=True), expected, atol=1e-5, rtol=0
    )
    # A group of one has std 0 (population), not NaN (sample std of one value).
    assert torch.equal(
        group_advantages(torch.tensor([[3.0]]), normalize_std=True), torch.zeros(1, 1)
    )


def test_zero_std_groups() -> None:
    assert zero_std_groups(REWARDS).tolist() == [False, True, False]
    assert zero_std_groups(torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])).tolist() == [
        True,
        True,
        False,
    ]
    # Exact by default: 0.1 + 0.2 ≠ 0.3 in floating point; a tolerance absorbs that noise.
    noisy = torch.tensor([[0.1 + 0.2, 0.3]], dtype=F64)
    assert zero_std_groups(noisy).tolist() == [False]
    assert zero_std_groups(noisy, atol=1e-9).tolist() == [True]
    assert zero_std_groups(torch.tensor([[0.5]])).tolist() == [True]
    with pytest.raises(ValueError, match=r"\[groups, group_size\]"):
        zero_std_groups(torch.zeros(4))


# --------------------------------------------------------------------------------------------
# DPPO mask: every case of DESIGN.md's rule, by hand
# --------------------------------------------------------------------------------------------

# (case, μ = behaviour prob, π = trainer prob, A, divergence, expected M). δ = 0.1 throughout.
# r = π/μ. TV: D = |π − μ|. KL: D = μ log(μ/π) + (1−μ) log((1−μ)/(1−π)).
MASK_CASES = [
    # A > 0, r = 1.6 > 1, D = 0.3 > δ: pushes further away → masked.
    ("A>0 r>1 D>δ", 0.5, 0.8, 1.0, "binary_tv", 0.0),
    # A > 0 but r = 0.011 < 1: the update raises π back towards μ → kept, even with D = 0.89.
    ("A>0 r<1 huge D", 0.9, 0.01, 1.0, "binary_tv", 1.0),
    # A < 0, r = 0.4 < 1, D = 0.3 > δ → masked.
    ("A<0 r<1 D>δ", 0.5, 0.2, -1.0, "binary_tv", 0.0),
    # A < 0 but r = 9.5 > 1: lowering π moves back towards μ → kept, even with D = 0.85.
    ("A<0 r>1 huge D", 0.1, 0.95, -1.0, "binary_tv", 1.0),
    # D = 0.08 ≤ δ → kept, for either sign of A.
    ("A>0 r>1 D<=δ", 0.5, 0.58, 1.0, "binary_tv", 1.0),
    ("A<0 r<1 D<=δ", 0.5, 0.45, -1.0, "binary_tv", 1.0),
    # r = 100, far outside any PPO clip, but D = 0.0099 ≤ δ: DPPO keeps rare-token updates.
    ("rare token r=100", 1e-4, 1e-2, 1.0, "binary_tv", 1.0),
    # A = 0 → never masked (D = 0.8, r = 9).
    ("A=0", 0.1, 0.9, 0.0, "binary_tv", 1.0),
    # KL(μ=0.5, π=0.8) = 0.5·ln(0.5/0.8) + 0.5·ln(0.5/0.2)
    #                  = 0.5·(−0.4700036) + 0.5·0.9162907 = 0.2231436 > δ, r = 1.6 → masked.
    ("KL A>0 r>1 D>δ", 0.5, 0.8, 1.0, "binary_kl", 0.0),
    # KL(μ=0.5, π=0.65) = 0.5·ln(0.5/0.65) + 0.5·ln(0.5/0.35)
    #                   = 0.5·(−0.2623643) + 0.5·0.3566749 = 0.0471553 ≤ δ → kept under KL,
    # although TV = 0.15 > δ masks the same token (next case).
    ("KL D<=δ", 0.5, 0.65, 1.0, "binary_kl", 1.0),
    ("TV of the same token", 0.5, 0.65, 1.0, "binary_tv", 0.0),
    # KL(μ=0.5, π=0.2) = 0.2231436 (the symmetric case above), A < 0, r = 0.4 → masked.
    ("KL A<0 r<1 D>δ", 0.5, 0.2, -1.0, "binary_kl", 0.0),
    # Same D, moving back → kept.
    ("KL A>0 r<1", 0.5, 0.2, 1.0, "binary_kl", 1.0),
    ("KL A<0 r>1", 0.5, 0.8, -1.0, "binary_kl", 1.0),
    ("KL A=0", 0.5, 0.8, 0.0, "binary_kl", 1.0),
]


@pytest.mark.parametrize(
    ("mu", "pi", "advantage", "divergence", "expected"),
    [case[1:] for case in MASK_CASES],
    ids=[case[0] for case in MASK_CASES],
)
def test_dppo_mask_cases(
    mu: float, pi: float, advantage: float, divergence: str, expected: float
) -> None:
    mask = dppo_mask(
        logs(pi), logs(mu), torch.tensor([advantage], dtype=F64), delta=0.1, divergence=divergence
    )
    assert mask.tolist() == [[expected]]


def test_binary_divergences_by_hand() -> None:
    logp_new, logp_old = logs(0.8, 0.65, 0.2), logs(0.5, 0.5, 0.01)
    tv = binary_divergence(logp_new, logp_old, divergence="binary_tv")
    torch.testing.assert_close(tv, torch.tensor([[0.3, 0.15, 0.19]], dtype=F64))
    # μ = 0.01, π = 0.2: 0.01·ln(0.01/0.2) + 0.99·ln(0.99/0.8)
    #                  = 0.01·(−2.9957323) + 0.99·0.2130932 = −0.0299573 + 0.2109623 = 0.1810050
    kl = binary_divergence(logp_new, logp_old, divergence="binary_kl")
    torch.testing.assert_close(
        kl, torch.tensor([[0.2231436, 0.0471553, 0.1810050]], dtype=F64), atol=1e-6, rtol=0
    )


def test_binary_kl_is_finite_at_probability_one_and_zero() -> None:
    # μ = 1 exactly (log 0) and π = 0 (log −∞) would give log 0: the clamp to [ε, 1 − ε] guards.
    logp_new = torch.tensor([[math.log(0.5), -math.inf, 0.0]])
    logp_old = torch.tensor([[0.0, math.log(0.5), 0.0]])
    kl = binary_divergence(logp_new, logp_old, divergence="binary_kl")
    assert torch.isfinite(kl).all()
    # μ → 1, π = 0.5: KL → ln(1/0.5) = ln 2 (up to ε), and equal tokens give 0.
    assert kl[0, 0].item() == pytest.approx(math.log(2.0), abs=20 * KL_PROB_EPS)
    assert kl[0, 2].item() == 0.0


def test_dppo_mask_broadcasts_per_sequence_advantages_and_has_no_grad() -> None:
    logp_new = logs(0.8, 0.2, 0.8, 0.2).reshape(2, 2).requires_grad_()
    logp_old = logs(0.5, 0.5, 0.5, 0.5).reshape(2, 2)
    per_sequence = torch.tensor([1.0, -1.0], dtype=F64)
    mask = dppo_mask(logp_new, logp_old, per_sequence)
    # Row 0 (A > 0): r = 1.6 masked, r = 0.4 kept. Row 1 (A < 0): r = 1.6 kept, r = 0.4 masked.
    assert mask.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert not mask.requires_grad
    per_token = per_sequence[:, None].expand(2, 2)
    assert torch.equal(dppo_mask(logp_new, logp_old, per_token), mask)


def test_dppo_mask_rejects_unknown_divergence() -> None:
    with pytest.raises(ValueError, match="binary_tv"):
        dppo_mask(logs(0.5), logs(0.5), torch.ones(1), divergence="tv")


# --------------------------------------------------------------------------------------------
# DPPO loss
# --------------------------------------------------------------------------------------------


def hand_batch() -> dict[str, torch.Tensor]:
    """Two sequences × 3 tokens; the last token of sequence 1 is padding."""
    return {
        # sequence 0, A = +1:  μ → π: 0.5 → 0.55, 0.5 → 0.8, 0.4 → 0.2
        # sequence 1, A = −0.5: μ → π: 0.5 → 0.2, 0.2 → 0.6, (padding 0.3 → 0.9)
        "logp_new": torch.tensor([[0.55, 0.8, 0.2], [0.2, 0.6, 0.9]], dtype=F64).log(),
        "logp_old": torch.tensor([[0.5, 0.5, 0.4], [0.5, 0.2, 0.3]], dtype=F64).log(),
        "advantages": torch.tensor([1.0, -0.5], dtype=F64),
        "response_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
    }


def test_dppo_loss_by_hand() -> None:
    # Token by token (δ = 0.1, TV), L = −M·r·A:
    #   r = 1.1, D = 0.05 ≤ δ        → kept,   L = −1.1 · 1    = −1.1
    #   r = 1.6, D = 0.3, A > 0      → masked, L = 0
    #   r = 0.5, moving back         → kept,   L = −0.5 · 1    = −0.5
    #   r = 0.4, D = 0.3, A < 0      → masked, L = 0
    #   r = 3.0, moving back         → kept,   L = −3 · (−0.5) = +1.5
    #   padding                      → response_mask 0
    # Σ = −1.1 − 0.5 + 1.5 = −0.1; 5 response tokens → loss = −0.02.
    batch = hand_batch()
    loss, stats = dppo_loss(**batch, delta=0.1, total_tokens=5)
    assert loss.item() == pytest.approx(-0.02, abs=1e-12)
    assert stats["masked_fraction"] == pytest.approx(2 / 5)
    assert stats["response_tokens"] == 5
    assert stats["ratio_mean"] == pytest.approx((1.1 + 1.6 + 0.5 + 0.4 + 3.0) / 5)
    assert stats["logp_diff_max"] == pytest.approx(math.log(3.0))
    diffs = [math.log(1.1), math.log(1.6), math.log(2.0), math.log(2.5), math.log(3.0)]
    assert stats["logp_diff_mean"] == pytest.approx(sum(diffs) / 5)
    # The denominator is the global count, whatever this micro-batch holds.
    loss_global, _ = dppo_loss(**batch, delta=0.1, total_tokens=10)
    assert loss_global.item() == pytest.approx(-0.01, abs=1e-12)


def test_dppo_loss_gradient() -> None:
    batch = hand_batch()
    logp_new = batch.pop("logp_new").requires_grad_()
    loss, _ = dppo_loss(logp_new, **batch, delta=0.1, total_tokens=5)
    loss.backward()
    # ∂L/∂logp_new = −M·r·A/N: masked and padding tokens get exactly 0.
    expected = torch.tensor([[-1.1, 0.0, -0.5], [0.0, 1.5, 0.0]], dtype=F64) / 5
    torch.testing.assert_close(logp_new.grad, expected)
    assert logp_new.grad[0, 1] == 0 and logp_new.grad[1, 0] == 0 and logp_new.grad[1, 2] == 0


def test_dppo_loss_gradcheck() -> None:
    batch = hand_batch()
    logp_new = batch.pop("logp_new").requires_grad_()

    def loss_of(logp: torch.Tensor) -> torch.Tensor:
        return dppo_loss(logp, **batch, delta=0.1, total_tokens=5)[0]

    assert torch.autograd.gradcheck(loss_of, (logp_new,), eps=1e-6, atol=1e-8)


def test_dppo_loss_ignores_everything_outside_the_response_mask() -> None:
    batch = hand_batch()
    loss, _ = dppo_loss(**batch, total_tokens=5)
    # Any value at the padding position — even a behaviour log-prob of −∞ — changes nothing.
    logp_new = batch.pop("logp_new").clone()
    logp_old = batch.pop("logp_old").clone()
    logp_new[1, 2], logp_old[1, 2] = 0.0, -math.inf
    logp_new.requires_grad_()
    other, stats = dppo_loss(logp_new, logp_old, **batch, total_tokens=5)
    other.backward()
    assert other.item() == pytest.approx(loss.item(), abs=1e-15)
    assert logp_new.grad[1, 2] == 0 and torch.isfinite(logp_new.grad).all()
    assert math.isfinite(stats["logp_diff_max"]) and stats["response_tokens"] == 5


def test_dppo_loss_per_token_advantages_match_per_sequence() -> None:
    batch = hand_batch()
    per_sequence, _ = dppo_loss(**batch, total_tokens=5)
    batch["advantages"] = batch["advantages"][:, None].expand(2, 3)
    per_token, _ = dppo_loss(**batch, total_tokens=5)
    assert per_token.item() == per_sequence.item()


def test_losses_reject_a_non_positive_token_count() -> None:
    with pytest.raises(ValueError, match="global count"):
        dppo_loss(**hand_batch(), total_tokens=0)
    with pytest.raises(ValueError, match="global count"):
        grpo_loss(**hand_batch(), total_tokens=0)


def test_dppo_binary_kl_loss_masks_by_kl() -> None:
    # Under KL (δ = 0.1) the r = 1.6 token (KL 0.2231) and the r = 0.4 token (KL(0.5, 0.2) =
    # 0.2231) are masked as under TV; the r = 3 token (μ = 0.2 → π = 0.6) moves back: kept.
    loss, stats = dppo_loss(**hand_batch(), divergence="binary_kl", total_tokens=5)
    assert loss.item() == pytest.approx(-0.02, abs=1e-12)
    assert stats["masked_fraction"] == pytest.approx(2 / 5)


# --------------------------------------------------------------------------------------------
# GRPO baseline
# --------------------------------------------------------------------------------------------


def test_grpo_loss_clips_both_sides_by_hand() -> None:
    # μ = 0.4 everywhere; π = 0.4·r. ε_low = 0.2, ε_high = 0.272: clip(r) ∈ [0.8, 1.272].
    #   A = +1, r = 1.5 : min(1.5, 1.272) = 1.272       → L = −1.272 (clipped high)
    #   A = +1, r = 0.5 : min(0.5, 0.8)   = 0.5         → L = −0.5   (unclipped)
    #   A = +1, r = 1.25: min(1.25, 1.25) = 1.25        → L = −1.25  (inside the wider ε_high)
    #   A = −1, r = 0.5 : min(−0.5, −0.8) = −0.8        → L = +0.8   (clipped low)
    #   A = −1, r = 1.5 : min(−1.5, −1.272) = −1.5      → L = +1.5   (unclipped)
    #   padding
    # Σ = −1.272 − 0.5 − 1.25 + 0.8 + 1.5 = −0.722; 5 tokens → −0.1444.
    ratios = torch.tensor([[1.5, 0.5, 1.25], [0.5, 1.5, 0.7]], dtype=F64)
    logp_old = torch.full((2, 3), 0.4, dtype=F64).log()
    logp_new = (0.4 * ratios).log().requires_grad_()
    advantages = torch.tensor([1.0, -1.0], dtype=F64)
    response_mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    loss, stats = grpo_loss(
        logp_new, logp_old, advantages, response_mask, clip_low=0.2, clip_high=0.272, total_tokens=5
    )
    assert loss.item() == pytest.approx(-0.1444, abs=1e-12)
    assert stats["clip_fraction"] == pytest.approx(2 / 5)
    loss.backward()
    # Clipped tokens get no gradient; the others −r·A/N.
    expected = torch.tensor([[0.0, -0.5, -1.25], [0.0, 1.5, 0.0]], dtype=F64) / 5
    torch.testing.assert_close(logp_new.grad, expected)


# --------------------------------------------------------------------------------------------
# Token-level normalisation across micro-batches
# --------------------------------------------------------------------------------------------


def random_batch(lengths: list[int], width: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    size = (len(lengths), width)
    logp_old = -torch.rand(size, generator=generator, dtype=F64) * 3
    logp_new = logp_old + 0.3 * torch.randn(size, generator=generator, dtype=F64)
    logp_new = logp_new.clamp(max=0.0)
    response_mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    advantages = torch.randn(len(lengths), generator=generator, dtype=F64)
    return {
        "logp_new": logp_new,
        "logp_old": logp_old,
        "advantages": advantages,
        "response_mask": response_mask,
    }


@pytest.mark.parametrize("loss_fn", [dppo_loss, grpo_loss])
def test_micro_batches_with_the_global_count_sum_to_the_full_batch_loss(loss_fn) -> None:
    batch = random_batch([5, 1, 2, 6], width=6, seed=0)
    halves = [
        {key: value[rows].clone() for key, value in batch.items()}
        for rows in (slice(0, 2), slice(2, 4))
    ]
    total = global_token_count(half["response_mask"] for half in halves)
    assert total == 14

    full_new = batch.pop("logp_new").requires_grad_()
    full, _ = loss_fn(full_new, **batch, total_tokens=total)
    full.backward()

    micro_new = [half.pop("logp_new").requires_grad_() for half in halves]
    summed = sum(
        loss_fn(new, **half, total_tokens=total)[0]
        for new, half in zip(micro_new, halves, strict=True)
    )
    summed.backward()
    torch.testing.assert_close(summed, full)
    torch.testing.assert_close(torch.cat([new.grad for new in micro_new]), full_new.grad)

    # Per-micro-batch means (6 and 8 tokens) weigh the short sequences' tokens differently.
    per_micro_mean = sum(
        loss_fn(new.detach(), **half, total_tokens=int(half["response_mask"].sum()))[0]
        for new, half in zip(micro_new, halves, strict=True)
    ) / len(halves)
    assert abs(per_micro_mean.item() - full.item()) > 1e-3


def _count_tokens_on_rank(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    try:
        # Rank 0 holds 3 + 2 response tokens in two micro-batches; rank 1 holds 4 in one.
        masks = (
            [torch.tensor([[1, 1, 1, 0]]), torch.tensor([[0, 1, 1, 0]])]
            if rank == 0
            else [torch.tensor([[1, 1], [1, 1]])]
        )
        count = global_token_count(masks)
        Path(out_dir, f"rank{rank}").write_text(str(count))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_global_token_count_sums_across_ranks(tmp_path: Path) -> None:
    assert global_token_count([torch.tensor([[1, 1, 1, 0]]), torch.tensor([[0, 1, 1, 0]])]) == 5
    assert global_token_count([]) == 0
    torch.multiprocessing.spawn(
        _count_tokens_on_rank,
        args=(2, str(tmp_path / "init"), str(tmp_path)),
        nprocs=2,
        join=True,
    )
    assert [(tmp_path / f"rank{rank}").read_text() for rank in (0, 1)] == ["9", "9"]


# --------------------------------------------------------------------------------------------
# Log-probabilities through the FP32 LM head
# --------------------------------------------------------------------------------------------


def reference_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    token_ids: torch.Tensor,
    temperature: float = 1.0,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain full-vocabulary computation in float64."""
    logits = torch.nn.functional.linear(
        hidden.to(F64), weight.to(F64), None if bias is None else bias.to(F64)
    )
    logp_all = torch.log_softmax(logits / temperature, dim=-1)
    logp = logp_all.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(-1)


def test_fp32_head_matches_float64_far_better_than_bf16() -> None:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 32, 256, generator=generator).bfloat16()
    weight = (torch.randn(4096, 256, generator=generator) / 4).bfloat16()
    token_ids = torch.randint(0, 4096, (2, 32), generator=generator)
    reference, reference_entropy = reference_logprobs(hidden, weight, token_ids)

    logp32, entropy32 = token_logprobs(hidden, weight, token_ids, fp32=True)
    logp16, _ = token_logprobs(hidden, weight, token_ids, fp32=False)
    assert logp32.dtype == torch.float32 and logp16.dtype == torch.bfloat16
    error32 = (logp32.to(F64) - reference).abs().max().item()
    error16 = (logp16.to(F64) - reference).abs().max().item()
    assert error32 < 1e-4
    assert error16 > 100 * error32
    torch.testing.assert_close(entropy32.to(F64), reference_entropy, atol=1e-4, rtol=0)


def test_token_logprobs_temperature_bias_and_chunking() -> None:
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(3, 7, 16, generator=generator)
    weight = torch.randn(50, 16, generator=generator)
    bias = torch.randn(50, generator=generator)
    token_ids = torch.randint(0, 50, (3, 7), generator=generator)
    one_chunk = token_logprobs(
        hidden, weight, token_ids, temperature=0.7, lm_head_bias=bias, chunk_size=10**6
    )
    reference = reference_logprobs(hidden, weight, token_ids, temperature=0.7, bias=bias)
    for ours, ref in zip(one_chunk, reference, strict=True):
        torch.testing.assert_close(ours.to(F64), ref, atol=1e-5, rtol=0)
    # Chunks change only which BLAS kernel multiplies each row (a gemv for one row, blocked
    # gemm for many), so results agree to rounding: float32 to a few ulps, float64 to ~1e-15.
    for dtype, atol in ((torch.float32, 1e-5), (F64, 1e-12)):
        args = (hidden.to(dtype), weight.to(dtype), token_ids)
        whole = token_logprobs(
            *args, temperature=0.7, lm_head_bias=bias.to(dtype), chunk_size=10**6
        )
        for chunk_size in (1, 4, 7, 21):
            chunked = token_logprobs(
                *args, temperature=0.7, lm_head_bias=bias.to(dtype), chunk_size=chunk_size
            )
            for ours, reference_chunk in zip(chunked, whole, strict=True):
                torch.testing.assert_close(ours, reference_chunk, atol=atol, rtol=0)


def test_token_logprobs_gradients_flow_through_chunks() -> None:
    generator = torch.Generator().manual_seed(2)
    hidden = torch.randn(2, 5, 8, generator=generator, dtype=F64)
    weight = torch.randn(11, 8, generator=generator, dtype=F64)
    bias = torch.randn(11, generator=generator, dtype=F64)
    token_ids = torch.randint(0, 11, (2, 5), generator=generator)
    inputs = tuple(t.clone().requires_grad_() for t in (hidden, weight, bias))

    def objective(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        logp, entropy = token_logprobs(
            h, w, token_ids, temperature=0.9, lm_head_bias=b, chunk_size=3
        )
        return logp.sum() + 0.5 * entropy.sum()

    # Checkpointed chunks differentiate exactly (float64 stays float64 under fp32=True).
    assert torch.autograd.gradcheck(objective, inputs, eps=1e-6, atol=1e-6, fast_mode=True)

    objective(*inputs).backward()
    reference_inputs = tuple(t.clone().requires_grad_() for t in (hidden, weight, bias))
    logp, entropy = reference_logprobs(
        reference_inputs[0],
        reference_inputs[1],
        token_ids,
        temperature=0.9,
        bias=reference_inputs[2],
    )
    (logp.sum() + 0.5 * entropy.sum()).backward()
    for ours, ref in zip(inputs, reference_inputs, strict=True):
        torch.testing.assert_close(ours.grad, ref.grad)


def test_token_logprobs_fp32_head_gives_float32_gradients_to_bf16_parameters() -> None:
    hidden = torch.randn(1, 4, 8).bfloat16().requires_grad_()
    weight = torch.randn(16, 8).bfloat16().requires_grad_()
    logp, _ = token_logprobs(hidden, weight, torch.tensor([[1, 2, 3, 4]]), chunk_size=2)
    logp.sum().backward()
    assert hidden.grad.dtype == torch.bfloat16 and weight.grad.dtype == torch.bfloat16
    assert hidden.grad.abs().sum() > 0 and weight.grad.abs().sum() > 0


def test_token_logprobs_rejects_misaligned_inputs() -> None:
    with pytest.raises(ValueError, match="shift"):
        token_logprobs(torch.zeros(1, 5, 4), torch.zeros(6, 4), torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(
            torch.zeros(1, 5, 4),
            torch.zeros(6, 4),
            torch.zeros(1, 5, dtype=torch.long),
            temperature=0,
        )


@pytest.fixture(scope="module")
def tiny_qwen3():
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen3Config(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model.eval()


def test_sequence_logprobs_equal_the_models_own_next_token_logprobs(tiny_qwen3) -> None:
    input_ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(3))
    attention_mask = torch.ones_like(input_ids)
    with torch.no_grad():
        logits = tiny_qwen3(input_ids=input_ids, attention_mask=attention_mask).logits
        logp, entropy = sequence_logprobs(tiny_qwen3, input_ids, attention_mask)
    logp_all = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    expected = logp_all.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    assert logp.shape == (2, 8)
    torch.testing.assert_close(logp, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy, -(logp_all.exp() * logp_all).sum(-1), atol=1e-5, rtol=0)


def test_sequence_logprobs_padding_temperature_and_gradients(tiny_qwen3) -> None:
    input_ids = torch.randint(0, 128, (2, 6), generator=torch.Generator().manual_seed(4))
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    logp, _ = sequence_logprobs(tiny_qwen3, input_ids, attention_mask, temperature=0.6)
    # Targets that are padding score 0.
    assert logp[1, 3:].tolist() == [0.0, 0.0]
    with torch.no_grad():
        logits = tiny_qwen3(input_ids=input_ids[:1]).logits
    expected = torch.log_softmax(logits[:, :-1] / 0.6, dim=-1).gather(-1, input_ids[:1, 1:, None])
    torch.testing.assert_close(logp[:1].detach(), expected.squeeze(-1), atol=1e-5, rtol=0)

    tiny_qwen3.zero_grad()
    logp.sum().backward()
    head = tiny_qwen3.get_output_embeddings().weight
    first_layer = tiny_qwen3.model.layers[0].mlp.down_proj.weight
    assert head.grad is not None and head.grad.abs().sum() > 0
    assert first_layer.grad is not None and first_layer.grad.abs().sum() > 0
    tiny_qwen3.zero_grad()
