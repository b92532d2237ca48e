"""The `tmax` command runs single stages and reports bad input without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.cli import main
from tmax.taxonomy import read_specs


def test_config_check(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["config", "check", str(root / "config.yaml"), str(root / "configs/paper.yaml")]) == 0
    )
    assert "14,600 specs" in capsys.readouterr().out


def test_config_check_reports_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nsampler: {n_specs: 10, shard_sise: 5}\n")
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'shard_sise' in 'sampler' (did you mean 'shard_size'?)" in err
    assert "Traceback" not in err


def test_report_statistics_is_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("seed: 1\nsampler: {n_specs: 10}\nreport: {statistics: exclude_infra}\n")
    assert main(["config", "check", str(config)]) == 0
    config.write_text("seed: 1\nsampler: {n_specs: 10}\nreport: {statistics: population}\n")
    assert main(["config", "check", str(config)]) == 2
    assert (
        "'report.statistics' = \"population\" is not allowed; "
        'choose one of: "paper", "exclude_infra"'
    ) in capsys.readouterr().err


def test_sample_then_balance(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "specs.parquet"
    assert main(["sample", "--config", str(root / "config.yaml"), "--out", str(out)]) == 0
    assert len(read_specs(out)) == 400
    part = tmp_path / "part.parquet"
    config = str(root / "config.yaml")
    assert (
        main(["sample", "--config", config, "--out", str(part), "--start", "10", "--stop", "20"])
        == 0
    )
    assert read_specs(part) == read_specs(out)[10:20]
    args = [
        "balance",
        str(out),
        "--json",
        str(tmp_path / "b.json"),
        "--markdown",
        str(tmp_path / "b.md"),
    ]
    assert main(args) == 0
    assert (tmp_path / "b.md").read_text().startswith("# Spec balance (400 specs)")


def test_task_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["task", "check", *map(str, FIXTURE_TASKS.iterdir())]) == 0
    (tmp_path / "empty-task").mkdir()
    assert main(["task", "check", str(tmp_path / "empty-task")]) == 1
    assert "empty-task/task.toml: missing" in capsys.readouterr().err


def test_eval_metrics_reads_harbor_job_folders(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = root / "tests" / "fixtures" / "harbor_jobs"
    out = tmp_path / "metrics.json"
    assert main(["eval", "metrics", str(jobs / "2026-01-05__12-00-00"), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    # statistics "paper": the environment error scores 0, each run 1/2 (fixture README)
    assert "| qwen3-8b | hello-bench | terminus-2 | 2 | 2 | 50.0 ± 0.0 |" in table
    assert "statistics: paper" in table
    assert json.loads(out.read_text())["statistics"] == "paper"
    job = str(jobs / "2026-01-05__12-00-00")
    assert main(["eval", "metrics", job, "--statistics", "exclude_infra"]) == 0
    table = capsys.readouterr().out
    assert "| qwen3-8b | hello-bench | terminus-2 | 2 | 2 | 75.0 ± 35.4 |" in table
    assert "statistics: exclude_infra" in table
    with pytest.raises(SystemExit):
        main(["eval", "metrics", job, "--statistics", "drop"])
    assert "invalid choice: 'drop'" in capsys.readouterr().err
    assert main(["eval", "metrics", str(jobs / "README.md")]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("seed", [None, 5])
def test_eval_run_samples_with_a_seed_per_run_and_task_when_given_one(
    tmp_path: Path, seed: int | None
) -> None:
    """``tmax eval run --seed``: each (run, task) asks with its own seed, as the
    workflow's evaluation does; without it the requests carry none."""
    from tests.sandbox.test_sandbox import _available
    from tmax.evaluate.runner import trial_seed
    from tmax.models.client import derive_seed
    from tmax.models.scripted_server import scripted_server, sequence
    from tmax.tasks import read_task

    if _available("bwrap"):
        pytest.skip(_available("bwrap"))
    task = FIXTURE_TASKS / "count-error-lines"
    jobs = tmp_path / "jobs"
    with scripted_server(sequence(["I give up."])) as server:
        args = ["eval", "run", str(task), "--base-url", server.base_url, "--model", "m"]
        args += ["--backend", "bwrap", "--runs", "2", "--jobs-dir", str(jobs)]
        assert main(args + ([] if seed is None else ["--seed", str(seed)])) == 0
    asked = {request.get("seed") for request in server.requests}
    if seed is None:
        assert asked == {None}
    else:
        name = read_task(task).name
        first_calls = {derive_seed(trial_seed(seed, run, name), 0) for run in (0, 1)}
        assert len(first_calls) == 2 and first_calls <= asked and None not in asked
