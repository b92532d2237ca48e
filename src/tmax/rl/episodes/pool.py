"""Which training tasks RL works on when it may take only a few (``rl.max_train_tasks``).

``shortest``: those with the shortest reference solutions. ``informative``: those on
which a group of the starting policy's episodes is most likely to disagree, the only
groups that carry a gradient under centred advantages. The paper filters online
(zero-std groups are dropped and replaced: active sampling); with a budget of a few
hundred episodes, as in the miniature, most of them would go to groups that are
dropped, so the pool is chosen once, before the first step, from an estimate:

    p = the starting policy's probability of the task's expert episode (its reference
        solution typed as one command, then the submission, :mod:`tmax.rl.sft`), at the
        sampling temperature;
    informative share = 1 - p^G - (1 - p)^G for groups of G.

``p`` is a lower bound on the task's success rate (other commands may pass too) and
costs one forward pass per task, no sandbox. Tasks without a reference solution are
ranked last. The pool takes at most one task per reference solution: tasks that differ
only in their persona sentence are one task to the policy. Without that rule, seed 2's
pool of 8 came from 40 near-identical ``cp`` and ``sort`` tasks (each about an even
chance), and RL sharpened them without any held-out gain. The estimates are written next
to the run (``curve.json``, under ``pool``) so a reader sees what was chosen and why.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tmax.settings import RLSection, RLValues

log = logging.getLogger("tmax.rl")

CHOICES = ("shortest", "informative")


def informative_share(p: float, group_size: int) -> float:
    """Chance that a group of ``group_size`` episodes, each passing with probability
    ``p``, has both a pass and a failure."""
    return 1.0 - p**group_size - (1.0 - p) ** group_size


@torch.no_grad()
def expert_probabilities(
    model: torch.nn.Module,
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    temperature: float,
    batch_size: int = 16,
) -> list[float]:
    """For each (ids, mask) of ``examples``: the probability, sampling at
    ``temperature``, of the tokens where ``mask`` is 1 given the rest (the expert's turns
    given the harness's messages). Batches share their common prefix (the harness's
    system prompt) as SFT's do."""
    from tmax.rl.sft import labelled_logits

    found = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        logits, targets, row_of = labelled_logits(model, batch)
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        picked = logp.gather(1, targets[:, None])[:, 0]
        sums = torch.zeros(len(batch)).index_add_(0, row_of, picked)
        found += [math.exp(float(total)) for total in sums]
    return found


def distinct_solutions(order: Sequence[int], solutions: Sequence[str], limit: int) -> list[int]:
    """The first ``limit`` indices of ``order`` whose solution no earlier pick has (tasks
    without one count as distinct); duplicates fill what is left only when too few
    solutions are distinct."""
    picked: list[int] = []
    seen: set[str] = set()
    for index in order:
        solution = solutions[index]
        if solution and solution in seen:
            continue
        seen.add(solution)
        picked.append(index)
        if len(picked) == limit:
            return picked
    taken = set(picked)
    return picked + [index for index in order if index not in taken][: limit - len(picked)]


def choose_pool(
    model: torch.nn.Module,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    *,
    rl: RLValues,
    limit: int,
) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """The ``limit`` rows most likely to give informative groups under ``model`` (ties:
    by task id), one per reference solution, and every row's estimate, best first."""
    from tmax.harness import HarnessSettings
    from tmax.rl.sft import solution_conversation, solution_of, tokenize_conversation

    rl = RLSection.of(rl)
    settings = HarnessSettings.for_rl(rl)
    temperature = float(rl.temperature)
    group = rl.group_size
    solutions = [solution_of(row) for row in rows]
    solved = [i for i, solution in enumerate(solutions) if solution.strip()]
    conversations = [
        solution_conversation(rows[i]["instruction"], solutions[i], settings) for i in solved
    ]
    examples = [tokenize_conversation(tokenizer, *conversation) for conversation in conversations]
    probability = dict(zip(solved, expert_probabilities(model, examples, temperature), strict=True))
    estimates = []
    for index, row in enumerate(rows):
        p = probability.get(index)
        share = -1.0 if p is None else informative_share(p, group)
        estimates.append({"task_id": row["task_id"], "expert_probability": p,
                          "informative_share": share})  # fmt: skip
    order = sorted(
        range(len(rows)), key=lambda i: (-estimates[i]["informative_share"], rows[i]["task_id"])
    )
    picked = distinct_solutions(order, [solution.strip() for solution in solutions], limit)
    chosen = [rows[i] for i in picked]
    ranked = [estimates[i] for i in order]
    shares = [estimates[i]["informative_share"] for i in picked]
    log.info(
        "RL pool: %d of %d task(s) by the starting policy's chance of an informative group "
        "of %d at temperature %g: %.2f on average (%.2f over all)",
        len(chosen), len(rows), group, temperature, sum(shares) / max(1, len(shares)),
        sum(max(0.0, e["informative_share"]) for e in ranked) / max(1, len(ranked)),
    )  # fmt: skip
    return chosen, ranked
