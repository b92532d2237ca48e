"""The tidy tables: one row per trial (evaluations.parquet) and one per RL step
(training.parquet), with the values the fixtures recorded (tests/report/conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT
from tests.report.conftest import CURVE, SCENARIO
from tmax.report import tidy
from tmax.report.ingest import records_from_jobs, records_from_runs
from tmax.report.stage import write_report_tables
from tmax.report.tidy import EVALUATIONS, TRAINING, write_evaluations, write_training

HARBOR_JOBS = ROOT / "tests" / "fixtures" / "harbor_jobs"
SETTING = ["model", "variant", "benchmark", "harness"]


def test_one_row_per_trial_with_its_outcome(run_files: list[Path], tmp_path: Path) -> None:
    path = write_evaluations(tmp_path / "evaluations.parquet", records_from_runs(run_files))
    trials = pd.read_parquet(path).set_index([*SETTING, "task", "run"]).sort_index()
    expected = {}
    for (label, benchmark, harness), tasks in SCENARIO.items():
        model, variant = ("qwen3.5-9b", "tmax") if label.endswith("-tmax") else (label, "base")
        for task, outcomes in tasks.items():
            for run, outcome in enumerate(outcomes):
                infra = outcome == "infra"
                expected[(model, variant, benchmark, harness, task, run)] = {
                    "reward": None if infra or outcome is None else float(outcome),
                    "infra_error": infra,
                    "failure": "SandboxStartError" if infra else None,
                    "exception_type": "SandboxStartError" if infra else None,
                    "exit_status": "sandbox_error" if infra else "submitted",
                    "turns": 0 if infra else run + 3,
                    "tool_calls": 0 if infra else run + 2,
                    "agent_execution_sec": None if infra else 7.0,
                    "model_time_sec": None if infra else 1.5,
                }
    assert len(trials) == len(expected) == 12
    assert trials.index.is_unique
    for key, values in expected.items():
        found = trials.loc[key, list(values)].to_dict()
        found = {k: None if pd.isna(v) else v for k, v in found.items()}
        assert found == values, key
    # what every fixture trial records alike
    assert set(trials["n_input_tokens"]) == {100} and set(trials["n_output_tokens"]) == {10}
    assert set(trials["duration_sec"]) == {10.0} and set(trials["environment_setup_sec"]) == {2.0}
    assert set(trials["domain"]) == {"debugging"}
    assert trials["agent_setup_sec"].isna().all()  # never recorded: null, not 0
    assert all(Path(d, "result.json").is_file() for d in trials["trial_dir"])


def test_the_file_has_the_declared_schema_even_without_trials(tmp_path: Path) -> None:
    empty = write_evaluations(tmp_path / "empty.parquet", [])
    assert pq.read_schema(empty).remove_metadata() == EVALUATIONS
    assert pd.read_parquet(empty).empty
    assert list(pd.read_parquet(empty).columns) == EVALUATIONS.names
    steps = write_training(tmp_path / "training.parquet", {})
    assert pq.read_schema(steps).remove_metadata() == TRAINING
    frame = pd.read_parquet(steps)
    assert frame.empty and str(frame["step"].dtype) == "int64"


def test_harbor_trials_keep_their_exception_and_leave_our_counts_null(tmp_path: Path) -> None:
    """The fixture job: hello-world Zx9KmP2 timed out (the agent's doing: graded 0),
    fix-permissions Q7wErT5 never got an environment (infrastructure)."""
    records = records_from_jobs([HARBOR_JOBS / "2026-01-05__12-00-00"])
    trials = pd.read_parquet(write_evaluations(tmp_path / "e.parquet", records))
    by_trial = trials.assign(trial=trials["trial_dir"].map(lambda d: Path(d).name))
    by_trial = by_trial.set_index("trial")
    timed_out = by_trial.loc["hello-world__Zx9KmP2"]
    assert (timed_out["exception_type"], timed_out["infra_error"]) == ("AgentTimeoutError", False)
    assert timed_out["reward"] == 0.0 and pd.isna(timed_out["failure"])
    broken = by_trial.loc["fix-permissions__Q7wErT5"]
    assert broken["infra_error"] and broken["failure"] == "EnvironmentStartTimeoutError"
    assert broken["exception_type"] == "EnvironmentStartTimeoutError"
    assert trials["tool_calls"].isna().all() and trials["turns"].isna().all()
    assert set(trials[SETTING].itertuples(index=False)) == {
        ("qwen3-8b", "base", "hello-bench", "terminus-2")
    }


def test_the_phase_timings_of_our_runner(tmp_path: Path) -> None:
    """tmax-run's count-error-lines run 0: set up 08:00:00-02, agent until 25, verifier
    until 30."""
    records = records_from_jobs([HARBOR_JOBS / "tmax-run"])
    trials = pd.read_parquet(write_evaluations(tmp_path / "e.parquet", records))
    (row,) = trials[(trials["task"] == "count-error-lines") & (trials["run"] == 0)].itertuples()
    assert (row.environment_setup_sec, row.agent_execution_sec, row.verifier_sec) == (2, 23, 5)
    assert (row.duration_sec, row.model, row.variant) == (30, "tmax-qwen3-8b", "base")


def pandas_recipe() -> str:
    """docs/report.md's pass@1 recipe (the Python block that computes ``pass_at_1``)."""
    page = (ROOT / "docs" / "report.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "pass_at_1 =" in b]
    return block


def test_the_papers_pass_at_1_follows_from_the_trials_in_pandas(
    run_files: list[Path], tmp_path: Path
) -> None:
    """docs/report.md's recipe gives the evaluations table's numbers (conftest
    SCENARIO: 50.0 ± 16.7 before RL, 83.3 ± 16.7 after)."""
    write_evaluations(tmp_path / "evaluations.parquet", records_from_runs(run_files))
    trials = pd.read_parquet(tmp_path / "evaluations.parquet")
    # an infrastructure error scores 0 even where a reward was recorded before it
    trials.loc[trials["infra_error"], "reward"] = 1.0
    found = {"trials": trials}
    exec(pandas_recipe(), found)
    assert found["pass_at_1"].round(1).values.tolist() == [[50.0, 16.7], [83.3, 16.7]]


def test_the_report_writes_the_trials_it_tabulates(run_files: list[Path], tmp_path: Path) -> None:
    paths = write_report_tables(
        records_from_runs(run_files),
        tmp_path / "tables",
        formats=["csv"],
        evaluations=tmp_path / "evaluations.parquet",
    )
    assert tmp_path / "evaluations.parquet" in paths
    assert len(pd.read_parquet(tmp_path / "evaluations.parquet")) == 12


def test_one_row_per_rl_step_and_model(tmp_path: Path) -> None:
    curves = {"tiny-a": CURVE["curve"], "tiny-b": CURVE["curve"][:2]}
    settings = {"tiny-a": {"loss": "dppo", "group_size": 8}, "tiny-b": {"loss": "grpo"}}
    steps = pd.read_parquet(write_training(tmp_path / "training.parquet", curves, settings))
    assert steps[["model", "variant", "step"]].values.tolist() == [
        ["tiny-a", "tmax", 1], ["tiny-a", "tmax", 2], ["tiny-a", "tmax", 3],
        ["tiny-b", "tmax", 1], ["tiny-b", "tmax", 2],
    ]  # fmt: skip
    assert steps["reward_mean"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.1, 0.2])
    assert steps["response_tokens_mean"].tolist() == [101, 102, 103, 101, 102]
    assert set(steps["masked_fraction"]) == {0.01} and set(steps["logp_diff_mean"]) == {0.001}
    assert steps["clip_fraction"].isna().all()  # a GRPO figure no step recorded
    assert steps["rl_loss"].tolist() == ["dppo"] * 3 + ["grpo"] * 2
    assert steps["group_size"].tolist()[:3] == [8, 8, 8] and steps["group_size"][3:].isna().all()


def test_a_figure_the_schema_does_not_name_is_kept(tmp_path: Path) -> None:
    curve = [{**row, "kl_to_reference": row["step"] / 10} for row in CURVE["curve"]]
    curve[1]["groups_trained"] = 4.0  # a count written as a float is still a count
    path = write_training(tmp_path / "training.parquet", {"tiny": curve})
    schema = pq.read_schema(path)
    assert schema.names == [*TRAINING.names, "kl_to_reference"]
    assert str(schema.field("kl_to_reference").type) == "double"
    steps = pd.read_parquet(path)
    assert steps["kl_to_reference"].tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert steps["groups_trained"].tolist()[1] == 4


def test_a_malformed_step_names_the_model_step_and_figure(tmp_path: Path) -> None:
    curve = [dict(CURVE["curve"][0], groups_trained=2.5)]
    with pytest.raises(ValueError, match=r"tiny step 1: groups_trained is 2\.5"):
        write_training(tmp_path / "training.parquet", {"tiny": curve})
    curve = [dict(CURVE["curve"][0], reward_mean="high")]
    with pytest.raises(ValueError, match=r"tiny step 1: reward_mean is 'high'"):
        write_training(tmp_path / "training.parquet", {"tiny": curve})
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    def crash(table, where, **kwargs) -> None:
        Path(where).write_bytes(b"PAR1")  # half a file, then the disk fills up
        raise OSError("no space left on device")

    monkeypatch.setattr(tidy.pq, "write_table", crash)
    with pytest.raises(OSError, match="no space"):
        write_training(tmp_path / "training.parquet", {"tiny": CURVE["curve"]})
    assert list(tmp_path.iterdir()) == []
