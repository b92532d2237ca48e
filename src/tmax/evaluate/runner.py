"""The evaluation runner: many trials, a bounded number at once, resumable.

Trials are independent: each gets its own sandbox and its own harness instance, and
shares only the model client. A killed evaluation resumes where it stopped, because a
trial counts as done exactly when its ``result.json`` exists (written last, atomically).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tmax.evaluate.trial import (
    SandboxFactory,
    TrialSpec,
    finished_result,
    run_trial,
    task_checksum,
)
from tmax.harness import HarnessSettings
from tmax.logs import progress_bar
from tmax.models.client import ChatModel

log = logging.getLogger("tmax.evaluate")


def plan_trials(
    tasks: Iterable[tuple[Path, str, str | None]],
    *,
    model: str,
    benchmark: str,
    harness: str,
    runs: Iterable[int],
) -> list[TrialSpec]:
    """Every (task, run) of one (model, benchmark, harness); ``tasks`` yields
    (task directory, task name, domain)."""
    task_list = list(tasks)
    return [
        TrialSpec(task_dir, name, model, benchmark, harness, run, domain)
        for run in runs
        for task_dir, name, domain in task_list
    ]


def run_trials(
    specs: Sequence[TrialSpec],
    model: ChatModel,
    settings: HarnessSettings,
    job_dir: Path,
    sandbox_factory: SandboxFactory,
    *,
    concurrency: int = 1,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run ``specs`` into ``job_dir/<trial name>/`` (a Harbor-style job folder) with at
    most ``concurrency`` at a time; finished trials are read back, not rerun.

    Results come back in the order of ``specs``.
    """
    job_dir.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, Any]] = {}
    pending: list[int] = []
    for index, spec in enumerate(specs):
        done = finished_result(job_dir / spec.trial_name, task_checksum(spec.task_dir))
        if done is None:
            pending.append(index)
        else:
            results[index] = done
    if results:
        log.info("%d of %d trial(s) already finished: resuming", len(results), len(specs))

    with (
        progress_bar(disable=not progress) as bar,
        ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool,
    ):
        label = f"{specs[0].harness} on {specs[0].benchmark}" if specs else "trials"
        task_id = bar.add_task(label, total=len(specs), completed=len(results))
        futures = {
            pool.submit(
                run_trial, specs[i], model, settings, job_dir / specs[i].trial_name, sandbox_factory
            ): i
            for i in pending
        }
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.advance(task_id)
        except BaseException:
            for future in futures:
                future.cancel()  # trials already running finish and keep their results
            raise

    ordered = [results[i] for i in range(len(specs))]
    outcomes = Counter(_outcome(r) for r in ordered)
    log.info(
        "%d trial(s): %s", len(ordered), ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    )
    return ordered


def _outcome(result: dict[str, Any]) -> str:
    if result.get("exception_info"):
        return "infra-failed"
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    return "solved" if rewards.get("reward", 0.0) >= 1.0 else "unsolved"
