"""Trials and the runner: Harbor trial directories, resume, infrastructure failures."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_TASKS
from tests.sandbox.test_sandbox import _available
from tmax.evaluate.metrics import summarize, write_summary
from tmax.evaluate.records import read_job
from tmax.evaluate.runner import plan_trials, run_trials, trial_seed
from tmax.evaluate.stage import run_summary
from tmax.harness import HarnessSettings
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.models.client import (
    Completion,
    Message,
    ModelError,
    ScriptedModel,
    bash_call,
    derive_seed,
)
from tmax.sandbox import Sandbox, SandboxError
from tmax.sandbox.episode import sandbox_for_task

pytestmark = pytest.mark.slow

TASKS = ["answer-checked-by-pytest", "count-error-lines", "sum-csv-column"]


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)


def oracle_policy(task_root: Path) -> Callable[[Sequence[Message]], Completion]:
    """An agent that types each task's reference solution, then submits."""
    solutions = {
        (task_root / name / "instruction.md").read_text().strip(): (
            task_root / name / "solution" / "solve.sh"
        ).read_text()
        for name in TASKS
    }

    def policy(messages: Sequence[Message]) -> Completion:
        if messages[-1]["role"] == "tool":
            return bash_call(f"echo {SUBMIT_SENTINEL}")
        prompt = messages[-1]["content"]
        script = next(text for instruction, text in solutions.items() if instruction in prompt)
        return bash_call(script)

    return policy


def bwrap(task_dir: Path) -> Sandbox:
    return sandbox_for_task(task_dir, "bwrap", run_id="pytest")


def specs_for(task_root: Path, runs: int = 2, harness: str = "tmax") -> list[Any]:
    tasks = [(task_root / name, name, "fixtures") for name in TASKS]
    return plan_trials(tasks, model="m", benchmark="fixtures", harness=harness, runs=range(runs))


def test_trials_write_harbor_directories_that_tabulate(tmp_path: Path) -> None:
    model = ScriptedModel(oracle_policy(FIXTURE_TASKS))
    specs = specs_for(FIXTURE_TASKS)
    results = run_trials(specs, model, HarnessSettings(), tmp_path, bwrap, concurrency=2)
    assert [r["trial_name"] for r in results] == [s.trial_name for s in specs]
    for result in results:
        assert result["exception_info"] is None
        assert result["verifier_result"]["rewards"]["reward"] == 1.0
        trial = tmp_path / result["trial_name"]
        trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
        assert trajectory["schema_version"].startswith("ATIF")
        assert trajectory["steps"][-1]["tool_calls"][0]["function_name"] == "bash"
        assert (trial / "verifier" / "reward.txt").read_text().strip() == "1.0"
        assert result["agent_result"]["metadata"]["tmax"]["exit_status"] == "submitted"
        assert result["agent_result"]["n_input_tokens"] > 0
        for phase in ("environment_setup", "agent_execution", "verifier"):
            assert result[phase]["finished_at"] >= result[phase]["started_at"]

    summary = summarize(read_job(tmp_path)).get("m", "fixtures", "tmax")
    assert (summary.n_tasks, summary.n_runs, summary.pass_at_1_mean) == (3, 2, 100.0)
    assert summary.per_domain["fixtures"]["mean"] == 100.0


def test_every_run_and_task_samples_with_its_own_recorded_seed(tmp_path: Path) -> None:
    tasks = [(FIXTURE_TASKS / name, name, "fixtures") for name in TASKS]
    specs = plan_trials(tasks, model="m", benchmark="b", harness="tmax", runs=range(2), seed=7)
    seeds = [spec.seed for spec in specs]
    assert len(set(seeds)) == len(specs) == 6  # runs and tasks all differ
    other = plan_trials(tasks, model="other", benchmark="b", harness="tmax", runs=range(2), seed=7)
    assert [spec.seed for spec in other] == seeds  # models compared on the same numbers
    assert plan_trials(tasks, model="m", benchmark="b", harness="tmax", runs=range(2)) == [
        replace(spec, seed=None) for spec in specs
    ]
    model = ScriptedModel(oracle_policy(FIXTURE_TASKS))
    results = run_trials(specs[:2], model, HarnessSettings(), tmp_path, bwrap)
    recorded = [r["agent_result"]["metadata"]["tmax"]["seed"] for r in results]
    assert recorded == [trial_seed(7, 0, TASKS[0]), trial_seed(7, 0, TASKS[1])] == seeds[:2]
    sent = [request["seed"] for request in model.requests]
    assert sent == [derive_seed(seeds[0], 0), derive_seed(seeds[0], 1),
                    derive_seed(seeds[1], 0), derive_seed(seeds[1], 1)]  # fmt: skip


def test_a_killed_evaluation_resumes_without_redoing_finished_trials(tmp_path: Path) -> None:
    model = ScriptedModel(oracle_policy(FIXTURE_TASKS))
    specs = specs_for(FIXTURE_TASKS)
    run_trials(specs, model, HarnessSettings(), tmp_path, bwrap, concurrency=2)
    first = {s.trial_name: json.loads((tmp_path / s.trial_name / "result.json").read_text())
             for s in specs}  # fmt: skip
    # Simulate a kill: one trial never wrote its result, one was torn mid-write.
    (tmp_path / specs[0].trial_name / "result.json").unlink()
    (tmp_path / specs[4].trial_name / "result.json").write_text('{"task_na')

    again = ScriptedModel(oracle_policy(FIXTURE_TASKS))
    results = run_trials(specs, again, HarnessSettings(), tmp_path, bwrap, concurrency=2)
    assert len(again.requests) == 4  # two trials, two turns each
    for spec, result in zip(specs, results, strict=True):
        redone = spec in (specs[0], specs[4])
        assert (result["id"] != first[spec.trial_name]["id"]) is redone
        assert result["verifier_result"]["rewards"]["reward"] == 1.0


def test_a_changed_task_is_evaluated_again(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(FIXTURE_TASKS, tasks)
    model = ScriptedModel(oracle_policy(tasks))
    specs = specs_for(tasks, runs=1)
    run_trials(specs, model, HarnessSettings(), tmp_path / "job", bwrap)
    with (tasks / TASKS[1] / "instruction.md").open("a") as handle:
        handle.write("\nBe careful.\n")
    again = ScriptedModel(oracle_policy(tasks))
    run_trials(specs, again, HarnessSettings(), tmp_path / "job", bwrap)
    assert len(again.requests) == 2  # only the edited task


def test_infrastructure_failures_are_kept_apart_from_wrong_answers(tmp_path: Path) -> None:
    def flaky_sandbox(task_dir: Path) -> Sandbox:
        if task_dir.name == "sum-csv-column":
            raise SandboxError("podman: image build failed")
        return bwrap(task_dir)

    def policy(messages: Sequence[Message]) -> Completion:
        if "error_count.txt" in messages[1]["content"]:
            raise ModelError("http://gpu-node:8000/v1 failed 5 times")
        return bash_call(f"echo {SUBMIT_SENTINEL}")  # submits without solving

    specs = specs_for(FIXTURE_TASKS, runs=1)
    results = run_trials(specs, ScriptedModel(policy), HarnessSettings(), tmp_path, flaky_sandbox)
    by_task = {r["task_name"]: r for r in results}
    wrong = by_task["answer-checked-by-pytest"]
    assert wrong["exception_info"] is None
    assert wrong["verifier_result"]["rewards"]["reward"] == 0.0
    for name, kind in (("sum-csv-column", "SandboxError"), ("count-error-lines", "ModelError")):
        info = by_task[name]["exception_info"]
        assert info["exception_type"] == kind and info["failure_kind"] == "infra"
        assert by_task[name]["verifier_result"] is None

    summary = summarize(read_job(tmp_path)).get("m", "fixtures", "tmax")
    assert summary.n_infra_failures == 2
    assert summary.pass_at_1_mean == 0.0  # 0 of the 1 valid trial, not 0 of 3

    run = run_summary(results, tmp_path, "m", "fixtures", "tmax", 0)
    assert (run["n_trials"], run["n_infra_failures"], run["accuracy"]) == (3, 2, 0.0)


@pytest.mark.parametrize("exhausted", [None, "the agent's processes exhausted processes"])
def test_a_sandbox_the_agent_broke_is_an_attempt_and_a_dead_host_is_infra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exhausted: str | None
) -> None:
    """The control shell dies mid-episode. With the sandbox's cgroup showing the agent
    used up its memory or processes, the trial is a failed attempt (reward 0, counted);
    without that evidence it is the host's failure (infra, left out and retried)."""

    def dies_on_first_command(task_dir: Path) -> Sandbox:
        box = bwrap(task_dir)
        real_run = box.run

        def run(command: str, timeout: float | None = None) -> Any:
            assert box._control_pid is not None
            os.kill(box._control_pid, signal.SIGKILL)  # the sandbox dies under the agent
            return real_run(command, timeout)

        monkeypatch.setattr(box, "run", run)
        monkeypatch.setattr(box, "exhausted", lambda: exhausted)
        return box

    policy = ScriptedModel(lambda messages: bash_call("echo hello"))
    specs = specs_for(FIXTURE_TASKS, runs=1)[:1]
    [result] = run_trials(specs, policy, HarnessSettings(), tmp_path, dies_on_first_command)
    info = result["exception_info"]
    assert info["exception_type"] == "SandboxDied"
    [record] = read_job(tmp_path)
    if exhausted is None:
        assert info["failure_kind"] == "infra" and result["verifier_result"] is None
        assert record.is_infra_failure
    else:
        assert info["failure_kind"] == "agent" and exhausted in info["exception_message"]
        assert result["verifier_result"]["rewards"]["reward"] == 0.0
        assert not record.is_infra_failure and record.reward == 0.0


def test_an_unknown_harness_is_recorded_not_raised(tmp_path: Path) -> None:
    specs = specs_for(FIXTURE_TASKS, runs=1, harness="no-such-harness")[:1]
    [result] = run_trials(specs, ScriptedModel([]), HarnessSettings(), tmp_path, bwrap)
    assert result["exception_info"]["exception_type"] == "ValueError"
    assert "unknown harness" in result["exception_info"]["exception_message"]


def test_the_summary_table_lists_every_setting(tmp_path: Path) -> None:
    model = ScriptedModel(oracle_policy(FIXTURE_TASKS))
    specs = specs_for(FIXTURE_TASKS, runs=1)
    run_trials(specs, model, HarnessSettings(), tmp_path / "job", bwrap)
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(summarize(read_job(tmp_path / "job")).to_dict()))
    write_summary([metrics], tmp_path / "summary.json", tmp_path / "summary.md")
    table = (tmp_path / "summary.md").read_text()
    assert "| m | fixtures | tmax | 100.0 ± 0.0 | 1 | 3 | 3 | 0 |" in table
