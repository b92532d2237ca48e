"""The evaluation runner: many trials, a bounded number at once, resumable.

Trials are independent: each gets its own sandbox and its own harness instance, and
shares only the model client. A killed evaluation resumes where it stopped, because a
trial counts as done exactly when its ``result.json`` exists (written last, atomically).

The trials' folder is a Harbor job folder: beside the trials, ``config.json`` (a
``JobConfig``) and ``result.json`` (a ``JobResult`` without ``trial_results``, as
Harbor writes it), both recomputed from the trials in the folder whenever a runner
starts or ends, so runs that share the folder keep it whole.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
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
from tmax.harness.trajectory import now_iso
from tmax.io import file_lock, write_json
from tmax.logs import progress_bar
from tmax.models.client import ChatModel, derive_seed

log = logging.getLogger("tmax.evaluate")


def plan_trials(
    tasks: Iterable[tuple[Path, str, str | None]],
    *,
    model: str,
    benchmark: str,
    harness: str,
    runs: Iterable[int],
    seed: int | None = None,
) -> list[TrialSpec]:
    """Every (task, run) of one (model, benchmark, harness); ``tasks`` yields
    (task directory, task name, domain). With a ``seed`` each trial samples with its own,
    :func:`trial_seed`; without, unseeded."""
    task_list = list(tasks)
    return [
        TrialSpec(task_dir, name, model, benchmark, harness, run, domain,
                  None if seed is None else trial_seed(seed, run, name))
        for run in runs
        for task_dir, name, domain in task_list
    ]  # fmt: skip


def trial_seed(seed: int, run: int, task: str) -> int:
    """The sampling seed of run ``run`` on ``task``: different for every run and task,
    the same on a rerun, and the same for every model and harness, so that two models
    compared on a (task, run) start from the same random numbers."""
    return derive_seed(seed, "eval", run, task)


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
    job_id = write_job_files(job_dir, specs, model, settings, concurrency, finished=False)
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
                run_trial,
                specs[i],
                model,
                settings,
                job_dir / specs[i].trial_name,
                sandbox_factory,
                job_id=job_id,
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
    write_job_files(job_dir, specs, model, settings, concurrency, finished=True)
    outcomes = Counter(_outcome(r) for r in ordered)
    log.info(
        "%d trial(s): %s", len(ordered), ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    )
    return ordered


def _outcome(result: dict[str, Any]) -> str:
    if (result.get("exception_info") or {}).get("failure_kind") == "infra":
        return "infra-failed"
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    return "solved" if rewards.get("reward", 0.0) >= 1.0 else "unsolved"


# --- the job folder's own files (Harbor's JobConfig and JobResult) ---------------------


def _trial_results(job_dir: Path) -> list[dict[str, Any]]:
    """Every finished trial's ``result.json`` in the folder (unreadable ones skipped:
    an unfinished trial has none yet)."""
    found = []
    for path in sorted(job_dir.glob("*/result.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "trial_name" in data:
            found.append(data)
    return found


def write_job_files(
    job_dir: Path,
    specs: Sequence[TrialSpec],
    model: ChatModel,
    settings: HarnessSettings,
    concurrency: int,
    *,
    finished: bool,
) -> str:
    """Write the job folder's ``config.json`` and ``result.json`` from the trials in it
    (finished ones, plus ``specs`` not yet run as pending); return the job's id, kept
    across rewrites. Runs sharing the folder (the workflow runs them side by side)
    take turns, so the last writer counts every trial finished before it."""
    with file_lock(job_dir / ".job.lock"):
        trials = _trial_results(job_dir)
        previous: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError, TypeError):  # none yet, or torn
            previous = dict(json.loads((job_dir / "result.json").read_text()))
        job_id = str(previous.get("id") or uuid.uuid4())
        now = now_iso()
        done_names = {t["trial_name"] for t in trials}
        pending = {s.trial_name for s in specs} - done_names
        # The trials' sandbox backend (their images differ by task, so are left out).
        environment = next(
            (
                {"import_path": env["import_path"], "kwargs": {"backend": env["kwargs"]["backend"]}}
                for env in ((t.get("config") or {}).get("environment") for t in trials)
                if env and env.get("import_path") and "backend" in env.get("kwargs", {})
            ),
            {},
        )
        task_paths = {str(s.task_dir): s.benchmark for s in specs}
        for trial in trials:
            path = (trial.get("config") or {}).get("task", {}).get("path")
            if path:
                task_paths.setdefault(path, trial.get("source"))
        runs = [s.run for s in specs] + [
            ((t.get("agent_result") or {}).get("metadata") or {}).get("tmax", {}).get("run", 0)
            for t in trials
        ]
        config = {
            "job_name": job_dir.name,
            "jobs_dir": str(job_dir.parent),
            "n_attempts": max(runs, default=0) + 1,
            "n_concurrent_trials": max(1, concurrency),
            "environment": environment,
            "agents": [
                {
                    "name": specs[0].harness if specs else None,
                    "model_name": model.name,
                    "kwargs": asdict(settings),
                }
            ],
            "tasks": [{"path": p, "source": source} for p, source in sorted(task_paths.items())],
        }
        write_json(job_dir / "config.json", config)
        result = {
            "id": job_id,
            "started_at": previous.get("started_at") or now,
            "updated_at": now,
            "finished_at": now if finished else None,
            "n_total_trials": len(trials) + len(pending),
            "stats": job_stats(trials, n_pending=len(pending)),
        }
        write_json(job_dir / "result.json", result)
        return job_id


def _reward_valid(trial: Mapping[str, Any]) -> bool:
    """Harbor's ``TrialResult.reward_valid``, with our exceptions' policy overrides."""
    rewards = (trial.get("verifier_result") or {}).get("rewards")
    exception = trial.get("exception_info") or {}
    valid = (exception.get("policy_override") or {}).get("has_valid_reward", True)
    return bool(rewards) and (not exception or valid)


def job_stats(trials: Sequence[Mapping[str, Any]], *, n_pending: int = 0) -> dict[str, Any]:
    """Harbor's ``JobStats`` of finished trials (``JobStats.from_trial_results``, with
    the ``mean`` metric of the rewards Harbor counts as valid)."""
    evals: dict[str, dict[str, Any]] = {}
    valid_rewards: dict[str, list[dict[str, float]]] = defaultdict(list)
    totals: dict[str, int | None] = dict.fromkeys(
        ("n_input_tokens", "n_cache_tokens", "n_output_tokens")
    )
    n_errored = 0
    for trial in trials:
        agent = trial["agent_info"]
        model_name = (agent.get("model_info") or {}).get("name")
        parts = [agent["name"], model_name, trial.get("source") or "adhoc"]
        key = "__".join(p for p in parts if p)
        stats = evals.setdefault(
            key,
            {"n_trials": 0, "n_errors": 0, "metrics": [], "pass_at_k": {},
             "reward_stats": {}, "exception_stats": {}},
        )  # fmt: skip
        name = trial["trial_name"]
        if _reward_valid(trial):
            rewards = trial["verifier_result"]["rewards"]
            stats["n_trials"] += 1
            valid_rewards[key].append(rewards)
            for reward_name, value in rewards.items():
                by_value = stats["reward_stats"].setdefault(reward_name, {})
                by_value.setdefault(str(value), []).append(name)
        exception = trial.get("exception_info")
        if exception:
            stats["exception_stats"].setdefault(exception["exception_type"], []).append(name)
            stats["n_errors"] += 1
            n_errored += 1
        for field, value in (trial.get("agent_result") or {}).items():
            if field in totals and value is not None:
                totals[field] = (totals[field] or 0) + value
    for key, rewards in valid_rewards.items():
        names = sorted({name for reward in rewards for name in reward})
        if len(names) <= 1:
            values = [next(iter(reward.values()), 0) for reward in rewards]
            evals[key]["metrics"] = [{"mean": sum(values) / len(values)}]
        else:
            means = {n: sum(r.get(n, 0) for r in rewards) / len(rewards) for n in names}
            evals[key]["metrics"] = [means]
    return {
        "n_completed_trials": len(trials),
        "n_errored_trials": n_errored,
        "n_running_trials": 0,
        "n_pending_trials": n_pending,
        "n_cancelled_trials": 0,
        "n_retries": 0,
        "evals": evals,
        **totals,
        "cost_usd": None,
    }
