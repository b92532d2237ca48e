"""Choosing the trained model: the best snapshot on a selection benchmark (paper: TB-Lite,
every 100 steps of 500).

Training keeps a servable snapshot of the weights every ``rl.select_every`` steps and at
the last step (:func:`snapshot_steps`); the workflow evaluates each one on
``rl.select_benchmark`` with ``rl.select_harness``, ``rl.select_runs`` times, and
:func:`select_checkpoint` publishes the one with the highest mean pass@1 as the trained
model. Ties go to the later step (more training for the same score). Without
``select_every`` the only snapshot is the last step's, and it is the model.

Snapshots are written into the run folder first (outside Snakemake's outputs, so a
failed or preempted job keeps them) and linked into the declared output at the end
(:func:`publish_snapshots`); the chosen one is linked again as the model folder, so
no weights are stored twice on one file system.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.io import write_json, write_pointer

log = logging.getLogger("tmax.rl")

TIE_RULE = "highest mean pass@1 over the runs; ties go to the later step"


def snapshot_steps(steps: int, every: int | None) -> list[int]:
    """The steps whose weights are kept: every ``every``-th and the last (just the last
    without ``every``)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if every is not None and every < 1:
        raise ValueError(f"select_every must be at least 1, got {every}")
    kept = list(range(every, steps + 1, every)) if every else []
    return kept if kept and kept[-1] == steps else [*kept, steps]


def snapshot_name(step: int) -> str:
    return f"step-{step:06d}"


def link_tree(source: Path, target: Path) -> None:
    """``target`` as a copy of the folder ``source`` made of hard links (plain copies
    across file systems), put in place atomically; an existing ``target`` is replaced."""
    if not source.is_dir():
        raise FileNotFoundError(f"no snapshot folder {source}")
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, tmp, copy_function=link)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def publish_snapshots(run_snapshots: Path, output: Path, steps: Sequence[int]) -> None:
    """Link the snapshots of ``steps`` from the run folder into the declared ``output``."""
    missing = [s for s in steps if not (run_snapshots / snapshot_name(s)).is_dir()]
    if missing:
        raise RuntimeError(
            f"training finished without the snapshots of step(s) {missing} in {run_snapshots}"
        )
    output.mkdir(parents=True, exist_ok=True)
    for step in steps:
        link_tree(run_snapshots / snapshot_name(step), output / snapshot_name(step))


def snapshot_score(run_files: Sequence[Path]) -> dict[str, Any]:
    """Mean accuracy of a snapshot's evaluation runs (run<N>.json, as the evaluation
    stage writes them), and each run's."""
    if not run_files:
        raise ValueError("a snapshot needs at least one evaluation run to be scored")
    accuracies = []
    for path in run_files:
        document = json.loads(path.read_text(encoding="utf-8"))
        if "accuracy" not in document:
            raise ValueError(f"{path}: not an evaluation run (no 'accuracy')")
        accuracies.append(float(document["accuracy"]))
    return {"score": sum(accuracies) / len(accuracies), "runs": accuracies}


def choose(scores: Mapping[int, float]) -> int:
    """The step with the highest score; ties go to the later step."""
    if not scores:
        raise ValueError("no snapshot to choose from")
    return max(scores, key=lambda step: (scores[step], step))


def select_checkpoint(
    snapshots: Path,
    runs: Mapping[int, Sequence[Path]],
    output: Path,
    report: Path,
    *,
    steps: Sequence[int],
    on: Mapping[str, Any] | None = None,
    pointer: Path | None = None,
) -> int:
    """Publish the best of ``steps``'s snapshots as the model folder ``output`` and write
    ``report`` (scores, choice, rule) and ``pointer`` (the folder's sha256: what the
    model's evaluations depend on, the same when a rerun picks the same weights).
    ``runs`` maps each step to its evaluation run files; with no ``runs`` there must be
    a single step (no selection), which is taken."""
    if not runs:
        if len(steps) != 1:
            raise ValueError(f"{len(steps)} snapshots but no evaluation to choose between them")
        chosen, scored = steps[-1], {}
    else:
        if sorted(runs) != sorted(steps):
            raise ValueError(f"evaluations of steps {sorted(runs)}, snapshots of {list(steps)}")
        scored = {step: snapshot_score(files) for step, files in runs.items()}
        chosen = choose({step: entry["score"] for step, entry in scored.items()})
    link_tree(snapshots / snapshot_name(chosen), output)
    if pointer is not None:
        write_pointer(pointer, output)
    write_json(report, {
        "chosen_step": chosen,
        "last_step": max(steps),
        "selected_on": dict(on) if runs and on else None,
        "rule": TIE_RULE if runs else "the last step (rl.select_every is not set)",
        "snapshots": {str(step): scored.get(step) for step in steps},
    })  # fmt: skip
    if runs:
        summary = ", ".join(f"{s}: {scored[s]['score']:.3f}" for s in sorted(scored))
        log.info("chose step %d of %s (pass@1 %s)", chosen, list(steps), summary)
    return chosen
