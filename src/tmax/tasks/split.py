"""The train / held-out split of generated tasks.

A task is held out when a hash of (seed, task id) falls below the held-out fraction:
the split never depends on which other tasks exist, so growing the dataset keeps
every earlier task on its side, and RL (train) and evaluation (held-out) agree
without sharing a file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def split_key(task_id: str, seed: int) -> float:
    """A uniform number in [0, 1) fixed by the task id and the seed."""
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_heldout(task_id: str, fraction: float, seed: int) -> bool:
    return split_key(task_id, seed) < fraction


def heldout_tasks(
    task_ids: Iterable[str], fraction: float, seed: int, limit: int | None = None
) -> list[str]:
    """The held-out task ids; with ``limit``, the first ``limit`` of them by split key
    (a stable subset: raising the limit only adds tasks)."""
    chosen = sorted((split_key(t, seed), t) for t in set(task_ids) if is_heldout(t, fraction, seed))
    return [task_id for _, task_id in chosen[:limit]]


def training_tasks(task_ids: Iterable[str], fraction: float, seed: int) -> list[str]:
    return sorted(t for t in set(task_ids) if not is_heldout(t, fraction, seed))
