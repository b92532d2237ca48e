"""Trial directories written by hand, with outcomes chosen so every table value can
be worked out on paper (see ``SCENARIO``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

#: (model label, benchmark, harness) -> task -> one outcome per run:
#: 1 / 0 = reward, None = no reward (the agent ran out of budget), "infra" = an
#: infrastructure error.
#:
#: qwen3.5-9b on tb-lite under tmax, runs 0 and 1:
#:   run 0: a=1, b=0, c=infra -> 1/3 with infra scored 0 (1/2 with it left out)
#:   run 1: a=1, b=None, c=1  -> 2/3
#:   statistics "paper": mean(1/3, 2/3) = 50.0, population std = 1/6 -> "50.0 ± 16.7"
#:   "exclude_infra": mean(1/2, 2/3) = 58.33, sample std = (1/6)/√2 = 11.79
#:   -> "58.3 ± 11.8"
#: qwen3.5-9b-tmax on tb-lite under tmax:
#:   run 0: 1, 1, 0 -> 2/3; run 1: 1, 1, 1 -> 1; no infra, so mean 83.3 under both;
#:   population std 1/6 -> "83.3 ± 16.7", sample std (1/3)/√2 -> "83.3 ± 23.6"
SCENARIO: dict[tuple[str, str, str], dict[str, list[Any]]] = {
    ("qwen3.5-9b", "tb-lite", "tmax"): {"a": [1, 1], "b": [0, None], "c": ["infra", 1]},
    ("qwen3.5-9b-tmax", "tb-lite", "tmax"): {"a": [1, 1], "b": [1, 1], "c": [0, 1]},
}


def write_trial(
    trial_dir: Path,
    *,
    task: str,
    run: int,
    outcome: Any,
    model: str,
    benchmark: str,
    harness: str,
) -> None:
    """One trial directory in our runner's Harbor-compatible layout. Besides its outcome
    it records 100 input and 10 output tokens, 10 s in all, 2 s of environment setup
    and, unless it is an infrastructure error, run + 3 turns, run + 2 tool calls, 7 s
    of agent execution and 1.5 s of model time."""
    infra = outcome == "infra"
    reward = None if infra or outcome is None else float(outcome)
    result = {
        "task_name": task,
        "trial_name": trial_dir.name,
        "agent_info": {"name": harness, "model_info": {"name": model}},
        "agent_result": {
            "n_input_tokens": 100,
            "n_output_tokens": 10,
            "metadata": {
                "tmax": {
                    "model": model,
                    "benchmark": benchmark,
                    "harness": harness,
                    "run": run,
                    "domain": "debugging",
                    "exit_status": "sandbox_error" if infra else "submitted",
                    "failure_kind": "infra" if infra else None,
                    "turns": 0 if infra else run + 3,
                    "tool_calls": 0 if infra else run + 2,
                    "format_errors": 0,
                    "model_time_sec": None if infra else 1.5,
                }
            },
        },
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": {"exception_type": "SandboxStartError"} if infra else None,
        "started_at": "2026-02-01T08:00:00+00:00",
        "finished_at": "2026-02-01T08:00:10+00:00",
        "environment_setup": {
            "started_at": "2026-02-01T08:00:00+00:00",
            "finished_at": "2026-02-01T08:00:02+00:00",
        },
        "agent_execution": None
        if infra
        else {
            "started_at": "2026-02-01T08:00:02+00:00",
            "finished_at": "2026-02-01T08:00:09+00:00",
        },
    }
    trial_dir.mkdir(parents=True)
    (trial_dir / "result.json").write_text(json.dumps(result))


def markdown_rows(text: str) -> list[list[str]]:
    """The cells of every row of the pipe tables in ``text`` (header rows included,
    separator rows not), each stripped; an escaped ``\\|`` stays inside its cell."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|:- "):
            continue
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
    return rows


def write_scenario(results: Path, scenario=SCENARIO) -> list[Path]:
    """The workflow's evaluation layout: ``eval/<model>/<benchmark>/<harness>/run<r>.json``
    naming trials under ``trials-fixture/``; returns the run files."""
    run_files = []
    for (model, benchmark, harness), tasks in scenario.items():
        base = results / "eval" / model / benchmark / harness
        trials_dir = base / "trials-fixture"
        n_runs = len(next(iter(tasks.values())))
        for run in range(n_runs):
            trials = []
            for task, outcomes in tasks.items():
                name = f"{task}__r{run}"
                write_trial(
                    trials_dir / name,
                    task=task,
                    run=run,
                    outcome=outcomes[run],
                    model=model,
                    benchmark=benchmark,
                    harness=harness,
                )
                trials.append({"trial": name, "task": task})
            run_file = base / f"run{run}.json"
            run_file.write_text(json.dumps({"trials_dir": str(trials_dir), "trials": trials}))
            run_files.append(run_file)
    return run_files


@pytest.fixture
def run_files(tmp_path: Path) -> list[Path]:
    return write_scenario(tmp_path / "results")


TASKS_REPORT = {
    "tasks_checked": 40,
    "tasks_validated": 38,
    "balance": {"domain": 0.9876, "skill_type": 0.5},
    "axes": {"domain": {"debugging": 20, "security": 18}},
}
DECONTAM_REPORT = {
    "dataset": "generated",
    "tasks": 38,
    "ngram_sizes": [13, 8],
    "benchmarks": {
        "tb-lite": {"status": "ok", "n_items": 4},
        "terminal-bench-2.0": {"status": "skipped", "reason": "offline"},
    },
    "summary": [
        {
            "benchmark": "tb-lite",
            "n": 13,
            "tasks": 38,
            "tasks_flagged": 0,
            "tasks_flagged_pct": 0.0,
            "items": 4,
            "items_touched": 0,
            "items_touched_pct": 0.0,
        },
        {
            "benchmark": "tb-lite",
            "n": 8,
            "tasks": 38,
            "tasks_flagged": 1,
            "tasks_flagged_pct": 100 / 38,
            "items": 4,
            "items_touched": 1,
            "items_touched_pct": 25.0,
        },
    ],
}
REMOVED = {"kept": 37, "tasks": 38}
CURVE = {
    "steps": 3,
    "curve": [
        {
            "step": s,
            "reward_mean": 0.1 * s,
            "response_tokens_mean": 100 + s,
            "tool_calls_mean": 1,
            "masked_fraction": 0.01,
            "logp_diff_mean": 0.001,
        }
        for s in (1, 2, 3)
    ],
}


SELECTION = {
    "chosen_step": 3,
    "last_step": 3,
    "selected_on": None,
    "rule": "the last step (rl.select_every is not set)",
    "snapshots": {"3": None},
}


def write_data_reports(results: Path) -> None:
    """The reports of the task, decontamination and RL stages the report reads."""
    for rel, data in (
        ("tasks/report.json", TASKS_REPORT),
        ("decontam/report.json", DECONTAM_REPORT),
        ("decontam/removed.json", REMOVED),
        ("rl/tiny-qwen3/curve.json", CURVE),
        ("rl/tiny-qwen3/selection.json", SELECTION),
    ):
        path = results / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))


def write_harbor_job(
    job_dir: Path,
    *,
    model: str,
    trials: dict[str, Any],
    agent: str = "vanillux2-agent",
    source: str = "terminal-bench",
) -> Path:
    """A job folder in Harbor 0.25's layout (harbor_jobs/README.md), as a released
    evaluation ships it: ``config.json``, the ``result.json`` summary and one
    ``<task>__<7 chars>/result.json`` per trial, without our runner's metadata.

    ``trials`` maps a trial folder name to (started HH:MM, outcome): 1 / 0 = reward,
    "infra" = an environment error (no agent or verifier result)."""
    job_dir.mkdir(parents=True)
    config = {
        "job_name": job_dir.name,
        "n_attempts": 2,
        "agents": [
            {"import_path": "Vanillux2Agent:Vanillux2Agent", "model_name": f"openai/{model}"}
        ],
        "datasets": [{"name": source, "version": "2.0"}],
    }
    (job_dir / "config.json").write_text(json.dumps(config))
    summary = {"id": "job", "n_total_trials": len(trials), "stats": {"n_trials": len(trials)}}
    (job_dir / "result.json").write_text(json.dumps(summary))
    for name, (started, outcome) in trials.items():
        infra = outcome == "infra"
        result = {
            "task_name": name.split("__")[0],
            "trial_name": name,
            "source": source,
            "agent_info": {"name": agent, "version": "1", "model_info": {"name": model}},
            "agent_result": None if infra else {"n_input_tokens": 100, "n_output_tokens": 10},
            "verifier_result": None if infra else {"rewards": {"reward": float(outcome)}},
            "exception_info": (
                {"exception_type": "EnvironmentStartTimeoutError", "exception_message": ""}
                if infra
                else None
            ),
            "started_at": f"2026-03-01T{started}:00+00:00",
            "finished_at": f"2026-03-01T{started}:30+00:00",
        }
        (job_dir / name).mkdir()
        (job_dir / name / "result.json").write_text(json.dumps(result))
    return job_dir
