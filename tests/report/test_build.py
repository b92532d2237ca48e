"""Table values from fixture trial directories equal the values worked out by hand
(tests/report/conftest.py, SCENARIO)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT
from tests.report.conftest import (
    DECONTAM_REPORT,
    REMOVED,
    TASKS_REPORT,
    write_harbor_job,
    write_scenario,
)
from tmax.cli import main as tmax_main
from tmax.report.build import build_tables, control_verdicts
from tmax.report.ingest import (
    Measurement,
    measure,
    records_from_jobs,
    records_from_runs,
    split_variant,
)
from tmax.report.stage import table_stems, write_report_tables
from tmax.report.tables import Table, load_paper_values, round_half_up

HARBOR_JOBS = ROOT / "tests" / "fixtures" / "harbor_jobs"


def texts(table: Table) -> dict[tuple[str, str], str]:
    """Every cell as printed in Markdown and LaTeX (value, ± std, n, infra)."""
    return {
        (row, column): table.cell(row, column).text
        for row in table.rows
        for column in table.columns
    }


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("qwen3.5-9b-tmax", ("qwen3.5-9b", "tmax")),
        ("tiny-qwen3-sft", ("tiny-qwen3", "sft")),
        ("tiny-qwen3-control", ("tiny-qwen3", "control")),
        ("qwen3.5-9b", ("qwen3.5-9b", "base")),
        ("tmax-qwen3-8b", ("tmax-qwen3-8b", "base")),
        ("-tmax", ("-tmax", "base")),
    ],
)
def test_split_variant(label: str, expected: tuple[str, str]) -> None:
    assert split_variant(label) == expected


def test_infrastructure_errors_score_zero_and_are_counted(run_files: list[Path]) -> None:
    by_variant = {m.variant: m for m in measure(records_from_runs(run_files))}
    base = by_variant["base"]
    assert (base.model, base.benchmark, base.harness) == ("qwen3.5-9b", "tb-lite", "tmax")
    assert base.statistics == "paper"
    assert base.pass_at_1 == pytest.approx(50.0)
    assert base.pass_at_1_std == pytest.approx(100 / 6)  # population std of 1/3, 2/3
    assert (base.n_tasks, base.n_runs, base.n_trials, base.n_infra) == (3, 2, 6, 1)
    # per task (successes, scored attempts): the infra error a scored 0, the
    # budget-exhausted b a 0
    assert base.per_task == {"a": (2, 2), "b": (0, 2), "c": (1, 2)}
    trained = by_variant["tmax"]
    assert trained.pass_at_1 == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert trained.n_infra == 0
    assert trained.per_task == {"a": (2, 2), "b": (2, 2), "c": (1, 2)}


def test_the_other_convention_leaves_infrastructure_errors_out(run_files: list[Path]) -> None:
    measured = measure(records_from_runs(run_files), statistics="exclude_infra")
    by_variant = {m.variant: m for m in measured}
    base = by_variant["base"]
    assert base.statistics == "exclude_infra"
    assert base.pass_at_1 == pytest.approx(100 * (1 / 2 + 2 / 3) / 2)
    assert base.pass_at_1_std == pytest.approx(100 * (1 / 6) / 2**0.5)  # sample std
    assert base.n_infra == 1
    assert base.per_task["c"] == (1, 1)  # the infra error left out
    assert by_variant["tmax"].pass_at_1_std == pytest.approx(100 * (1 / 3) / 2**0.5)


def test_tables_from_fixture_trials(run_files: list[Path]) -> None:
    tables = build_tables(
        measure(records_from_runs(run_files)),
        load_paper_values(),
        tasks_report=TASKS_REPORT,
        decontam_report=DECONTAM_REPORT,
        removed=REMOVED,
    )
    size = texts(tables["cross_size"])
    assert size[("qwen3.5-9b", "tb-lite/base")] == "50.0 ± 16.7 (n=3×2, 1 infra)"
    assert size[("qwen3.5-9b", "tb-lite/tmax")] == "83.3 ± 16.7 (n=3×2)"
    assert size[("qwen3.5-9b", "terminal-bench-2.0/base")] == "not run"
    assert size[("qwen3.5-2b", "terminal-bench-2.0/tmax")] == "not run"

    harness = texts(tables["cross_harness"])  # reference model: the first seen
    assert harness[("tmax", "tb-lite/base")] == "50.0 ± 16.7 (n=3×2, 1 infra)"
    assert harness[("openhands", "tb-lite/base")] == "not run"

    ablation = texts(tables["dataset_ablation"])
    assert ablation[("none", "tb-lite")] == "50.0 ± 16.7 (n=3×2, 1 infra)"
    assert ablation[("tmax-15k", "tb-lite")] == "83.3 ± 16.7 (n=3×2)"
    assert ablation[("swe-smith", "tb-lite")] == "not run"

    data = texts(tables["dataset_comparison"])
    assert data[("tmax-15k", "size")] == "37"  # kept after decontamination
    assert data[("tmax-15k", "domain_balance")] == "0.988 (n=40)"
    assert data[("tmax-15k", "pass_at_8")] == "not run"  # no held-out evaluation here
    assert data[("tmax-15k", "contamination_13gram")] == "0.0 (n=38)"

    contamination = texts(tables["contamination"])
    assert contamination[("tmax-15k", "tb-lite/13")] == "0.0 (n=38)"
    assert contamination[("tmax-15k", "tb-lite/8")] == "2.6 (n=38)"
    assert contamination[("tmax-15k", "terminal-bench-2.0/13")].startswith("not checked")
    # 13-grams first, then 8-grams; the benchmarks in the same order within each
    assert tables["contamination"].columns == [
        "terminal-bench-2.0/13", "tb-lite/13", "terminal-bench-2.0/8", "tb-lite/8",
    ]  # fmt: skip

    evaluations = texts(tables["evaluations"])
    assert evaluations[("qwen3.5-9b/tb-lite/tmax", "pass_at_1")] == ("50.0 ± 16.7 (n=3×2, 1 infra)")
    # every pass@1 table names its convention, in its notes and its CSV column
    for name in ("cross_size", "cross_harness", "dataset_ablation", "evaluations"):
        assert tables[name].statistics == "paper"
        assert any(note.startswith("statistics: paper") for note in tables[name].notes)


def test_one_switch_changes_every_table(run_files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "tables"
    write_report_tables(
        records_from_runs(run_files),
        out,
        formats=["csv", "md"],
        combined=tmp_path / "tables.md",
        statistics="exclude_infra",
    )
    rows = list(csv.DictReader((out / "cross_size.csv").open()))
    cell = next(r for r in rows if (r["row"], r["column"]) == ("qwen3.5-9b", "tb-lite/base"))
    assert cell["text"] == "58.3 ± 11.8"
    assert {r["statistics"] for r in rows} == {"exclude_infra"}
    assert "statistics: exclude_infra" in (out / "cross_size.md").read_text()
    assert "statistics: exclude_infra" in (out / "cross_size_vs_paper.md").read_text()
    assert "statistics: exclude_infra" in (tmp_path / "tables.md").read_text()


def test_reproduced_vs_paper_files(run_files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "tables"
    write_report_tables(
        records_from_runs(run_files), out, formats=["csv", "md"], combined=tmp_path / "tables.md"
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{stem}.{fmt}" for stem in table_stems() for fmt in ("csv", "md")
    )
    rows = {
        (r["row"], r["column"]): r["text"]
        for r in csv.DictReader((out / "cross_size_vs_paper.csv").open())
    }
    assert rows[("qwen3.5-9b/tb-lite/base", "paper")] == "41.9"
    assert rows[("qwen3.5-9b/tb-lite/base", "reproduced")] == "50.0 ± 16.7"
    assert rows[("qwen3.5-9b/tb-lite/base", "difference")] == "+8.1"
    assert rows[("qwen3.5-9b/tb-lite/tmax", "difference")] == "+26.1"
    assert rows[("qwen3.5-2b/terminal-bench-2.0/base", "reproduced")] == "not run"
    # without the data-side reports their tables say so rather than showing 0
    data = {
        (r["row"], r["column"]): r["text"]
        for r in csv.DictReader((out / "dataset_comparison.csv").open())
    }
    assert data[("tmax-15k", "size")] == "not run"
    assert "## Cross-size" in (tmp_path / "tables.md").read_text()


def test_harbor_job_folders_tabulate_like_our_runs(tmp_path: Path) -> None:
    """Harbor's own job, attempts in listing order (fixture README): hello-world 0
    (agent timeout, ``Zx9KmP2``) then 1, fix-permissions 1 (``M4nB8vC``) then an
    environment error: each run 1/2 with the error scored 0."""
    records = records_from_jobs([HARBOR_JOBS / "2026-01-05__12-00-00"])
    (only,) = measure(records)
    assert (only.model, only.benchmark, only.harness) == ("qwen3-8b", "hello-bench", "terminus-2")
    assert (only.pass_at_1, only.pass_at_1_std) == (50.0, 0.0)
    assert (only.n_tasks, only.n_runs, only.n_infra) == (2, 2, 1)
    # exclude_infra, runs by start time: run 0 = hello-world 1 alone, run 1 = 0 and 1
    records = records_from_jobs([HARBOR_JOBS / "2026-01-05__12-00-00"], statistics="exclude_infra")
    (other,) = measure(records, statistics="exclude_infra")
    assert other.pass_at_1 == pytest.approx(75.0)
    assert other.pass_at_1_std == pytest.approx(25 * 2**0.5)


def test_cli_tabulates_job_folders(tmp_path: Path, capsys) -> None:
    out = tmp_path / "tables"
    code = tmax_main(
        [
            "report",
            "tables",
            "--jobs",
            str(HARBOR_JOBS / "2026-01-05__12-00-00"),
            str(HARBOR_JOBS / "tmax-run"),
            "--out",
            str(out),
            "--formats",
            "csv",
        ]
    )
    assert code == 0
    assert str(out) in capsys.readouterr().out
    rows = {
        r["row"]: r["text"]
        for r in csv.DictReader((out / "evaluations.csv").open())
        if r["column"] == "pass_at_1"
    }
    assert rows == {
        "qwen3-8b/hello-bench/terminus-2": "50.0 ± 0.0",
        # fixture README: run 0 = 2/2, run 1 = 1/2, run 2 = 1/2 (infra scored 0);
        # population std = sqrt(((1/3)² + 2·(1/6)²)/3) = √2/6
        "tmax-qwen3-8b/tmax-heldout/tmax": "66.7 ± 23.6",
    }
    assert not (out / "evaluations.md").exists()
    # the trials the tables came from, one row each, labelled as the tables label them
    trials = pq.read_table(out / "evaluations.parquet").to_pylist()
    assert len(trials) == sum(1 for _ in HARBOR_JOBS.glob("*/*/result.json"))
    assert {(t["model"], t["variant"], t["benchmark"]) for t in trials} == {
        ("qwen3-8b", "base", "hello-bench"), ("tmax-qwen3-8b", "base", "tmax-heldout"),
    }  # fmt: skip


def test_cli_reports_an_unreadable_job_as_an_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "job" / "trial"
    bad.mkdir(parents=True)
    (bad / "result.json").write_text("{not json")
    code = tmax_main(["report", "tables", "--jobs", str(tmp_path / "job"), "--out", str(tmp_path)])
    assert code == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.md"))  # nothing half-written


def test_a_setting_whose_trials_all_failed_for_infrastructure_reasons(tmp_path: Path) -> None:
    """Scored 0 under the paper's convention; left out, nothing remains to score."""
    scenario = {("m", "tb-lite", "tmax"): {"a": ["infra", "infra"], "b": ["infra", "infra"]}}
    records = records_from_runs(write_scenario(tmp_path, scenario))
    (only,) = measure(records)
    assert (only.pass_at_1, only.pass_at_1_std, only.n_infra) == (0.0, 0.0, 4)
    table = build_tables([only], load_paper_values())["evaluations"]
    assert texts(table) == {("m/tb-lite/tmax", "pass_at_1"): "0.0 ± 0.0 (n=2×2, 4 infra)"}
    (left_out,) = measure(records, statistics="exclude_infra")
    assert left_out.pass_at_1 is None
    table = build_tables([left_out], load_paper_values())["evaluations"]
    assert texts(table) == {("m/tb-lite/tmax", "pass_at_1"): "no completed trial"}


def test_the_papers_runs_follow_the_listing_of_a_harbor_job(tmp_path: Path) -> None:
    """t1's attempts sort by name in the reverse of their start order: the listing
    gives runs (t1 1, t2 1) and (0, 0), 50 ± 50; the start order (0, 1) and (1, 0),
    50 ± 0. The paper's ± depends on that order; its mean does not."""
    job = write_harbor_job(
        tmp_path / "job",
        model="m",
        trials={
            "t1__A000001": ("10:05", 1),
            "t1__B000002": ("10:00", 0),
            "t2__A000003": ("10:01", 1),
            "t2__B000004": ("10:06", 0),
        },
    )
    (listed,) = measure(records_from_jobs([job]))
    assert (listed.pass_at_1, listed.pass_at_1_std) == (50.0, 50.0)
    (started,) = measure(
        records_from_jobs([job], statistics="exclude_infra"), statistics="exclude_infra"
    )
    assert (started.pass_at_1, started.pass_at_1_std) == (50.0, 0.0)


@pytest.mark.parametrize("statistics", ["paper", "exclude_infra"])
def test_tables_and_metrics_agree_on_the_same_jobs(tmp_path: Path, statistics: str) -> None:
    jobs = [str(HARBOR_JOBS / "2026-01-05__12-00-00"), str(HARBOR_JOBS / "tmax-run")]
    metrics_json = tmp_path / "metrics.json"
    assert (
        tmax_main(
            ["eval", "metrics", *jobs, "--json", str(metrics_json), "--statistics", statistics]
        )
        == 0
    )
    out = tmp_path / "tables"
    assert (
        tmax_main(
            [
                "report",
                "tables",
                "--jobs",
                *jobs,
                "--out",
                str(out),
                "--formats",
                "csv",
                "--statistics",
                statistics,
            ]
        )
        == 0
    )
    metrics = json.loads(metrics_json.read_text())
    assert metrics["statistics"] == statistics
    tables = {r["row"]: r for r in csv.DictReader((out / "evaluations.csv").open())}
    for group in metrics["groups"]:
        row = tables[f"{group['model']}/{group['benchmark']}/{group['harness']}"]
        assert row["statistics"] == statistics
        assert float(row["value"]) == round_half_up(group["pass_at_1_mean"], 1)
        assert float(row["std"]) == round_half_up(group["pass_at_1_std"], 1)
        assert int(row["n_runs"]) == group["n_runs"]


def _held_out(
    variant: str, harness: str, pass_at_1: float | None, solved: int | None = None
) -> Measurement:
    """10 held-out tasks × 2 runs; ``solved`` tasks passed twice, the rest never (no
    per-task counts when None)."""
    per_task = {} if solved is None else {f"t{i}": (2 * (i < solved), 2) for i in range(10)}
    return Measurement("tiny", variant, "heldout", harness, pass_at_1, 0.0, 10, 2, 20, 0,
                       per_task=per_task)  # fmt: skip


def test_the_report_credits_rl_only_with_a_gain_beyond_the_noise() -> None:
    measurements = [
        # RL solves 7 tasks where the control solves 1 and SFT 2: a resolved gain
        _held_out("sft", "tmax", 20.0, 2), _held_out("control", "tmax", 10.0, 1),
        _held_out("tmax", "tmax", 70.0, 7),
        # one task more than the control (10 points in the means): not resolved
        _held_out("sft", "terminus-2", 30.0, 3), _held_out("control", "terminus-2", 20.0, 2),
        _held_out("tmax", "terminus-2", 30.0, 3),
        _held_out("tmax", "openhands", 5.0, 1),  # no baseline measured: no verdict
    ]  # fmt: skip
    notes = control_verdicts(measurements)
    assert len(notes) == 4 and not any("openhands" in note for note in notes)
    rl_control, rl_sft = (n for n in notes if "under tmax" in n)
    assert rl_control.startswith(
        "RL beats the SFT control trained for the same learner tokens on heldout under tmax "
        "(70.0 vs 10.0): +60.0 points (95% CI"
    )
    assert rl_control.endswith("10 paired tasks): a gain that can be credited to RL.")
    assert rl_sft.startswith("RL beats the SFT model RL started from on heldout under tmax")
    control_t2, sft_t2 = (n for n in notes if "terminus-2" in n)
    assert control_t2.startswith(
        "RL and the SFT control trained for the same learner tokens are not told apart on "
        "heldout under terminus-2 (30.0 vs 20.0): RL +10.0 points"
    )
    assert control_t2.endswith("the interval holds 0; no gain can be credited to RL.")
    assert "not told apart" in sft_t2 and "+0.0 points" in sft_t2


def test_the_report_says_where_a_baseline_beats_rl() -> None:
    behind = control_verdicts(
        [_held_out("control", "tmax", 80.0, 8), _held_out("tmax", "tmax", 10.0, 1)]
    )
    assert behind == [
        "The SFT control trained for the same learner tokens beats RL on heldout under tmax "
        "(10.0 vs 80.0): RL -70.0 points (95% CI -100.0 to -40.0, 10 paired tasks)."
    ]
    # without per-task counts (hand-made measurements) the means are compared, and said so
    means = control_verdicts([_held_out("control", "tmax", 30.0), _held_out("tmax", "tmax", 45.0)])
    assert means == [
        "RL is above the SFT control trained for the same learner tokens on heldout under "
        "tmax (45.0 vs 30.0), by the means only (no paired tasks)."
    ]


def test_the_report_opens_with_what_rl_did_and_says_so_when_it_shows_no_gain() -> None:
    from tmax.report.stage import rl_headline

    gain = rl_headline([_held_out("sft", "tmax", 20.0, 2), _held_out("control", "tmax", 10.0, 1),
                        _held_out("tmax", "tmax", 70.0, 7)])  # fmt: skip
    assert gain[0] == "## What RL did"
    assert any(line.startswith("- tiny: RL beats the SFT control") for line in gain)
    assert not any("shows no gain" in line for line in gain)
    level = rl_headline([_held_out("control", "tmax", 30.0, 3), _held_out("tmax", "tmax", 40.0, 4)])
    assert any("not told apart" in line for line in level)
    assert level[-1].startswith("RL shows no gain over the SFT control beyond the noise here")
    behind = rl_headline([_held_out("control", "tmax", 80.0, 8), _held_out("tmax", "tmax", 1.0, 1)])
    assert behind[-1].startswith("RL shows no gain")  # a loss is no gain either
    assert rl_headline([_held_out("sft", "tmax", 20.0, 2)])[-1] == (
        "No RL model was evaluated, so there is no gain to report."
    )
