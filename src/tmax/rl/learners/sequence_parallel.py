"""Sequence parallelism: one episode's tokens split over several training ranks.

``rl.sequence_parallel_size`` = P puts every P consecutive training ranks in a sequence
group. Rank 0 gives the ranks of a group the same micro-batches, and each rank runs the
model on its own P-th of every sequence: positions ``[r·c, (r+1)·c)`` of the sequence
padded to ``P·c`` tokens. Embeddings, norms, MLPs, the layer inputs that gradient
checkpointing keeps, the FP32 head and the loss therefore hold ``1/P`` of the tokens.

Only the token mixers need the whole sequence. Each mixer (softmax attention and Gated
DeltaNet alike) gathers its input from the group, runs on the whole sequence, and keeps
its own slice of the output. That is exact for any mixer, causal or recurrent: a Gated
DeltaNet layer's state runs through the whole episode, not restarting at a slice. The
price is that every rank of a group computes every mixer over the whole sequence, and
holds one mixer's activations at full length while that layer runs. The paper's release
splits attention by heads (DeepSpeed Ulysses) and runs Gated DeltaNet on each slice with
the state handed on (flash-linear-attention's context parallelism): less compute, but
GPU kernels only (:func:`tmax.rl.launch.plan.activation_memory` counts the full-length mixer).

Gradients: a rank's loss covers its own slice's tokens, so the sum over the ranks of a
group is the micro-batch's loss, which is the learner's convention (the gradient of the
sum of every rank's losses). A mixer's input gradient is the sum over the group of what
each rank's output slice sends back (an all-reduce), of which each rank keeps its slice;
parameter gradients add up over the ranks through ZeRO-3 as they do for data.

Attention runs causally with no mask (the micro-batches are right-padded, so padding
comes after every real token and never reaches one); this needs an attention kernel
that is causal without a mask (sdpa or flash attention, not eager).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
from torch import Tensor, nn

log = logging.getLogger("tmax.rl")

MIXERS = ("self_attn", "linear_attn")
"""The attributes of a transformers decoder layer that hold its token mixer."""
CAUSAL_WITHOUT_MASK = ("sdpa", "flash_attention_2", "flash_attention_3")


@dataclass(frozen=True)
class SequenceShard:
    """This rank's place in its sequence group."""

    group: Any
    rank: int
    size: int

    def local_length(self, length: int) -> int:
        """Tokens per rank of a sequence of ``length`` tokens (padded to ``size`` parts)."""
        return -(-length // self.size)

    def split_tokens(
        self, input_ids: Tensor, attention_mask: Tensor, positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """This rank's slice of right-padded ``[B, T]`` rows: ``(input_ids, positions,
        targets, target_is_token)``, each ``[B, c]``. Position ``j`` scores ``targets[:, j]``,
        the token after it in the whole sequence (0 and not a token past the end).
        ``positions`` (``[1, T]``; a packed row's, which restart at each episode) default
        to ``0 … T−1``; past the row they go on counting."""
        rows, length = input_ids.shape
        c = self.local_length(length)
        start = self.rank * c
        extra = self.size * c + 1 - length
        ids = nn.functional.pad(input_ids, (0, extra))
        mask = nn.functional.pad(attention_mask, (0, extra))
        if positions is None:
            positions = torch.arange(start, start + c, device=input_ids.device).expand(rows, c)
        else:
            tail = torch.arange(length, self.size * c, device=positions.device)
            whole = torch.cat([positions[0], positions[0, -1:] + 1 + tail - length])
            positions = whole[start : start + c].expand(rows, c)
        return (
            ids[:, start : start + c],
            positions,
            ids[:, start + 1 : start + c + 1],
            mask[:, start + 1 : start + c + 1].bool(),
        )

    def split_scores(self, values: Tensor, length: int) -> Tensor:
        """This rank's slice of a ``[B, T − 1]`` tensor aligned with next-token positions
        (response mask, behaviour log-probs) of rows ``length`` tokens long."""
        c = self.local_length(length)
        padded = nn.functional.pad(values, (0, self.size * c - values.shape[1]))
        return padded[:, self.rank * c : (self.rank + 1) * c]


def sequence_groups(size: int, timeout_s: float) -> SequenceShard | None:
    """This rank's sequence group of ``size`` consecutive ranks (``None`` for size 1).

    A collective: every rank creates every group, in the same order."""
    if size < 1:
        raise ValueError(f"rl.sequence_parallel_size must be at least 1, got {size}")
    if size == 1:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            f"rl.sequence_parallel_size is {size}, but this run trains in one process; "
            "set it to 1 or train with several ranks (rl.training_nodes, rl.ranks_per_node)"
        )
    world, rank = dist.get_world_size(), dist.get_rank()
    if world % size:
        raise ValueError(
            f"rl.sequence_parallel_size ({size}) must divide the number of training ranks "
            f"({world}: rl.training_nodes × rl.ranks_per_node)"
        )
    mine: SequenceShard | None = None
    for start in range(0, world, size):
        ranks = list(range(start, start + size))
        group = dist.new_group(ranks, timeout=timedelta(seconds=timeout_s))
        if rank in ranks:
            mine = SequenceShard(group, rank - start, size)
    assert mine is not None
    log.info("sequence group of %d (rank %d in it): ranks %d-%d split each episode", size,
             mine.rank, rank - mine.rank, rank - mine.rank + size - 1)  # fmt: skip
    return mine


def _gather(local: Tensor, shard: SequenceShard, dim: int) -> Tensor:
    parts = [torch.empty_like(local) for _ in range(shard.size)]
    torch.distributed.all_gather(parts, local.contiguous(), group=shard.group)
    return torch.cat(parts, dim=dim)


class _GatherSequence(torch.autograd.Function):
    """The whole sequence from every rank's slice; backward: the summed gradient's slice."""

    @staticmethod
    def forward(ctx: Any, local: Tensor, shard: SequenceShard, dim: int) -> Tensor:
        ctx.shard, ctx.dim, ctx.length = shard, dim, local.shape[dim]
        return _gather(local, shard, dim)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        shard: SequenceShard = ctx.shard
        # Every rank's output slice sends a gradient to the whole input; summed over the
        # group, each rank keeps its own slice (an all-reduce: gloo has no reduce-scatter).
        total = grad.contiguous().clone()
        torch.distributed.all_reduce(total, group=shard.group)
        return total.narrow(ctx.dim, shard.rank * ctx.length, ctx.length), None, None


def gather_sequence(local: Tensor, shard: SequenceShard, dim: int = 1) -> Tensor:
    """``local`` ``[B, c, …]`` from every rank of the group, concatenated along ``dim``."""
    return _GatherSequence.apply(local, shard, dim)  # type: ignore[no-any-return]


def _whole_sequence_mixer(original: Callable[..., Any], shard: SequenceShard) -> Callable[..., Any]:
    def forward(*args: Any, **kwargs: Any) -> Any:
        if "hidden_states" in kwargs:
            local = kwargs.pop("hidden_states")
        else:
            local, args = args[0], args[1:]
        length = local.shape[1]
        embeddings = kwargs.get("position_embeddings")
        if embeddings is not None:  # (cos, sin) of this slice's positions: [B, c, d]
            kwargs["position_embeddings"] = tuple(
                _gather(t.detach(), shard, dim=-2) for t in embeddings
            )
        kwargs["attention_mask"] = None  # causal over the whole sequence (module docstring)
        if "position_ids" in kwargs:
            kwargs["position_ids"] = None
        output = original(gather_sequence(local, shard, dim=1), *args, **kwargs)
        start = shard.rank * length
        if isinstance(output, tuple):
            return (output[0][:, start : start + length], *output[1:])
        return output[:, start : start + length]

    return forward


def causal_attention(model: nn.Module, knob: str) -> str:
    """``model``'s attention implementation, which must be causal without a mask
    (:data:`CAUSAL_WITHOUT_MASK`); else a ``ValueError`` saying ``knob`` needs one."""
    attention = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if attention not in CAUSAL_WITHOUT_MASK:
        raise ValueError(
            f"{knob} needs an attention kernel that is causal without a mask "
            f"({', '.join(CAUSAL_WITHOUT_MASK)}); this model uses {attention!r}"
        )
    return str(attention)


def split_token_mixers(model: nn.Module, shard: SequenceShard) -> int:
    """Make every token mixer of ``model`` run on the group's whole sequence (see the
    module docstring); returns how many it changed. Idempotent."""
    causal_attention(model, "rl.sequence_parallel_size > 1")
    changed = 0
    for layer in model.modules():
        for name in MIXERS:
            mixer = getattr(layer, name, None)
            if not isinstance(mixer, nn.Module) or getattr(mixer, "_tmax_split", False):
                continue
            mixer.forward = _whole_sequence_mixer(mixer.forward, shard)  # type: ignore[method-assign]
            mixer._tmax_split = True  # type: ignore[assignment]
            changed += 1
    if not any(getattr(m, "_tmax_split", False) for m in model.modules()):
        raise ValueError(
            f"{type(model).__name__} has no token mixer this sequence parallelism knows "
            f"({', '.join(MIXERS)} in its decoder layers); set rl.sequence_parallel_size to 1"
        )
    return changed
