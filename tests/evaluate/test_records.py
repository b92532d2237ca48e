"""Reading Harbor job folders and our runner's trials into records."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tmax.evaluate.metrics import summarize
from tmax.evaluate.records import (
    MISSING_VERIFIER_RESULT,
    RecordError,
    load_exception_kinds,
    parse_exception_kinds,
    read_job,
    read_jobs,
    read_trial,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harbor_jobs"
HARBOR_JOB = FIXTURES / "2026-01-05__12-00-00"
OUR_JOB = FIXTURES / "tmax-run"


@pytest.fixture
def harbor_job(tmp_path: Path) -> Path:
    """A writable copy of the Harbor job fixture."""
    return Path(shutil.copytree(HARBOR_JOB, tmp_path / HARBOR_JOB.name))


def by_trial(records: list) -> dict[str, object]:
    return {record.path.name: record for record in records}


# --- Harbor's own job folders ----------------------------------------------------------


def test_harbor_job_reads_every_trial_and_skips_the_job_summary() -> None:
    records = by_trial(read_job(HARBOR_JOB))
    assert sorted(records) == [
        "fix-permissions__M4nB8vC",
        "fix-permissions__Q7wErT5",
        "hello-world__Zx9KmP2",
        "hello-world__aB3dE7q",
    ]
    for record in records.values():
        assert (record.model, record.harness, record.benchmark) == (
            "qwen3-8b",
            "terminus-2",
            "hello-bench",
        )
        assert record.domain is None


def test_harbor_attempts_are_numbered_by_start_time_not_name() -> None:
    records = by_trial(read_job(HARBOR_JOB))
    assert records["hello-world__aB3dE7q"].run == 0  # started 12:01
    assert records["hello-world__Zx9KmP2"].run == 1  # started 12:09
    assert records["fix-permissions__Q7wErT5"].run == 0
    assert records["fix-permissions__M4nB8vC"].run == 1


def test_harbor_exceptions_are_sorted_into_agent_and_infra() -> None:
    records = by_trial(read_job(HARBOR_JOB))
    timeout = records["hello-world__Zx9KmP2"]
    assert (timeout.reward, timeout.failure) == (0.0, None)  # the agent's fault: a 0
    assert timeout.exit_status == "AgentTimeoutError"
    sandbox = records["fix-permissions__Q7wErT5"]
    assert (sandbox.reward, sandbox.failure) == (None, "EnvironmentStartTimeoutError")
    assert (sandbox.n_input_tokens, sandbox.n_output_tokens) == (None, None)
    solved = records["hello-world__aB3dE7q"]
    assert (solved.reward, solved.failure, solved.exit_status) == (1.0, None, "completed")
    assert (solved.n_input_tokens, solved.n_output_tokens) == (12000, 800)
    assert solved.duration_sec == pytest.approx(50.0)


def test_harbor_job_summary() -> None:
    group = summarize(read_job(HARBOR_JOB)).get("qwen3-8b", "hello-bench", "terminus-2")
    # run 0: hello-world 1 (fix-permissions infra-failed) → 100 %; run 1: 0 and 1 → 50 %.
    assert group.per_run[0] == {"accuracy": 100.0, "n_valid": 1, "n_infra_failures": 1}
    assert group.per_run[1] == {"accuracy": 50.0, "n_valid": 2, "n_infra_failures": 0}
    assert group.pass_at_1_mean == pytest.approx(75.0)
    assert group.pass_at_1_std == pytest.approx(25 * 2**0.5)
    assert group.infra_failures == {"EnvironmentStartTimeoutError": 1}
    assert group.exit_statuses == {
        "AgentTimeoutError": 1,
        "EnvironmentStartTimeoutError": 1,
        "completed": 2,
    }
    # pass@2 only over hello-world, the one task with two valid attempts.
    assert group.pass_at_k == {1: pytest.approx(75.0), 2: pytest.approx(100.0)}
    assert group.pass_at_k_tasks == {1: 2, 2: 1}


def test_arguments_relabel_a_harbor_job() -> None:
    records = read_job(HARBOR_JOB, model="Qwen3-8B", harness="terminus-2", benchmark="tb2")
    assert {(r.model, r.harness, r.benchmark) for r in records} == {
        ("Qwen3-8B", "terminus-2", "tb2")
    }


def test_benchmark_falls_back_to_the_job_config(harbor_job: Path) -> None:
    for result_path in harbor_job.glob("*/result.json"):
        data = json.loads(result_path.read_text())
        data["source"] = None
        result_path.write_text(json.dumps(data))
    config = json.loads((harbor_job / "config.json").read_text())
    config["datasets"] = [{"name": "terminal-bench", "version": "2.0"}]
    (harbor_job / "config.json").write_text(json.dumps(config))
    assert {r.benchmark for r in read_job(harbor_job)} == {"terminal-bench"}


def test_several_one_attempt_jobs_number_runs_across_jobs(tmp_path: Path) -> None:
    # Split the two-attempt job into two jobs of one attempt each.
    first, second = tmp_path / "job-a", tmp_path / "job-b"
    for job, trials in (
        (first, ["hello-world__aB3dE7q", "fix-permissions__Q7wErT5"]),
        (second, ["hello-world__Zx9KmP2", "fix-permissions__M4nB8vC"]),
    ):
        job.mkdir()
        shutil.copy(HARBOR_JOB / "config.json", job)
        for name in trials:
            shutil.copytree(HARBOR_JOB / name, job / name)
    records = by_trial(read_jobs([second, first]))
    assert records["hello-world__aB3dE7q"].run == 0
    assert records["hello-world__Zx9KmP2"].run == 1
    assert [r.run for r in read_job(second)] == [0, 0]  # alone, each job is run 0


def test_a_trial_without_exception_or_reward_is_infra(harbor_job: Path) -> None:
    result_path = harbor_job / "hello-world__aB3dE7q" / "result.json"
    data = json.loads(result_path.read_text())
    data["verifier_result"] = None  # e.g. a job run with verification disabled
    result_path.write_text(json.dumps(data))
    record = read_trial(result_path)
    assert (record.reward, record.failure) == (None, MISSING_VERIFIER_RESULT)


def test_an_unknown_exception_is_infra(harbor_job: Path) -> None:
    result_path = harbor_job / "hello-world__aB3dE7q" / "result.json"
    data = json.loads(result_path.read_text())
    data["exception_info"] = {
        "exception_type": "SomethingNewError",
        "exception_message": "?",
        "exception_traceback": "",
        "occurred_at": "2026-01-05T12:01:40Z",
    }
    result_path.write_text(json.dumps(data))
    assert read_trial(result_path).failure == "SomethingNewError"


def test_multi_step_trials_read_steps(harbor_job: Path) -> None:
    result_path = harbor_job / "hello-world__aB3dE7q" / "result.json"
    data = json.loads(result_path.read_text())
    step = {"step_name": "s", "exception_info": None, "verifier_result": None}
    data["agent_result"] = None
    data["step_results"] = [
        {**step, "agent_result": {"n_input_tokens": 10, "n_output_tokens": 1}},
        {
            **step,
            "agent_result": {"n_input_tokens": 5, "n_output_tokens": None},
            "exception_info": {"exception_type": "ApiRateLimitError"},
        },
    ]
    result_path.write_text(json.dumps(data))
    record = read_trial(result_path.parent)
    assert (record.n_input_tokens, record.n_output_tokens) == (15, 1)
    assert record.failure == "ApiRateLimitError"


# --- our runner's trials ---------------------------------------------------------------


def test_our_trials_carry_their_own_labels() -> None:
    records = {(r.task_name, r.run): r for r in read_job(OUR_JOB)}
    assert len(records) == 6
    for record in records.values():
        assert (record.model, record.harness, record.benchmark) == (
            "tmax-qwen3-8b",
            "tmax",
            "tmax-heldout",
        )
    infra = records[("sum-csv-column", 2)]
    assert (infra.failure, infra.exit_status, infra.domain) == (
        "SandboxStartError",
        "sandbox_error",
        "data_processing",
    )
    overflow = records[("count-error-lines", 1)]
    assert (overflow.reward, overflow.failure, overflow.exit_status) == (
        None,
        None,
        "context_length",
    )


def test_our_failure_kind_is_trusted_over_the_exception_table(tmp_path: Path) -> None:
    trial_dir = Path(shutil.copytree(OUR_JOB / "count-error-lines__run2", tmp_path / "t"))
    data = json.loads((trial_dir / "result.json").read_text())
    # An exception Harbor would call infra, but our runner said it was the agent's.
    data["exception_info"] = {"exception_type": "ApiError", "exception_message": ""}
    (trial_dir / "result.json").write_text(json.dumps(data))
    assert read_trial(trial_dir).failure is None
    data["agent_result"]["metadata"]["tmax"]["failure_kind"] = "infra"
    (trial_dir / "result.json").write_text(json.dumps(data))
    assert read_trial(trial_dir).failure == "ApiError"


def test_our_job_summary() -> None:
    group = summarize(read_job(OUR_JOB)).groups[0]
    # runs: 2/2, 1/2 (context_length scores 0), 1/1 (sum-csv infra-failed)
    assert [group.per_run[run]["accuracy"] for run in range(3)] == [100.0, 50.0, 100.0]
    assert group.pass_at_1_mean == pytest.approx(250 / 3)
    assert group.pass_at_1_std == pytest.approx(100 * (1 / 12) ** 0.5)  # sqrt(1/6 / 2)
    assert group.per_domain["data_processing"] == {"mean": 100.0, "std": 0.0, "n_tasks": 1}
    assert group.per_domain["system_administration"]["mean"] == pytest.approx(200 / 3)
    assert group.per_task["sum-csv-column"] == {
        "successes": 2,
        "attempts": 2,
        "infra_failures": 1,
    }
    assert group.infra_failures == {"SandboxStartError": 1}
    assert group.exit_statuses == {"context_length": 1, "sandbox_error": 1, "submitted": 4}
    assert group.mean_input_tokens == pytest.approx(30000.0)
    assert "| tmax-qwen3-8b | tmax-heldout | tmax | 2 | 3 | 83.3 ± 28.9 |" in (
        summarize(read_job(OUR_JOB)).to_markdown()
    )


def test_ours_and_harbors_read_together() -> None:
    summary = summarize(read_jobs([HARBOR_JOB, OUR_JOB]))
    assert [(g.model, g.n_trials) for g in summary.groups] == [
        ("qwen3-8b", 4),
        ("tmax-qwen3-8b", 6),
    ]


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("run", -1, "run is -1"),
        ("failure_kind", "sandbox", "failure_kind is 'sandbox'"),
        ("model", "", "model is ''"),
    ],
)
def test_bad_tmax_metadata_is_named(tmp_path: Path, key: str, value: object, problem: str) -> None:
    trial_dir = Path(shutil.copytree(OUR_JOB / "sum-csv-column__run0", tmp_path / "t"))
    data = json.loads((trial_dir / "result.json").read_text())
    data["agent_result"]["metadata"]["tmax"][key] = value
    (trial_dir / "result.json").write_text(json.dumps(data))
    with pytest.raises(RecordError, match=problem):
        read_trial(trial_dir)


# --- malformed input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"task_name": "hello-world", ', "is not valid JSON"),
        ("", "is empty"),
        ("[1, 2]", "JSON list"),
        ('{"trial_name": "x", "agent_info": {"name": "a"}}', "task_name is None"),
        ('{"task_name": "t", "trial_name": "x"}', "agent_info is missing"),
        (
            '{"task_name": "t", "agent_info": {"name": "a"}, '
            '"verifier_result": {"rewards": {"reward": "yes"}}}',
            "is not a finite number",
        ),
        (
            '{"task_name": "t", "agent_info": {"name": "a"}, '
            '"verifier_result": {"rewards": {"a": 1, "b": 0}}}',
            "several keys",
        ),
        ('{"task_name": "t", "agent_info": {"name": "a"}, "started_at": "noon"}', "ISO 8601"),
    ],
)
def test_malformed_result_names_the_file(tmp_path: Path, content: str, problem: str) -> None:
    result_path = tmp_path / "trial" / "result.json"
    result_path.parent.mkdir()
    result_path.write_text(content)
    with pytest.raises(RecordError, match=problem) as caught:
        read_trial(result_path.parent)
    assert str(result_path) in str(caught.value)


def test_a_malformed_trial_stops_a_strict_read(harbor_job: Path) -> None:
    broken = harbor_job / "hello-world__Zx9KmP2" / "result.json"
    broken.write_text('{"task_name": ')
    with pytest.raises(RecordError, match=re.escape("hello-world__Zx9KmP2/result.json")):
        read_job(harbor_job)


def test_a_lenient_read_warns_and_skips(harbor_job: Path, caplog: pytest.LogCaptureFixture) -> None:
    (harbor_job / "hello-world__Zx9KmP2" / "result.json").write_text('{"task_name": ')
    (harbor_job / "unfinished__Ab12Cd3").mkdir()  # a trial still running: no result.json
    with caplog.at_level(logging.WARNING):
        records = read_job(harbor_job, strict=False)
    assert len(records) == 3
    skipped = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert any("hello-world__Zx9KmP2" in message for message in skipped)
    assert any("unfinished__Ab12Cd3" in message for message in skipped)


def test_hidden_folders_of_a_job_are_not_trials(harbor_job: Path) -> None:
    (harbor_job / ".sources" / "abc").mkdir(parents=True)
    assert len(read_job(harbor_job)) == 4


def test_the_job_summary_is_not_a_trial() -> None:
    with pytest.raises(RecordError, match="job summary"):
        read_trial(HARBOR_JOB / "result.json")


def test_a_trial_folder_is_not_a_job() -> None:
    with pytest.raises(RecordError, match="is a trial directory"):
        read_job(HARBOR_JOB / "hello-world__aB3dE7q")


# --- the exception table ---------------------------------------------------------------


def test_exception_table_follows_harbor() -> None:
    kinds = load_exception_kinds()
    for name in ("AgentTimeoutError", "ContextLengthExceededError", "OutputLengthExceededError"):
        assert kinds.kind(name) == "agent"
    for name in (
        "EnvironmentStartTimeoutError",
        "RewardFileNotFoundError",
        "VerifierTimeoutError",
        "ApiRateLimitError",
        "CancelledError",
        "NeverHeardOfItError",
    ):
        assert kinds.kind(name) == "infra"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"default": "agent", "agent": ["A"], "infra": ["A"]}, "both agent and infra"),
        ({"default": "maybe"}, "default is 'maybe'"),
        ({"default": "infra", "agnet": []}, "unknown keys"),
        ({"default": "infra", "agent": "AgentTimeoutError"}, "must be a list"),
    ],
)
def test_exception_table_is_validated(data: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_exception_kinds(yaml.safe_load(yaml.safe_dump(data)))
