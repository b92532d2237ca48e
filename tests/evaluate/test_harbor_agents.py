"""Harbor's own Terminus-2 beside ours (evaluation harness ``harbor-terminus-2``): the
evaluation stage runs Harbor's agent code with Harbor's ``harbor run`` through our
sandbox as a Harbor environment, against the run's model endpoint, and summarises the
Harbor job as it does our own runs. Given the same model answers, Harbor's Terminus-2
and ours reach the same reward: both solve a task when the answers solve it, neither
does when they do not."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.sandbox.test_sandbox import _available
from tmax.config import load_config
from tmax.evaluate.harbor_agents import agent_arguments, harbor_run_seed
from tmax.evaluate.metrics import records_from_run_files
from tmax.evaluate.stage import evaluate_run, run_settings
from tmax.harness import HarnessSettings
from tmax.harness.upstream import harbor_python
from tmax.models.scripted_server import Reply, scripted_server

pytestmark = pytest.mark.slow

TASK = ROOT / "tests" / "fixtures" / "redteam" / "tb2-shaped-word-count"
SOLVE = (TASK / "solution" / "solve.sh").read_text().split("\n", 1)[1]


def _answers(keystrokes: str) -> Callable[[dict[str, Any]], Reply]:
    """A model that types ``keystrokes`` on its first turn and then says it is done
    (every later turn, Terminus-2's confirmation included)."""

    def respond(request: dict[str, Any]) -> Reply:
        turn = sum(m.get("role") == "assistant" for m in request.get("messages", []))
        answer = {"analysis": "a scripted answer", "plan": "type, then finish",
                  "commands": [{"keystrokes": keystrokes, "duration": 1.0}] if turn == 0 else [],
                  "task_complete": turn > 0}  # fmt: skip
        return Reply(content=json.dumps(answer))

    return respond


@pytest.fixture(scope="module")
def harbor() -> str:
    python = harbor_python()
    if python is None or not Path(python).is_file():
        pytest.skip("no Harbor environment (.venv-harbor, built by setup.sh; TMAX_HARBOR_PYTHON)")
    if _available("bwrap"):
        pytest.skip(_available("bwrap"))
    return python


def _run(harness: str, base_url: str, tmp_path: Path) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({
        "benchmark": "fixtures", "tasks": [{"name": TASK.name, "path": str(TASK)}],
    }))  # fmt: skip
    config = load_config(ROOT / "config.yaml")
    evaluation = run_settings(config["evaluation"])
    evaluation["temperature"] = 0.0
    evaluation["seed"] = config["seed"]  # as the workflow's jobs get it
    model = {"name": "scripted", "endpoint": {"base_url": base_url, "model": "scripted"}}
    output = tmp_path / "eval" / harness / "run0.json"
    return evaluate_run(
        manifest, model, None, harness, 0, evaluation, "bwrap", output,
        concurrency=1, server_log=tmp_path / f"{harness}.server.log",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("keystrokes", "reward"), [(SOLVE, 1.0), ("ls /app\n", 0.0)], ids=["solves", "does-not"]
)
def test_harbor_terminus_2_and_ours_agree_on_the_same_answers(
    harbor: str, tmp_path: Path, keystrokes: str, reward: float
) -> None:
    with scripted_server(_answers(keystrokes)) as server:
        ours = _run("terminus-2", server.base_url, tmp_path / "ours")
        harbors = _run("harbor-terminus-2", server.base_url, tmp_path / "harbor")
    for summary in (ours, harbors):
        assert summary["n_trials"] == 1 and summary["n_infra_failures"] == 0, summary
        assert summary["trials"][0]["task"] == TASK.name
        assert summary["accuracy"] == reward, summary
    # the run is a Harbor job, in Harbor's own format
    job = Path(harbors["trials_dir"])
    assert (job / "result.json").is_file() and (job / "config.json").is_file()
    [trial] = [p for p in job.iterdir() if (p / "result.json").is_file()]
    assert json.loads((trial / "result.json").read_text())["agent_info"]["name"] == "terminus-2"
    # the workflow's metrics label the run as the run file does, not as Harbor's trial
    # does (agent terminus-2, the dataset folder as its benchmark)
    run_file = tmp_path / "harbor" / "eval" / "harbor-terminus-2" / "run0.json"
    [record] = records_from_run_files([run_file])
    assert (record.model, record.benchmark, record.harness) == (
        "scripted", "fixtures", "harbor-terminus-2"
    )  # fmt: skip
    assert (record.reward, record.failure) == (reward, None)
    # Harbor's agent asked our server, at the temperature, top_p and seed the evaluation
    # set: every request of the run carries the run's seed
    seed = harbor_run_seed(load_config(ROOT / "config.yaml")["seed"], 0)
    harbor_requests = [r for r in server.requests if r.get("seed") == seed]
    assert harbor_requests, [r.get("seed") for r in server.requests]
    assert all(r.get("temperature") == 0.0 and r.get("top_p") == 1.0 for r in harbor_requests)


def test_a_finished_harbor_run_is_read_back_not_rerun(harbor: str, tmp_path: Path) -> None:
    with scripted_server(_answers(SOLVE)) as server:
        first = _run("harbor-terminus-2", server.base_url, tmp_path)
        asked = server.request_count
        again = _run("harbor-terminus-2", server.base_url, tmp_path)
        assert server.request_count == asked
    assert again["trials"] == first["trials"]


def test_the_cli_runs_harbors_agent_as_one_harbor_job_per_run(
    harbor: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tmax eval run --harness harbor-terminus-2``: the same route as the workflow's,
    from the command line, a Harbor job per run that ``tmax eval metrics`` reads."""
    from tmax.cli import main

    jobs = tmp_path / "jobs"
    with scripted_server(_answers(SOLVE)) as server:
        code = main(["eval", "run", str(TASK), "--harness", "harbor-terminus-2",
                     "--base-url", server.base_url, "--model", "scripted", "--temperature", "0",
                     "--backend", "bwrap", "--runs", "2", "--jobs-dir", str(jobs),
                     "--benchmark", "fixtures"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    for run in (0, 1):
        assert f"run {run}: 100.0% of 1 trial(s), 0 infrastructure failure(s)" in out
        assert (jobs / f"run{run}" / "result.json").is_file()
    assert main(["eval", "metrics", str(jobs / "run0"), str(jobs / "run1")]) == 0
    assert "terminus-2" in capsys.readouterr().out


def test_agent_arguments_carry_our_budgets() -> None:
    settings = HarnessSettings(temperature=0.3, max_turns=7, top_p=0.9)
    arguments = agent_arguments("terminus-2", "http://h/v1", "m", settings, seed=11)
    assert arguments[:2] == ["--model", "openai/m"]
    pairs = {arguments[i + 1] for i, a in enumerate(arguments) if a == "--agent-kwarg"}
    assert {"api_base=http://h/v1", "temperature=0.3", "max_turns=7",
            'llm_call_kwargs={"top_p": 0.9, "seed": 11}'} <= pairs  # fmt: skip
    unseeded = agent_arguments("terminus-2", "http://h/v1", "m", HarnessSettings())
    assert not any(a.startswith("llm_call_kwargs") for a in unseeded)


def test_harbor_exceptions_are_sorted_as_for_any_harbor_trial(tmp_path: Path) -> None:
    """A Harbor trial carries no metadata of ours: its agent's time limit is a counted
    attempt, an environment that broke an infrastructure failure."""
    from tmax.evaluate.stage import run_summary

    def trial(name: str, exception: str | None) -> dict[str, Any]:
        info = exception and {"exception_type": exception, "exception_message": "x"}
        return {"trial_name": name, "task_name": name, "verifier_result": None,
                "agent_result": {}, "exception_info": info}  # fmt: skip

    results = [trial("a", "AgentTimeoutError"), trial("b", "RuntimeError"), trial("c", None)]
    summary = run_summary(results, tmp_path, "m", "fixtures", "harbor-terminus-2", 0)
    assert [t["infra_failure"] for t in summary["trials"]] == [None, "RuntimeError", None]
    assert summary["n_infra_failures"] == 1
