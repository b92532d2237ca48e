"""A trial against a real `transformers serve` process with a tiny local model.

The tiny Qwen3 is taught (overfit) to answer the tmax harness's first turn on the
count-error-lines fixture with the submit call, so the whole path is exercised for
real: the harness's prompt through the chat template, the server's tool-call parser,
the `openai` client, the sandbox, the verifier and the trial directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_TASKS
from tests.harness.conftest import LOG_TASK
from tests.sandbox.test_sandbox import _available
from tmax.evaluate.trial import TrialSpec, run_trial
from tmax.harness import HarnessSettings, make_harness
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.harness.trajectory import Trajectory
from tmax.models.client import OpenAIChatModel
from tmax.models.serve import ModelServer
from tmax.models.tiny import TeachExample, bash_tool_call, ensure_tiny_model
from tmax.sandbox.episode import sandbox_for_task

pytestmark = pytest.mark.slow

SETTINGS = HarnessSettings(temperature=0.0, max_turn_tokens=64, max_tool_calls=4)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)
    harness = make_harness("tmax", SETTINGS)
    instruction = (LOG_TASK / "instruction.md").read_text()
    first_turn = harness.start(instruction, None, Trajectory("tmax", "1", "m"))  # type: ignore[arg-type]
    lesson = TeachExample(
        messages=first_turn,
        tools=harness.tools,
        target=bash_tool_call(f"echo {SUBMIT_SENTINEL}"),
    )
    parent = tmp_path_factory.mktemp("models")
    model_dir = ensure_tiny_model("tiny-submitter", parent=parent, teach=[lesson])
    with ModelServer.transformers(model_dir, log_path=parent / "server.log") as served:
        served.model_dir = model_dir  # type: ignore[attr-defined]
        yield served


def test_a_served_tiny_model_plays_a_trial_end_to_end(server: ModelServer, tmp_path: Path) -> None:
    model = OpenAIChatModel(server.base_url, server.model)
    spec = TrialSpec(LOG_TASK, "count-error-lines", "tiny-submitter", "fixtures", "tmax", 0)
    result = run_trial(
        spec,
        model,
        SETTINGS,
        tmp_path / spec.trial_name,
        lambda task_dir: sandbox_for_task(task_dir, "bwrap", run_id="pytest"),
    )
    assert result["exception_info"] is None, result["exception_info"]
    meta = result["agent_result"]["metadata"]["tmax"]
    assert meta["exit_status"] == "submitted" and meta["turns"] == 1
    assert result["verifier_result"]["rewards"]["reward"] == 0.0  # submitted without solving
    assert result["agent_result"]["n_input_tokens"] > 100  # usage came from the server
    assert result["agent_info"]["model_info"]["name"] == "tiny-submitter"
    trajectory = json.loads((tmp_path / spec.trial_name / "agent/trajectory.json").read_text())
    [call] = trajectory["steps"][-1]["tool_calls"]
    assert call["function_name"] == "bash"
    assert call["arguments"] == {"command": f"echo {SUBMIT_SENTINEL}"}


def test_the_cli_evaluates_an_endpoint_and_tabulates_it(
    server: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tmax.cli import main

    jobs = tmp_path / "jobs"
    args = ["eval", "run", str(LOG_TASK), "--base-url", server.base_url, "--model", server.model]
    args += [
        "--temperature",
        "0",
        "--max-turn-tokens",
        "64",
        "--max-tool-calls",
        "4",
        "--runs",
        "2",
    ]
    assert main([*args, "--jobs-dir", str(jobs), "--benchmark", "fixtures"]) == 0
    out = capsys.readouterr().out
    assert "run 0: 0.0% of 1 trial(s), 0 infrastructure failure(s)" in out
    assert main(["eval", "metrics", str(jobs)]) == 0
    assert "| tiny-submitter | fixtures | tmax | 1 | 2 | 0.0 ± 0.0 |" in capsys.readouterr().out


def test_a_cut_off_tool_call_is_a_format_error_not_an_infrastructure_failure(
    server: ModelServer, tmp_path: Path
) -> None:
    """With 8 tokens per turn the taught call is cut off mid-JSON. transformers serve's
    own parser answers that with HTTP 500; rendered and parsed here, it is the agent's
    malformed reply."""
    from tmax.models.client import CompletionsChatModel

    model = CompletionsChatModel(server.base_url, server.model, server.model_dir)  # type: ignore[attr-defined]
    settings = HarnessSettings(temperature=0.0, max_turn_tokens=8, max_format_errors=2,
                               max_tool_calls=4)  # fmt: skip
    spec = TrialSpec(LOG_TASK, "count-error-lines", "tiny-submitter", "fixtures", "tmax", 0)
    bwrap = lambda task_dir: sandbox_for_task(task_dir, "bwrap", run_id="pytest")  # noqa: E731
    result = run_trial(spec, model, settings, tmp_path / "trial", bwrap)
    assert result["exception_info"] is None
    meta = result["agent_result"]["metadata"]["tmax"]
    assert (meta["exit_status"], meta["format_errors"]) == ("format_errors", 2)
    assert result["verifier_result"]["rewards"]["reward"] == 0.0


def test_a_cut_off_tool_call_on_the_chat_endpoint_is_a_format_error_too(
    server: ModelServer, tmp_path: Path
) -> None:
    """The same cut-off call through the server's own tool-call parser (the chat
    endpoint, as a harness that sends ``tools`` to any server uses it): the reply comes
    back as text, so the episode ends in format errors, not in an infrastructure failure."""
    model = OpenAIChatModel(server.base_url, server.model)
    settings = HarnessSettings(temperature=0.0, max_turn_tokens=8, max_format_errors=2,
                               max_tool_calls=4)  # fmt: skip
    spec = TrialSpec(LOG_TASK, "count-error-lines", "tiny-submitter", "fixtures", "tmax", 0)
    bwrap = lambda task_dir: sandbox_for_task(task_dir, "bwrap", run_id="pytest")  # noqa: E731
    result = run_trial(spec, model, settings, tmp_path / "trial", bwrap)
    assert result["exception_info"] is None, result["exception_info"]
    meta = result["agent_result"]["metadata"]["tmax"]
    assert (meta["exit_status"], meta["format_errors"]) == ("format_errors", 2)
    assert model.retries == 0


def _agent_replies(job: Path) -> dict[str, list[str]]:
    replies = {}
    for trial in sorted(job.glob("*/agent/trajectory.json")):
        steps = json.loads(trial.read_text())["steps"]
        replies[trial.parent.parent.name] = [
            str(step.get("message")) for step in steps if step.get("source") == "agent"
        ]
    return replies


def test_two_sampled_runs_differ_and_a_rerun_of_a_run_repeats_it(
    server: ModelServer, tmp_path: Path
) -> None:
    """Sampled at 1.0 on a task the model was not taught (its answers are near noise):
    runs 0 and 1 of the same model answer differently, and the same runs played again
    (same seeds) answer exactly as before."""
    from tmax.evaluate.runner import plan_trials, run_trials
    from tmax.models.client import CompletionsChatModel

    model = CompletionsChatModel(server.base_url, server.model, server.model_dir)  # type: ignore[attr-defined]
    settings = HarnessSettings(temperature=1.0, max_turn_tokens=24, max_format_errors=2,
                               max_tool_calls=2)  # fmt: skip
    task = FIXTURE_TASKS / "sum-csv-column"
    specs = plan_trials([(task, task.name, None)], model="tiny-submitter", benchmark="fixtures",
                        harness="tmax", runs=range(2), seed=3)  # fmt: skip
    bwrap = lambda task_dir: sandbox_for_task(task_dir, "bwrap", run_id="pytest")  # noqa: E731
    run_trials(specs, model, settings, tmp_path / "first", bwrap, progress=False)
    run_trials(specs, model, settings, tmp_path / "again", bwrap, progress=False)
    first, again = _agent_replies(tmp_path / "first"), _agent_replies(tmp_path / "again")
    run0, run1 = (first[spec.trial_name] for spec in specs)
    assert run0 and run1 and run0 != run1
    assert again == first


def test_completions_mode_reads_the_taught_call(server: ModelServer) -> None:
    from tmax.models.client import CompletionsChatModel

    model = CompletionsChatModel(server.base_url, server.model, server.model_dir)  # type: ignore[attr-defined]
    harness = make_harness("tmax", SETTINGS)
    first = harness.start((LOG_TASK / "instruction.md").read_text(), None,  # type: ignore[arg-type]
                          Trajectory("tmax", "1", "m"))  # fmt: skip
    completion = model.complete(first, tools=harness.tools, max_tokens=64, temperature=0.0)
    [call] = completion.tool_calls
    assert call.name == "bash"
    assert call.parsed_arguments() == {"command": f"echo {SUBMIT_SENTINEL}"}
    assert completion.prompt_tokens > 100
