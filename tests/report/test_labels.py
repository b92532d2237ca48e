"""Released Harbor jobs, named by run and dataset, land in the paper's cells through a
label map; values worked out by hand from ``RELEASED``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.report.conftest import write_harbor_job
from tmax.cli import main as tmax_main
from tmax.evaluate.metrics import read_job_records
from tmax.report import labels as labels_module
from tmax.report.labels import LabelMapError, build_label_map
from tmax.report.tables import load_paper_values

#: Three released jobs on Terminal-Bench 2.0 ("terminal-bench"), harness
#: "vanillux2-agent", each 2 tasks × 2 attempts (listing order = start order here):
#: - qwen35-9b (base 9B): build 1, 0; fix 0, 0 → runs 1/2, 0 → 25.0 ± 25.0
#: - qwen3.5-9b-tmax-step400 (TMAX-9B): build 1, 1; fix 1, 0 → runs 1, 1/2 → 75.0 ± 25.0
#: - swerl-qwen35-2b-step100 (TMAX-2B): build 0, 0; fix 1, infra → runs 1/2, 0
#:   → 25.0 ± 25.0 with 1 infra (population std, infra scored 0)
RELEASED = {
    "qwen35-9b": {"build": (1, 0), "fix": (0, 0)},
    "qwen3.5-9b-tmax-step400": {"build": (1, 1), "fix": (1, 0)},
    "swerl-qwen35-2b-step100": {"build": (0, 0), "fix": (1, "infra")},
}
LABELS = """\
models:
  qwen35-9b: Qwen3.5-9B
  "qwen3.5-9b-tmax-step*": Qwen3.5-9B
variants:
  "qwen3.5-9b-tmax-step*": tmax
"""
MAP_ARGS = [
    "--map-model", "swerl-qwen35-2b-*=qwen3.5-2b-tmax",
    "--map-benchmark", "terminal-bench=TB 2.0",
    "--map-harness", "vanillux2-agent=tmax",
]  # fmt: skip


@pytest.fixture
def released(tmp_path: Path) -> list[Path]:
    jobs = []
    for model, tasks in RELEASED.items():
        trials = {}
        for minute, (task, outcomes) in enumerate(tasks.items()):
            for attempt, outcome in enumerate(outcomes):
                name = f"{task}__{'AB'[attempt]}{model[:6]}"
                trials[name] = (f"1{attempt}:0{minute}", outcome)
        jobs.append(write_harbor_job(tmp_path / "released" / model, model=model, trials=trials))
    return jobs


def tabulate(jobs: list[Path], out: Path, *args: str) -> dict[str, dict[tuple[str, str], str]]:
    code = tmax_main(
        ["report", "tables", "--jobs", *map(str, jobs), "--out", str(out), "--formats", "csv",
         "md", *args]
    )  # fmt: skip
    assert code == 0
    return {
        name: {
            (r["row"], r["column"]): r["text"] for r in csv.DictReader((out / f"{name}.csv").open())
        }
        for name in ("cross_size", "cross_size_vs_paper", "evaluations")
    }


def test_without_a_map_released_runs_fill_rows_of_their_own(
    released: list[Path], tmp_path: Path
) -> None:
    tables = tabulate(released, tmp_path / "out")
    size = tables["cross_size"]
    assert size[("qwen3.5-9b", "terminal-bench-2.0/tmax")] == "not run"
    assert size[("qwen35-9b", "terminal-bench/base")] == "25.0 ± 25.0"
    assert ("qwen35-9b/terminal-bench/base", "difference") in tables["cross_size_vs_paper"]
    assert tables["cross_size_vs_paper"][("qwen35-9b/terminal-bench/base", "paper")] == (
        "not reported"
    )


def test_a_label_map_puts_released_runs_in_the_papers_cells(
    released: list[Path], tmp_path: Path
) -> None:
    labels = tmp_path / "labels.yaml"
    labels.write_text(LABELS)
    tables = tabulate(released, tmp_path / "out", "--labels", str(labels), *MAP_ARGS)
    size = tables["cross_size"]
    assert size[("qwen3.5-9b", "terminal-bench-2.0/base")] == "25.0 ± 25.0"
    assert size[("qwen3.5-9b", "terminal-bench-2.0/tmax")] == "75.0 ± 25.0"
    assert size[("qwen3.5-2b", "terminal-bench-2.0/tmax")] == "25.0 ± 25.0"
    assert size[("qwen3.5-4b", "terminal-bench-2.0/tmax")] == "not run"
    assert not any(row.startswith(("qwen35", "swerl")) for row, _ in size)
    versus = tables["cross_size_vs_paper"]
    # the paper's Terminal-Bench 2.0 cells: 9B 21.1 → 27.2, 2B (TMAX) 2.9
    assert versus[("qwen3.5-9b/terminal-bench-2.0/base", "paper")] == "21.1"
    assert versus[("qwen3.5-9b/terminal-bench-2.0/base", "difference")] == "+3.9"
    assert versus[("qwen3.5-9b/terminal-bench-2.0/tmax", "difference")] == "+47.8"
    assert versus[("qwen3.5-2b/terminal-bench-2.0/tmax", "difference")] == "+22.1"
    assert versus[("qwen3.5-2b/terminal-bench-2.0/base", "difference")] == "not run here"
    evaluations = (tmp_path / "out" / "evaluations.md").read_text()
    assert "| qwen3.5-2b-tmax · terminal-bench-2.0 · tmax | 25.0 ± 25.0 (n=2×2, 1 infra) |" in (
        evaluations
    )
    assert "statistics: paper" in evaluations


def test_the_command_line_wins_over_the_file(released: list[Path], tmp_path: Path) -> None:
    labels = tmp_path / "labels.yaml"
    labels.write_text(LABELS + "  qwen35-9b: tmax\n")  # (variants) base 9B as TMAX
    args = [*MAP_ARGS, "--map-variant", "qwen35-9b=base", "--map-model", "qwen35-9b=qwen3.5-4b"]
    size = tabulate(released, tmp_path / "out", "--labels", str(labels), *args)["cross_size"]
    assert size[("qwen3.5-4b", "terminal-bench-2.0/base")] == "25.0 ± 25.0"
    assert size[("qwen3.5-9b", "terminal-bench-2.0/base")] == "not run"


def test_regex_sources_and_printed_labels_as_targets() -> None:
    label_map = build_label_map(
        load_paper_values(),
        entries={
            "models": [r"re:swerl-qwen35-(2b|4b)-step\d+=Qwen3.5-4B-TMAX"],
            "benchmarks": ["terminal-bench@2.0=tb 2.0"],
        },
    )
    assert label_map.lookup("models", "swerl-qwen35-2b-step100") == "qwen3.5-4b-tmax"
    assert label_map.lookup("models", "swerl-qwen35-2b-step100-extra") is None  # full match
    assert label_map.lookup("benchmarks", "terminal-bench@2.0") == "terminal-bench-2.0"
    assert label_map.lookup("harnesses", "vanillux2-agent") is None


@pytest.mark.parametrize(
    ("file_text", "entries", "message"),
    [
        ("model: {a: Qwen3.5-9B}\n", {}, "unknown section(s) 'model'; allowed: models, variants"),
        ("", {"models": ["run=Qwen3.5-8B"]}, "paper's models: qwen3.5-2b (Qwen3.5-2B)"),
        ("", {"variants": ["run=rl"]},
         "not one of the paper's variants: base, sft (SFT), control (SFT control), tmax"),
        ("", {"benchmarks": ["tb=TB 3"]}, "terminal-bench-2.0 (TB 2.0)"),
        ("", {"harnesses": ["codex=codex"]}, "harnesses: tmax (TMAX), openhands (OpenHands)"),
        ("", {"models": ["no-equals-sign"]}, "'no-equals-sign': expected SOURCE=TARGET"),
        ("", {"models": ["re:(=qwen3.5-9b"]}, "is not a valid regex"),
        ("models: [a, b]\n", {}, "models must map names to targets"),
    ],
)  # fmt: skip
def test_bad_label_maps_name_the_entry_and_the_valid_labels(
    tmp_path: Path, file_text: str, entries: dict, message: str
) -> None:
    labels = tmp_path / "labels.yaml"
    labels.write_text(file_text)
    with pytest.raises(LabelMapError) as error:
        build_label_map(load_paper_values(), file=labels, entries=entries)
    assert message in str(error.value)


def test_a_bad_map_is_a_clean_cli_error(released: list[Path], tmp_path: Path, capsys) -> None:
    code = tmax_main(
        ["report", "tables", "--jobs", str(released[0]), "--out", str(tmp_path / "out"),
         "--map-model", "qwen35-9b=Qwen3.5-10B"]
    )  # fmt: skip
    assert code == 2
    assert "'Qwen3.5-10B' (for 'qwen35-9b') is not one of the paper's models" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


def test_two_runs_mapped_onto_one_cell_are_refused(released: list[Path]) -> None:
    label_map = build_label_map(
        load_paper_values(),
        entries={"models": ["qwen35-9b=qwen3.5-9b-tmax", "*step400=qwen3.5-9b-tmax"]},
    )
    with pytest.raises(LabelMapError, match=r"puts 2 settings on one cell qwen3\.5-9b-tmax"):
        label_map.apply(read_job_records(released))


def test_a_rule_that_matches_nothing_is_logged(released: list[Path], caplog) -> None:
    label_map = build_label_map(load_paper_values(), entries={"models": ["qwen9*=qwen3.5-9b"]})
    label_map.apply(read_job_records(released))
    assert "qwen9*=qwen3.5-9b matches no model in the jobs" in caplog.text


def test_the_packaged_map_of_the_releases_own_jobs() -> None:
    """``data/released_labels.yaml`` names the paper's cells for the run names of the
    TMAX release's Terminal-Bench 2.0 jobs (hamishivi/tmax evaluation_assets/daytona)."""
    path = Path(labels_module.__file__).parent / "data" / "released_labels.yaml"
    label_map = build_label_map(load_paper_values(), file=path)
    expected = {
        "qwen35-2b": "qwen3.5-2b",
        "qwen36-27b": "qwen3.6-27b",
        "swerl-qwen35-2b-step100": "qwen3.5-2b-tmax",
        "swerl-qwen35-4b-step200": "qwen3.5-4b-tmax",
        "swerl-step200": "qwen3.5-9b-tmax",
        "swerl-qwen35-27b-tmax-step160": "qwen3.6-27b-tmax",
    }
    assert {name: label_map.lookup("models", name) for name in expected} == expected
    assert label_map.lookup("benchmarks", "terminal-bench") == "terminal-bench-2.0"
    assert label_map.lookup("harnesses", "vanillux2-agent") == "tmax"
