"""What the trainer's ranks say to each other (torch.distributed), and nothing when alone.

One process (rank 0) owns the environment and the inference engine: it draws, filters
and scores groups. Every rank owns a slice of the learner (DeepSpeed ZeRO-3). Per step
rank 0 hands each rank a share of the episodes, balanced by tokens; the ranks agree on
how many micro-batches to run, because under ZeRO-3 every forward and backward gathers
parameters collectively and a rank that runs one micro-batch fewer would hang the rest.

Every function here is a collective when ``torch.distributed`` is initialised (all ranks
must call it, in the same order) and a plain local computation otherwise.

Two groups. The training group (the default one, NCCL on GPUs) carries the learner's
collectives, which take seconds, under ``rl.collective_timeout_sec``. Waiting for rank 0
is different: while it collects a step's episodes (minutes to hours at paper scale),
or pushes weights (waiting for the groups being generated), the other ranks wait. They
wait on the control group (:func:`control_group`: gloo, CPU, no NCCL watchdog) under
``rl.step_timeout_sec``, the longest a step may take. Functions that take ``group`` run
on it when given one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def _dist() -> Any | None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed
    return None


def rank_and_size() -> tuple[int, int]:
    dist = _dist()
    return (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)


def control_group(timeout_s: float) -> Any | None:
    """A new gloo group over every rank whose operations wait up to ``timeout_s``
    (``None`` when alone). A collective itself: every rank creates it, in the same order."""
    dist = _dist()
    if dist is None:
        return None
    return dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))


def _device(group: Any = None) -> torch.device:
    """Where collective tensors live: NCCL reduces CUDA tensors only."""
    dist = _dist()
    if dist is not None and dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast(value: T | None, group: Any = None) -> T:
    """Rank 0's ``value`` on every rank (pickled; keep it small)."""
    dist = _dist()
    if dist is None:
        return value  # type: ignore[return-value]
    box = [value]
    dist.broadcast_object_list(box, src=0, group=group, device=_device(group))
    return box[0]  # type: ignore[return-value]


def scatter(per_rank: Sequence[T] | None, group: Any = None) -> T:
    """Rank ``r`` receives ``per_rank[r]`` from rank 0 (``per_rank`` is read on rank 0)."""
    dist = _dist()
    if dist is None:
        assert per_rank is not None
        return per_rank[0]
    received: list[Any] = [None]
    objects = list(per_rank) if dist.get_rank() == 0 and per_rank is not None else None
    dist.scatter_object_list(received, objects, src=0, group=group)
    return received[0]  # type: ignore[no-any-return]


def all_max(value: int, group: Any = None) -> int:
    """The largest ``value`` over the ranks."""
    dist = _dist()
    if dist is None:
        return value
    tensor = torch.tensor(value, dtype=torch.int64, device=_device(group))
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
    return int(tensor.item())


def any_rank(flag: bool, group: Any = None) -> bool:
    """True on every rank when it is true on any (e.g. one rank got SIGTERM)."""
    return bool(all_max(int(flag), group))


def barrier(group: Any = None) -> None:
    dist = _dist()
    if dist is not None:
        dist.barrier(group=group)


def reduce_stats(
    sums: Mapping[str, float], maxima: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Sums added and maxima taken over the ranks (the keys must agree on every rank)."""
    dist = _dist()
    if dist is None:
        return dict(sums), dict(maxima)
    keys_sum, keys_max = sorted(sums), sorted(maxima)
    device = _device()
    added = torch.tensor([sums[k] for k in keys_sum], dtype=torch.float64, device=device)
    largest = torch.tensor([maxima[k] for k in keys_max], dtype=torch.float64, device=device)
    if keys_sum:
        dist.all_reduce(added, op=dist.ReduceOp.SUM)
    if keys_max:
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    return (
        dict(zip(keys_sum, added.tolist(), strict=True)),
        dict(zip(keys_max, largest.tolist(), strict=True)),
    )


def balanced_shards(lengths: Sequence[int], world_size: int) -> list[list[int]]:
    """Indices of ``lengths`` split over ``world_size`` ranks with near-equal token sums:
    longest first, each to the rank with the fewest tokens so far (ties: lowest rank).
    Every shard keeps its indices in ascending order, so results do not depend on the
    split beyond float summation order."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    shards: list[list[int]] = [[] for _ in range(world_size)]
    load = [0] * world_size
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        shards[rank].append(index)
        load[rank] += lengths[index]
    return [sorted(shard) for shard in shards]
