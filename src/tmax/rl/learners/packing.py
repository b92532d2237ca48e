"""Sequence packing: several episodes end to end in one micro-batch row (``rl.packing``).

Right-padded micro-batches waste the slots between each episode and the longest of its
micro-batch, and a rank with few episodes to sort pays most of it
(``benchmarks/packing.py``: 1.1-1.4x the token slots, 1.4-1.5x the passes of the busiest
rank at the paper's step). Packed, a micro-batch is one row of whole episodes placed
first-fit by decreasing length into the token budget (:func:`pack_rows`).

Only the token mixers must not see across an episode's end. Everything else in a decoder
layer works token by token. The mixers' own kernels are cut at the boundaries here: the
attention function of the model's attention implementation, and for the Gated DeltaNet
layers of Qwen3.5 (and Qwen3-Next) the causal convolution and the chunked delta rule,
each run once per episode with no state carried over. The boundaries reach them as the
keyword argument :data:`SEGMENTS`, the episodes' lengths as a CPU tensor (reading them
costs no device synchronisation), which transformers hands from the model's call
through every decoder layer into those functions. Gradient checkpointing keeps it with
the layer's other inputs, so the recomputation cuts the same.

The projections, norms and MLPs around the kernels still run once on the whole row,
which keeps every parameter-holding module to one call per layer: under ZeRO-3 each
call of such a module gathers its weights, and ranks holding rows of different episode
counts would otherwise gather different numbers of times and fall out of step.

Positions restart at 0 for each episode, as the inference engine saw them (rotary
embeddings are computed from them); the last token of an episode scores nothing.
Episodes are cut with a Python loop over plain kernels: exact on any device. On GPUs,
flash attention's and flash-linear-attention's variable-length kernels would do the same
in one launch each.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from tmax.rl.learners.sequence_parallel import causal_attention

SEGMENTS = "tmax_segments"
"""The keyword argument that carries a packed row's episode lengths to the kernels."""

DELTA_NET_KERNELS = ("causal_conv1d_fn", "torch_chunk_gated_delta_rule")
"""The functions of a Gated DeltaNet layer's module that run along the sequence."""


def pack_rows(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices of ``lengths`` in rows of at most ``token_budget`` tokens: first fit by
    decreasing length (ties by index, so the result is deterministic); an episode longer
    than the budget is a row of its own."""
    if token_budget < 1:
        raise ValueError(f"rl.micro_batch_tokens must be at least 1, got {token_budget}")
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        n = lengths[index]
        for row, free in enumerate(room):
            if n <= free:
                rows[row].append(index)
                room[row] -= n
                break
        else:
            rows.append([index])
            room.append(max(0, token_budget - n))
    return rows


def segment_bounds(segments: Tensor | Sequence[int], length: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each episode of a row ``length`` tokens long; tokens past the
    last episode (padding) are one more segment."""
    sizes = segments.tolist() if isinstance(segments, Tensor) else list(segments)
    bounds: list[tuple[int, int]] = []
    start = 0
    for size in sizes:
        if size < 1:
            raise ValueError(f"a packed episode must hold at least one token, got {sizes}")
        bounds.append((start, start + int(size)))
        start += int(size)
    if start > length:
        raise ValueError(f"packed episodes of {sizes} tokens do not fit a row of {length}")
    if start < length:
        bounds.append((start, length))
    return bounds


def packed_positions(segments: Tensor, length: int) -> Tensor:
    """``[1, length]`` position ids that restart at 0 for each episode (on the CPU)."""
    pieces = [torch.arange(b - a) for a, b in segment_bounds(segments, length)]
    return torch.cat(pieces).unsqueeze(0)


def scoring_mask(attention_mask: Tensor, segments: Tensor) -> Tensor:
    """``attention_mask`` with every episode's first token but the row's first cleared:
    :func:`tmax.rl.loss.sequence_logprobs` scores position t by the token after it, so an
    episode's last position (whose next token opens another episode) scores nothing."""
    out = attention_mask.clone()
    for start, _ in segment_bounds(segments, attention_mask.shape[1])[1:]:
        out[:, start] = 0
    return out


def _cut(x: Tensor | None, dim: int, start: int, end: int) -> Tensor | None:
    return None if x is None else x.narrow(dim, start, end - start)


def _packed_attention(original: Callable[..., Any]) -> Callable[..., Any]:
    def attention(
        module: nn.Module, query: Tensor, key: Tensor, value: Tensor,
        attention_mask: Tensor | None, **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        segments = kwargs.pop(SEGMENTS, None)
        if segments is None:
            return original(module, query, key, value, attention_mask, **kwargs)  # type: ignore[no-any-return]
        if query.shape[0] != 1:
            raise ValueError(f"a packed micro-batch is one row, got {query.shape[0]}")
        ids = kwargs.pop("position_ids", None)
        outputs = []
        for start, end in segment_bounds(segments, query.shape[2]):
            mask = attention_mask
            if mask is not None:  # [B, T] (flash) or [B, 1, T, T]
                mask = mask[:, start:end] if mask.dim() == 2 else mask[..., start:end, start:end]
            out, _ = original(
                module, _cut(query, 2, start, end), _cut(key, 2, start, end),
                _cut(value, 2, start, end), mask, position_ids=_cut(ids, -1, start, end),
                **kwargs,
            )  # fmt: skip
            outputs.append(out)  # [1, t, heads, dim]
        return torch.cat(outputs, dim=1), None

    attention._tmax_packed = True  # type: ignore[attr-defined]
    return attention


def _packed_conv(original: Callable[..., Any]) -> Callable[..., Any]:
    def conv(hidden_states: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        segments = kwargs.pop(SEGMENTS, None)
        if segments is None:
            return original(hidden_states, *args, **kwargs)  # type: ignore[no-any-return]
        length = hidden_states.shape[-1]  # [B, channels, T]
        return torch.cat(
            [original(_cut(hidden_states, -1, a, b), *args, **kwargs)
             for a, b in segment_bounds(segments, length)],
            dim=-1,
        )  # fmt: skip

    conv._tmax_packed = True  # type: ignore[attr-defined]
    return conv


def _packed_delta_rule(original: Callable[..., Any]) -> Callable[..., Any]:
    def delta_rule(
        query: Tensor, key: Tensor, value: Tensor, g: Tensor, beta: Tensor, *args: Any,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        segments = kwargs.pop(SEGMENTS, None)
        if segments is None:
            return original(query, key, value, g, beta, *args, **kwargs)  # type: ignore[no-any-return]
        if args or kwargs.get("initial_state") is not None or kwargs.get("output_final_state"):
            raise ValueError("a packed row runs without a recurrent state (training only)")
        outputs = []
        for a, b in segment_bounds(segments, query.shape[1]):  # [B, T, heads, dim]
            out, _ = original(*(_cut(t, 1, a, b) for t in (query, key, value, g, beta)), **kwargs)
            outputs.append(out)
        return torch.cat(outputs, dim=1), None

    delta_rule._tmax_packed = True  # type: ignore[attr-defined]
    return delta_rule


Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def _wrap(owner: Any, name: str, wrapper: Wrapper) -> None:
    """Replace ``owner``'s ``name`` (an item of a mapping, else an attribute) by its
    packed version, once."""
    mapping = isinstance(owner, MutableMapping)
    current = owner[name] if mapping else getattr(owner, name)
    if getattr(current, "_tmax_packed", False):
        return
    if mapping:
        owner[name] = wrapper(current)
    else:
        setattr(owner, name, wrapper(current))


def enable_packing(model: nn.Module) -> None:
    """Cut ``model``'s token-mixing kernels at the episodes of a packed row (the module
    docstring). Idempotent. Raises ``ValueError`` naming what it does not know: an
    attention implementation that needs a mask to be causal (eager), or a sequence mixer
    other than softmax attention and Gated DeltaNet."""
    attention = causal_attention(model, "rl.packing")
    mixers = 0
    for layer in model.modules():
        softmax = getattr(layer, "self_attn", None)
        if isinstance(softmax, nn.Module):
            # the registry the attention module's own code looks its function up in
            home = sys.modules[type(softmax).__module__]
            registry = getattr(home, "ALL_ATTENTION_FUNCTIONS", None)
            if not isinstance(registry, MutableMapping) or attention not in registry:
                raise ValueError(
                    f"rl.packing does not know how {type(softmax).__name__} finds its "
                    f"attention function; set rl.packing to false"
                )
            _wrap(registry, attention, _packed_attention)
            mixers += 1
        linear = getattr(layer, "linear_attn", None)
        if isinstance(linear, nn.Module):
            module = sys.modules[type(linear).__module__]
            missing = [n for n in DELTA_NET_KERNELS if not callable(getattr(module, n, None))]
            if missing:
                raise ValueError(
                    f"rl.packing does not know the sequence mixer {type(linear).__name__} "
                    f"(its module has no {', '.join(missing)}); set rl.packing to false"
                )
            _wrap(module, "causal_conv1d_fn", _packed_conv)
            _wrap(module, "torch_chunk_gated_delta_rule", _packed_delta_rule)
            mixers += 1
    if not mixers:
        raise ValueError(
            f"{type(model).__name__} has no token mixer rl.packing knows (self_attn, "
            "linear_attn in its decoder layers); set rl.packing to false"
        )
    model._tmax_packing = True  # type: ignore[assignment]


def packing_enabled(model: nn.Module) -> bool:
    """Whether :func:`enable_packing` prepared ``model``."""
    return bool(getattr(model, "_tmax_packing", False))
