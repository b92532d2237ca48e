"""The RL trainer's pure core: group advantages, the DPPO mask and loss, the GRPO baseline, and
log-probabilities through an FP32 LM head.

Everything here is a function of tensors; the trainer composes them. The recipe (DESIGN.md, "RL"):
DPPO with the binary total-variation divergence and δ = 0.1, β = 0, centred advantages
A = r − mean_group(r), zero-std group filtering, a token-level loss divided by the global number
of response tokens of the whole step, and an FP32 LM head so that trainer and inference engine
agree on the probabilities of the sampled tokens.

Notation, as in the DPPO paper (arXiv 2602.04879) and DESIGN.md "DPPO mask":

- μ_t = exp(logp_old_t): the behaviour probability of the sampled token, as reported by the
  inference engine that sampled it (not a recomputation by the trainer);
- π_t = exp(logp_new_t): the trainer's probability of the same token;
- r_t = π_t / μ_t: the importance ratio;
- A_t: the advantage of the token's sequence, broadcast over its tokens.

Shapes: ``B`` sequences, ``T`` positions, ``H`` hidden size, ``V`` vocabulary size. A
``response_mask`` is 1 on tokens the policy sampled and 0 on prompt, tool-output and padding
positions; only response tokens contribute to losses and statistics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from tmax.rl.learners.packing import SEGMENTS, packed_positions, packing_enabled, scoring_mask

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from tmax.rl.learners.sequence_parallel import SequenceShard

Divergence = Literal["binary_tv", "binary_kl"]
DIVERGENCES: tuple[str, ...] = ("binary_tv", "binary_kl")

# Probabilities are kept inside [ε, 1 − ε] for the binary KL so that neither log(μ/π) nor
# log((1 − μ)/(1 − π)) meets log 0; the paper's thresholds (δ ≥ 0.05) are far above the error.
KL_PROB_EPS = 1e-6


# --------------------------------------------------------------------------------------------
# Advantages and zero-std groups
# --------------------------------------------------------------------------------------------


def group_advantages(rewards: Tensor, *, normalize_std: bool = False, eps: float = 1e-6) -> Tensor:
    """Group-relative advantages of a ``[groups, group_size]`` reward table.

    The paper's recipe centres only: ``A_i = r_i − mean_group(r)`` (open-instruct's
    ``centered``). With ``normalize_std`` the GRPO z-score is used instead:
    ``A_i = (r_i − mean_group(r)) / (std_group(r) + eps)``, where ``std_group`` is the
    *population* standard deviation (divide by ``group_size``, not ``group_size − 1``): it is
    defined for a group of one, and it is the same statistic that :func:`zero_std_groups` (and
    ``np.std`` in the zero-std filter) tests against 0. ``eps`` keeps a zero-std group at
    A = 0 instead of 0/0.

    Returns a float tensor of the same shape as ``rewards``; every sequence's advantage is then
    broadcast over its tokens by the losses.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [groups, group_size], got shape {tuple(rewards.shape)}")
    rewards = rewards.to(torch.promote_types(rewards.dtype, torch.float32))
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not normalize_std:
        return centred
    std = rewards.std(dim=1, keepdim=True, correction=0)
    return centred / (std + eps)


def zero_std_groups(rewards: Tensor, *, atol: float = 0.0) -> Tensor:
    """Which groups of a ``[groups, group_size]`` reward table have all rewards equal.

    A group is zero-std iff ``max(r) − min(r) ≤ atol``. The default ``atol = 0`` is exact
    equality, like the recipe's ``std == 0`` test; pass a small ``atol`` when rewards are sums
    of floats (0.1 + 0.2 ≠ 0.3). Such groups have A = 0 for every sequence, so they carry no
    gradient: the trainer drops them and samples more (active sampling). Returns a
    ``[groups]`` bool tensor.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [groups, group_size], got shape {tuple(rewards.shape)}")
    if atol < 0:
        raise ValueError(f"atol must be ≥ 0, got {atol}")
    spread = rewards.amax(dim=1) - rewards.amin(dim=1)
    return spread <= atol


# --------------------------------------------------------------------------------------------
# DPPO
# --------------------------------------------------------------------------------------------


def _compute_dtype(tensor: Tensor) -> torch.dtype:
    """At least float32 (bf16 log-probs are upcast); float64 stays float64 for gradcheck."""
    return torch.promote_types(tensor.dtype, torch.float32)


def _per_token(advantages: Tensor, like: Tensor) -> Tensor:
    """Broadcast per-sequence advantages ``[B]`` (or per-token ``[B, T]``) to ``like``'s shape."""
    if advantages.dim() > like.dim():
        raise ValueError(
            f"advantages of shape {tuple(advantages.shape)} do not fit log-probs of shape "
            f"{tuple(like.shape)}: expected [B] or [B, T]"
        )
    advantages = advantages.reshape(*advantages.shape, *([1] * (like.dim() - advantages.dim())))
    return advantages.expand_as(like)


def _log1mexp(logp: Tensor) -> Tensor:
    """log(1 − exp(logp)) for logp < 0, accurate near 0 and for very negative logp."""
    return torch.where(
        logp > -math.log(2.0),
        torch.log(-torch.expm1(logp)),
        torch.log1p(-torch.exp(logp)),
    )


def binary_divergence(
    logp_new: Tensor, logp_old: Tensor, *, divergence: Divergence = "binary_tv"
) -> Tensor:
    """DPPO's per-token divergence between π and μ on the binary {sampled token, rest} split.

    - ``binary_tv``: ``D_t = |π_t − μ_t|``;
    - ``binary_kl``: ``D_t = μ log(μ/π) + (1−μ) log((1−μ)/(1−π))`` with both probabilities
      clamped to ``[ε, 1 − ε]`` (ε = ``KL_PROB_EPS``) and ``log(1 − p)`` computed without
      rounding ``1 − p`` to 0.

    Inputs are log-probabilities of the sampled tokens, any equal shapes; no gradient flows.
    """
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}, got {divergence!r}")
    dtype = _compute_dtype(logp_new)
    with torch.no_grad():
        logp_new = logp_new.detach().to(dtype)
        logp_old = logp_old.detach().to(dtype)
        if divergence == "binary_tv":
            return (logp_new.exp() - logp_old.exp()).abs()
        low, high = math.log(KL_PROB_EPS), math.log1p(-KL_PROB_EPS)
        log_pi, log_mu = logp_new.clamp(low, high), logp_old.clamp(low, high)
        mu = log_mu.exp()
        return mu * (log_mu - log_pi) + (1.0 - mu) * (_log1mexp(log_mu) - _log1mexp(log_pi))


def dppo_mask(
    logp_new: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    *,
    delta: float = 0.1,
    divergence: Divergence = "binary_tv",
) -> Tensor:
    """DPPO's trust-region mask M_t ∈ {0, 1} (DESIGN.md "DPPO mask"; DPPO paper Eq. 12–14).

    Token t is masked (``M_t = 0``) iff ``D_t > δ`` and
    ``((A_t > 0 and r_t > 1) or (A_t < 0 and r_t < 1))``: only an update that would push π
    further away from μ, in the direction the advantage pushes, is stopped. An update that
    moves r back towards 1 is never masked, whatever D is, and neither is a token with A = 0.
    D is :func:`binary_divergence`; ``r_t > 1`` is decided as ``logp_new_t > logp_old_t``.

    ``logp_new``/``logp_old``: ``[B, T]`` log-probs of the sampled tokens (trainer, behaviour);
    ``advantages``: ``[B]`` or ``[B, T]``. Returns a ``[B, T]`` float tensor of 0/1 with no
    gradient.
    """
    dtype = _compute_dtype(logp_new)
    with torch.no_grad():
        logp_new = logp_new.detach().to(dtype)
        logp_old = logp_old.detach().to(dtype)
        adv = _per_token(advantages.detach().to(dtype), logp_new)
        outside = binary_divergence(logp_new, logp_old, divergence=divergence) > delta
        ratio_up = logp_new > logp_old
        ratio_down = logp_new < logp_old
        away = ((adv > 0) & ratio_up) | ((adv < 0) & ratio_down)
        return (~(outside & away)).to(dtype)


def _check_total_tokens(total_tokens: int | float | Tensor) -> None:
    if float(total_tokens) <= 0:
        raise ValueError(
            f"total_tokens must be the step's global count of response tokens (> 0), "
            f"got {total_tokens}"
        )


def _log_ratio(logp_new: Tensor, logp_old: Tensor, response_mask: Tensor) -> Tensor:
    """log r_t = logp_new − logp_old on response tokens and 0 elsewhere.

    Off-response positions may hold anything (a behaviour log-prob of −inf on padding, say);
    zeroing them before ``exp`` keeps inf·0 = NaN out of the loss and its gradient.
    """
    dtype = _compute_dtype(logp_new)
    diff = logp_new.to(dtype) - logp_old.detach().to(dtype)
    return torch.where(response_mask.bool(), diff, torch.zeros_like(diff))


def _ratio_stats(log_ratio: Tensor, response_mask: Tensor) -> dict[str, float]:
    """|logp_new − logp_old| and r over the response tokens of this micro-batch."""
    on = response_mask.bool()
    count = int(on.sum())
    if count == 0:
        return {
            "response_tokens": 0.0,
            "logp_diff_mean": 0.0,
            "logp_diff_max": 0.0,
            "ratio_mean": 0.0,
        }
    diff = log_ratio.detach()[on]
    return {
        "response_tokens": float(count),
        "logp_diff_mean": float(diff.abs().mean()),
        "logp_diff_max": float(diff.abs().max()),
        "ratio_mean": float(diff.exp().mean()),
    }


def _masked_fraction(flags: Tensor, response_mask: Tensor) -> float:
    on = response_mask.bool()
    count = int(on.sum())
    return float(flags[on].sum()) / count if count else 0.0


def dppo_loss(
    logp_new: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    delta: float = 0.1,
    divergence: Divergence = "binary_tv",
    total_tokens: int | float | Tensor,
) -> tuple[Tensor, dict[str, float]]:
    """The DPPO policy loss of one micro-batch (DESIGN.md "DPPO mask"; DPPO paper Eq. 11).

    Per token ``L_t = −M_t · r_t · A_t`` with ``r_t = exp(logp_new_t − logp_old_t)`` carrying
    the gradient (∂L_t/∂logp_new_t = −M_t r_t A_t) and the mask ``M_t`` of :func:`dppo_mask`
    detached. There is no ratio clip and no cap on r: the mask is the trust region. Then

        loss = Σ_t L_t · response_mask_t / total_tokens

    where ``total_tokens`` is the GLOBAL number of response tokens of the whole optimizer step
    (all micro-batches, all data-parallel ranks; see :func:`global_token_count`), so the
    micro-batch losses sum to the step's token-mean and every token weighs the same whatever
    the length of its sequence or the micro-batch it landed in.

    Shapes: ``logp_new``, ``logp_old``, ``response_mask``: ``[B, T]``; ``advantages``: ``[B]``
    (one per sequence) or ``[B, T]``. Returns the scalar loss and statistics of this
    micro-batch over its response tokens: ``masked_fraction`` (share of tokens with M = 0),
    ``logp_diff_mean``/``logp_diff_max`` (of |logp_new − logp_old|), ``ratio_mean`` and
    ``response_tokens`` (the local count, to weight the statistics when averaging).
    """
    _check_total_tokens(total_tokens)
    log_ratio = _log_ratio(logp_new, logp_old, response_mask)
    adv = _per_token(advantages.detach().to(log_ratio.dtype), log_ratio)
    mask = dppo_mask(logp_new, logp_old, adv, delta=delta, divergence=divergence)
    per_token = -mask * log_ratio.exp() * adv
    loss = (per_token * response_mask.to(per_token.dtype)).sum() / total_tokens
    stats = {
        "masked_fraction": _masked_fraction(1.0 - mask, response_mask),
        **_ratio_stats(log_ratio, response_mask),
    }
    return loss, stats


# --------------------------------------------------------------------------------------------
# GRPO baseline
# --------------------------------------------------------------------------------------------


def grpo_loss(
    logp_new: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.272,
    total_tokens: int | float | Tensor,
) -> tuple[Tensor, dict[str, float]]:
    """The GRPO baseline: PPO's clipped objective with the ratio against the behaviour policy μ.

    ``L_t = −min(r_t A_t, clip(r_t, 1 − ε_low, 1 + ε_high) A_t)`` with
    ``r_t = exp(logp_new_t − logp_old_t)``, ε_low = ``clip_low`` (0.2) and ε_high =
    ``clip_high`` (0.272, DESIGN.md), normalised like :func:`dppo_loss`:
    ``loss = Σ_t L_t · response_mask_t / total_tokens`` with the global token count.

    Statistics as :func:`dppo_loss`, with ``clip_fraction`` (share of response tokens where the
    clipped term is the smaller one, i.e. whose gradient the clip removes) in place of
    ``masked_fraction``.
    """
    _check_total_tokens(total_tokens)
    if not (0 <= clip_low < 1 and clip_high >= 0):
        raise ValueError(
            f"clip_low must be in [0, 1) and clip_high ≥ 0, got {clip_low}, {clip_high}"
        )
    log_ratio = _log_ratio(logp_new, logp_old, response_mask)
    adv = _per_token(advantages.detach().to(log_ratio.dtype), log_ratio)
    ratio = log_ratio.exp()
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    loss = (per_token * response_mask.to(per_token.dtype)).sum() / total_tokens
    stats = {
        "clip_fraction": _masked_fraction((clipped < unclipped).detach(), response_mask),
        **_ratio_stats(log_ratio, response_mask),
    }
    return loss, stats


# --------------------------------------------------------------------------------------------
# Token-level normalisation across micro-batches and ranks
# --------------------------------------------------------------------------------------------


def global_token_count(response_masks: Iterable[Tensor]) -> int:
    """The number of response tokens of a whole optimizer step: the loss denominator.

    Sums every micro-batch's ``response_mask`` on this rank, then all-reduces (SUM) across the
    data-parallel ranks when ``torch.distributed`` is initialised. Every rank must call it (with
    its own micro-batches, possibly none), as with any collective.
    """
    masks = list(response_masks)
    local = sum(int(mask.sum()) for mask in masks)
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return local
    device = masks[0].device if masks else torch.device("cpu")
    if torch.distributed.get_backend() == "nccl" and device.type != "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    count = torch.tensor(local, dtype=torch.int64, device=device)
    torch.distributed.all_reduce(count, op=torch.distributed.ReduceOp.SUM)
    return int(count.item())


# --------------------------------------------------------------------------------------------
# Log-probabilities through the (FP32) LM head
# --------------------------------------------------------------------------------------------


def _head_logprobs(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    token_ids: Tensor,
    temperature: float,
) -> tuple[Tensor, Tensor]:
    """One chunk: ``[N, H]`` hidden, ``[N]`` targets → log-probs ``[N]`` and entropies ``[N]``."""
    logits = F.linear(hidden, weight, bias) / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(dim=-1)
    return logp, entropy


def token_logprobs(
    hidden: Tensor,
    lm_head_weight: Tensor,
    token_ids: Tensor,
    *,
    temperature: float = 1.0,
    fp32: bool = True,
    chunk_size: int = 1024,
    lm_head_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Log-probabilities of given tokens, and the entropy, through the LM head.

    Alignment convention: ``hidden[b, t]`` is the state whose next-token distribution scores
    ``token_ids[b, t]``: the caller shifts (for a causal LM, ``hidden[:, :-1]`` with
    ``input_ids[:, 1:]``; :func:`sequence_logprobs` does this).

    ``log p_t = log_softmax((hidden_t · Wᵀ + b) / temperature)[token_ids_t]`` and
    ``entropy_t = −Σ_v p_v log p_v`` of the same tempered distribution (the one the inference
    engine sampled from at that temperature).

    With ``fp32`` (the paper's "FP32 LM head") both the hidden states and the head's weight
    and bias are upcast to float32 before the matmul, so bf16 training computes the sampled
    tokens' probabilities as precisely as an FP32-head inference engine (float64 inputs stay
    float64). With ``fp32=False`` the head runs in ``hidden``'s dtype.

    Memory: the ``B·T`` positions are processed ``chunk_size`` at a time and, when a gradient
    is needed, each chunk is checkpointed (its ``chunk_size × V`` logits are recomputed in
    backward), so at most one chunk's logits are alive instead of ``B·T × V``. Differentiable
    w.r.t. ``hidden``, ``lm_head_weight`` and ``lm_head_bias``.

    Shapes: ``hidden [B, T, H]``, ``lm_head_weight [V, H]``, ``token_ids [B, T]``,
    ``lm_head_bias [V]``. Returns ``(logprobs [B, T], entropy [B, T])`` in the head's compute
    dtype. Under DeepSpeed ZeRO-3 the weight must be gathered (``GatheredParameters``).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be ≥ 1, got {chunk_size}")
    if hidden.shape[:-1] != token_ids.shape:
        raise ValueError(
            f"hidden {tuple(hidden.shape)} and token_ids {tuple(token_ids.shape)} must share "
            "[B, T] (hidden[b, t] scores token_ids[b, t]; shift before calling)"
        )
    dtype = _compute_dtype(hidden) if fp32 else hidden.dtype
    weight = lm_head_weight.to(dtype)
    bias = lm_head_bias.to(dtype) if lm_head_bias is not None else None
    flat_hidden = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
    flat_ids = token_ids.reshape(-1).long()

    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (flat_hidden, weight, bias)
    )
    logps: list[Tensor] = []
    entropies: list[Tensor] = []
    for start in range(0, flat_ids.numel(), chunk_size):
        chunk = (
            flat_hidden[start : start + chunk_size],
            weight,
            bias,
            flat_ids[start : start + chunk_size],
            temperature,
        )
        if needs_grad:
            logp, entropy = checkpoint(_head_logprobs, *chunk, use_reentrant=False)
        else:
            logp, entropy = _head_logprobs(*chunk)
        logps.append(logp)
        entropies.append(entropy)
    if not logps:  # no positions at all
        empty = flat_hidden.new_zeros(token_ids.shape)
        return empty, empty.clone()
    return (
        torch.cat(logps).reshape(token_ids.shape),
        torch.cat(entropies).reshape(token_ids.shape),
    )


def sequence_logprobs(
    model: PreTrainedModel,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    temperature: float = 1.0,
    fp32_lm_head: bool = True,
    chunk_size: int = 1024,
    shard: SequenceShard | None = None,
    segments: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Next-token log-probs and entropies of ``input_ids[:, 1:]`` under a transformers causal LM.

    Runs the model's body (``model.base_model``, e.g. ``Qwen3Model``) for the final, normed
    hidden states, and scores them with :func:`token_logprobs` through
    ``model.get_output_embeddings()`` (weight, and bias if any) in FP32 when
    ``fp32_lm_head``; the full ``[B, T, V]`` logits are never built. Position ``t`` of the
    result is ``log p(input_ids[:, t + 1] | input_ids[:, :t + 1])``; positions whose target is
    padding (``attention_mask[:, t + 1] == 0``) are set to 0.

    Shapes: ``input_ids``, ``attention_mask``: ``[B, T]``; returns ``(logprobs [B, T − 1],
    entropy [B, T − 1])``.

    With ``shard`` (sequence parallelism, :mod:`tmax.rl.learners.sequence_parallel`; the rows
    must be right-padded) this rank scores only its slice of the positions: both results are
    :meth:`~tmax.rl.learners.sequence_parallel.SequenceShard.split_scores` of the whole ones.

    With ``segments`` (sequence packing, :mod:`tmax.rl.learners.packing`: ``input_ids`` is one row
    of whole episodes of these lengths, end to end) each episode is run and scored as if
    alone: positions restart at 0, the token mixers stop at its ends, and its last
    position scores nothing. The model must have had
    :func:`~tmax.rl.learners.packing.enable_packing`.

    ``model`` may be a DeepSpeed engine: the scoring then runs as the engine's forward,
    which ZeRO-3 needs once per micro-batch (without it the gradients of several
    micro-batches before a step overwrite instead of adding up).
    """
    wrapped = getattr(model, "module", None)
    if isinstance(wrapped, torch.nn.Module) and hasattr(model, "optimizer"):

        def forward() -> tuple[Tensor, Tensor]:
            return sequence_logprobs(wrapped, input_ids, attention_mask,
                                     temperature=temperature, fp32_lm_head=fp32_lm_head,
                                     chunk_size=chunk_size, shard=shard,
                                     segments=segments)  # fmt: skip

        wrapped.forward = forward  # type: ignore[method-assign]
        try:
            return model()  # type: ignore[no-any-return]
        finally:
            del wrapped.forward
    body = model.base_model
    if body is model:
        raise ValueError(f"{type(model).__name__} has no separate body (base_model) to run")
    inputs: dict[str, Any] = {}  # the body's arguments besides the tokens
    positions = None
    if segments is not None:
        if not packing_enabled(model):
            raise ValueError("a packed micro-batch needs a model prepared by enable_packing")
        if input_ids.shape[0] != 1:
            raise ValueError(f"a packed micro-batch is one row, got {input_ids.shape[0]}")
        positions = packed_positions(segments, input_ids.shape[1]).to(input_ids.device)
        inputs[SEGMENTS] = segments
        # Every token is attended (an all-ones mask also keeps transformers from building
        # a block mask out of the restarting positions); the mask below says what scores.
        attention_mask = scoring_mask(attention_mask, segments)
    if shard is None:
        if segments is None:
            inputs["attention_mask"] = attention_mask
        else:
            inputs.update(attention_mask=torch.ones_like(input_ids), position_ids=positions)
        outputs: Any = body(input_ids=input_ids, use_cache=False, **inputs)
        hidden = outputs.last_hidden_state[:, :-1]
        targets, target_is_token = input_ids[:, 1:], attention_mask[:, 1:].bool()
    else:
        local, local_positions, targets, target_is_token = shard.split_tokens(
            input_ids, attention_mask, positions
        )
        if segments is not None:
            inputs["attention_mask"] = torch.ones_like(local)
        outputs = body(input_ids=local, position_ids=local_positions, use_cache=False, **inputs)
        hidden = outputs.last_hidden_state
    head = model.get_output_embeddings()

    def scored(hidden_states: Tensor) -> tuple[Tensor, Tensor]:
        return token_logprobs(
            hidden_states,
            head.weight,
            targets,
            temperature=temperature,
            fp32=fp32_lm_head,
            chunk_size=chunk_size,
            lm_head_bias=getattr(head, "bias", None),
        )

    # Scored inside the head module's own call: under DeepSpeed ZeRO-3 the head's
    # weight is gathered only while the module runs (its hooks), and its gradient is
    # reduced back to the partitions by the same hooks.
    head.forward = scored  # type: ignore[method-assign]
    try:
        logp, entropy = head(hidden)
    finally:
        del head.forward
    return (
        torch.where(target_is_token, logp, torch.zeros_like(logp)),
        torch.where(target_is_token, entropy, torch.zeros_like(entropy)),
    )
