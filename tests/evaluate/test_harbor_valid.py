"""Our trial and job folders load with Harbor's own models, and trials follow Harbor's
verification semantics: an agent that runs out of time or memory is still verified,
with the exception recorded, and counts as the agent's failure, never infra.

Harbor (``harbor==0.26.0``) needs Python >= 3.12, so its models run in a venv of their
own (``.venv-harbor``, made by setup.sh; ``$TMAX_HARBOR_PYTHON``), through
``tmax.evaluate.harbor_check``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import tmax.evaluate.harbor_check as harbor_check_module
from tests.conftest import FIXTURE_TASKS, ROOT
from tests.evaluate.test_runner import TASKS, bwrap, oracle_policy, specs_for
from tests.sandbox.test_sandbox import _available
from tmax.evaluate.records import read_job
from tmax.evaluate.runner import run_trials
from tmax.harness import HarnessSettings
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.models.client import Completion, Message, ScriptedModel, bash_call
from tmax.sandbox import Sandbox, SandboxError
from tmax.sandbox.episode import sandbox_for_task

pytestmark = pytest.mark.slow

HARBOR_CHECK = Path(harbor_check_module.__file__)
# What we keep in Harbor's ExceptionInfo beside its fields (our runner's own tests read
# it there); Harbor ignores it, and agent_result.metadata.tmax.failure_kind repeats it.
OURS_HARBOR_IGNORES = {"exception_info.failure_kind"}


def _harbor_python() -> tuple[str | None, str]:
    """(a Python that imports Harbor's models, or None; why not)."""
    candidate = os.environ.get("TMAX_HARBOR_PYTHON") or str(ROOT / ".venv-harbor/bin/python")
    if not Path(candidate).is_file():
        return None, (
            f"no Harbor Python at {candidate}: Harbor needs Python >= 3.12; run ./setup.sh "
            "(it builds .venv-harbor when a Python >= 3.12 exists) or set TMAX_HARBOR_PYTHON"
        )
    probe = subprocess.run(
        [candidate, "-c", "import harbor.models.trial.result, harbor.models.job.result"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        return None, f"{candidate} cannot import Harbor's models: {probe.stderr[-300:]}"
    return candidate, ""


@pytest.fixture(scope="module")
def harbor_python() -> str:
    python, why = _harbor_python()
    if python is None:
        pytest.skip(why)
    return python


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)


def harbor_check(python: str, *paths: Path) -> tuple[int, str]:
    """Run the Harbor-side check on ``paths``: (exit status, its report)."""
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [python, str(HARBOR_CHECK), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    return done.returncode, done.stdout + done.stderr


def loads_in_harbor_if_installed(job: Path) -> None:
    """Check ``job`` with Harbor's models where a Harbor Python exists (the semantics
    tests run without one)."""
    python, _ = _harbor_python()
    if python is not None:
        status, report = harbor_check(python, job)
        assert status == 0, report


def ignored_keys(report: str) -> set[str]:
    """The keys the report says Harbor ignores."""
    keys: set[str] = set()
    for line in report.splitlines():
        if "Harbor ignores " in line:
            keys.update(k.strip() for k in line.split("Harbor ignores ", 1)[1].split(","))
    return keys


def task_with_agent_timeout(tmp_path: Path, name: str, seconds: float) -> Path:
    """A copy of a fixture task whose ``[agent] timeout_sec`` is ``seconds``."""
    task = Path(shutil.copytree(FIXTURE_TASKS / name, tmp_path / "tasks" / name))
    toml = task / "task.toml"
    text, old = toml.read_text(), "[agent]\ntimeout_sec = 600.0"
    assert old in text
    toml.write_text(text.replace(old, f"[agent]\ntimeout_sec = {seconds}"))
    return task


def one_spec(task: Path) -> list:
    from tmax.evaluate.runner import plan_trials

    return plan_trials([(task, task.name, "fixtures")], model="m", benchmark="fixtures",
                       harness="tmax", runs=[0])  # fmt: skip


# --- Harbor loads what we write ---------------------------------------------------------


def test_every_trial_and_the_job_folder_load_with_harbors_models(
    tmp_path: Path, harbor_python: str
) -> None:
    """A real small evaluation (solved, unsolved, an infrastructure failure): Harbor's
    TrialResult/TrialConfig load every trial, JobResult/JobConfig the job folder, and
    nothing of ours is dropped on the way but the noted ``failure_kind``."""

    def flaky(task_dir: Path) -> Sandbox:
        if task_dir.name == "sum-csv-column":
            raise SandboxError("podman: image build failed")
        return bwrap(task_dir)

    solve = oracle_policy(FIXTURE_TASKS)

    def policy(messages: Sequence[Message]) -> Completion:
        if "error_count.txt" in messages[1]["content"]:
            return bash_call(f"echo {SUBMIT_SENTINEL}")  # submits without solving
        return solve(messages)

    job = tmp_path / "job"
    results = run_trials(specs_for(FIXTURE_TASKS, runs=1), ScriptedModel(policy),
                         HarnessSettings(), job, flaky, concurrency=2, progress=False)  # fmt: skip
    rewards = {r["task_name"]: (r["verifier_result"] or {}).get("rewards") for r in results}
    assert rewards == {"answer-checked-by-pytest": {"reward": 1.0},
                       "count-error-lines": {"reward": 0.0}, "sum-csv-column": None}  # fmt: skip

    status, report = harbor_check(harbor_python, job)
    assert status == 0, report
    assert f"{len(TASKS)} of {len(TASKS)} trial folders load" in report
    assert "1 of 1 job folders load" in report
    assert ignored_keys(report) <= OURS_HARBOR_IGNORES, report

    summary = json.loads((job / "result.json").read_text())
    assert summary["n_total_trials"] == 3 and summary["stats"]["n_errored_trials"] == 1
    [stats] = summary["stats"]["evals"].values()
    assert stats["n_trials"] == 2  # the infra failure's reward is not a valid one
    assert stats["exception_stats"] == {"SandboxError": ["sum-csv-column__r0"]}
    # Our reader still reads the folder, job files included.
    assert sorted(r.task_name for r in read_job(job)) == sorted(TASKS)


def test_the_check_reports_a_trial_harbor_cannot_load(tmp_path: Path, harbor_python: str) -> None:
    job = tmp_path / "job"
    run_trials(specs_for(FIXTURE_TASKS, runs=1)[:1], ScriptedModel(oracle_policy(FIXTURE_TASKS)),
               HarnessSettings(), job, bwrap, progress=False)  # fmt: skip
    [trial] = [p for p in job.iterdir() if p.is_dir()]
    for name in ("config.json", "result.json"):  # `name` beside `path`: Harbor forbids it
        data = json.loads((trial / name).read_text())
        task = data["task"] if name == "config.json" else data["config"]["task"]
        task["name"] = "fixtures/" + trial.name
        (trial / name).write_text(json.dumps(data))
    status, report = harbor_check(harbor_python, job)
    assert status == 1, report
    assert "0 of 1 trial folders load" in report
    assert "Cannot set both 'path' and 'name'" in report


# --- Harbor's verification semantics ------------------------------------------------------


def test_a_command_past_the_agent_timeout_is_cut_and_the_trial_still_verified(
    tmp_path: Path,
) -> None:
    """The agent solves the task, then starts a 60 s command with 4 s of its time
    left: the command is cut at the deadline, the trial records Harbor's
    AgentTimeoutError, and what the agent left is verified (reward 1, counted)."""
    task = task_with_agent_timeout(tmp_path, "count-error-lines", 4)
    solution = (task / "solution" / "solve.sh").read_text()
    model = ScriptedModel([bash_call(solution), bash_call("sleep 60"), bash_call("echo never")])
    [result] = run_trials(one_spec(task), model, HarnessSettings(), tmp_path / "job", bwrap,
                          progress=False)  # fmt: skip
    meta = result["agent_result"]["metadata"]["tmax"]
    assert meta["exit_status"] == "agent_timeout"
    assert meta["agent_time_sec"] < 30  # cut, not left to run its 60 s
    assert len(model.requests) == 2  # no turn after the deadline
    info = result["exception_info"]
    assert info["exception_type"] == "AgentTimeoutError" and info["failure_kind"] == "agent"
    assert result["verifier_result"]["rewards"]["reward"] == 1.0
    [record] = read_job(tmp_path / "job")
    assert not record.is_infra_failure and record.reward == 1.0
    loads_in_harbor_if_installed(tmp_path / "job")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test, so a model call it abandoned can finish."""
    event = threading.Event()
    yield event
    event.set()


def test_a_model_call_past_the_agent_timeout_ends_the_episode(
    tmp_path: Path, release: threading.Event
) -> None:
    """A model that never answers within the agent's time: the episode ends at the
    deadline (an agent timeout scored 0), not when the model answers."""
    task = task_with_agent_timeout(tmp_path, "count-error-lines", 2)

    def stalls(messages: Sequence[Message]) -> Completion:
        release.wait(60)
        return bash_call(f"echo {SUBMIT_SENTINEL}")

    [result] = run_trials(one_spec(task), ScriptedModel(stalls), HarnessSettings(),
                          tmp_path / "job", bwrap, progress=False)  # fmt: skip
    assert not release.is_set()  # the model was still "thinking" when the trial ended
    meta = result["agent_result"]["metadata"]["tmax"]
    assert meta["exit_status"] == "agent_timeout" and "model call" in meta["exit_detail"]
    assert result["exception_info"]["exception_type"] == "AgentTimeoutError"
    assert result["verifier_result"]["rewards"]["reward"] == 0.0
    [record] = read_job(tmp_path / "job")
    assert not record.is_infra_failure and record.reward == 0.0


def test_an_out_of_memory_agent_is_verified_and_counted(tmp_path: Path) -> None:
    """The agent solves the task, then a command is OOM-killed: the episode ends, the
    exception is recorded, and the verifier still grades what the agent left."""
    solution = (FIXTURE_TASKS / "count-error-lines" / "solution" / "solve.sh").read_text()
    hog = "x=$(head -c 400M /dev/zero | tr '\\0' a); echo ${#x}"
    model = ScriptedModel([bash_call(solution), bash_call(hog), bash_call("echo never")])

    def small(task_dir: Path) -> Sandbox:
        return sandbox_for_task(task_dir, "bwrap", run_id="pytest", memory_mb=128)

    spec = one_spec(FIXTURE_TASKS / "count-error-lines")
    [result] = run_trials(spec, model, HarnessSettings(), tmp_path / "job", small, progress=False)
    assert result["agent_result"]["metadata"]["tmax"]["exit_status"] == "out_of_memory"
    info = result["exception_info"]
    assert info["exception_type"] == "AgentOutOfMemoryError" and info["failure_kind"] == "agent"
    assert result["verifier_result"]["rewards"]["reward"] == 1.0
    [record] = read_job(tmp_path / "job")
    assert not record.is_infra_failure and record.reward == 1.0
    loads_in_harbor_if_installed(tmp_path / "job")
