"""Prior datasets in the dataset-comparison table (from fixture labels and difficulty
files), and the two measuring rules under Snakemake on a fixture manifest."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.datasets.test_labels import INSTRUCTIONS, labeller, write_manifest
from tests.report.conftest import write_scenario
from tests.workflow.test_snakemake import copy_workflow, edit_config, planned_jobs, snakemake
from tmax.config import schema
from tmax.models.scripted_server import scripted_server
from tmax.report.ingest import records_from_runs
from tmax.report.stage import write_report_tables


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def labels_file(domain: float | None, skill_type: float | None, **extra: Any) -> dict[str, Any]:
    balance = {"domain": domain, "skill_type": skill_type, "n_labelled": 40, "n_unlabelled": 2}
    return {"status": "labelled", "reason": None, "tasks": [], "balance": balance, **extra}


def manifest_file(n_converted: int, n_listed: int, has_environments: bool) -> dict[str, Any]:
    tasks = [
        {"id": f"t{i}", "instruction": "x", "path": f"tasks/t{i}" if i < n_converted else None}
        for i in range(n_listed)
    ]
    return {"dataset": "d", "has_environments": has_environments, "tasks": tasks, "skipped": []}


MEASURED = {
    "status": "measured",
    "reason": None,
    "model": "flash",
    "harness": "tmax",
    "n_tasks": 20,
    "n_runs": 8,
    "n_infra": 3,
    "pass_at_1": 91.25,
    "pass_at_1_tasks": 20,
    "pass_at_8": 95.0,
    "pass_at_8_tasks": 19,
}
DECONTAM = {
    "summary": [
        {"benchmark": "tb-lite", "n": 13, "tasks": 30, "tasks_flagged_pct": 10.0},
        {"benchmark": "terminal-bench-2.0", "n": 13, "tasks": 30, "tasks_flagged_pct": 20.0},
        {"benchmark": "tb-lite", "n": 8, "tasks": 30, "tasks_flagged_pct": 50.0},
    ]
}


def fixture_datasets(root: Path) -> list[str]:
    """endless-terminals: everything measured; terminaltraj: trajectories only,
    nothing labelled yet; cli-gym: labelling off, no reference model, 13-grams
    checked; termigen: configured but never run."""
    write_json(root / "endless-terminals/manifest.json", manifest_file(20, 22, True))
    write_json(root / "endless-terminals/labels.json", labels_file(0.91234, 0.55555))
    write_json(root / "endless-terminals/difficulty.json", MEASURED)
    write_json(root / "terminaltraj/manifest.json", manifest_file(0, 50, False))
    no_env = {"status": "no environments", "reason": "no environments: trajectories only"}
    write_json(root / "terminaltraj/difficulty.json", no_env)
    write_json(root / "cli-gym/manifest.json", manifest_file(12, 12, True))
    off = {"status": "off", "reason": "labelling is off: labelling.base_url is null"}
    write_json(root / "cli-gym/labels.json", labels_file(None, None, **off))
    unmeasured = {"status": "not measured", "reason": "no reference model: set difficulty.model"}
    write_json(root / "cli-gym/difficulty.json", unmeasured)
    write_json(root / "cli-gym/decontam.json", DECONTAM)
    return ["endless-terminals", "terminaltraj", "cli-gym", "termigen"]


def table_texts(path: Path) -> dict[tuple[str, str], str]:
    return {(r["row"], r["column"]): r["text"] for r in csv.DictReader(path.open())}


def test_each_configured_dataset_gets_its_row(tmp_path: Path) -> None:
    datasets = tmp_path / "results" / "datasets"
    names = fixture_datasets(datasets)
    runs = write_scenario(tmp_path / "results")
    out = tmp_path / "tables"
    write_report_tables(
        records_from_runs(runs),
        out,
        formats=["csv", "md"],
        datasets=names,
        datasets_root=datasets,
    )
    cells = table_texts(out / "dataset_comparison.csv")
    endless = {column: cells[("endless-terminals", column)] for column in (
        "size", "domain_balance", "skill_type_balance", "pass_at_1", "pass_at_8",
        "contamination_13gram",
    )}  # fmt: skip
    assert endless == {
        "size": "20",  # converted tasks, not the 22 listed
        "domain_balance": "0.912",
        "skill_type_balance": "0.556",
        "pass_at_1": "91.3",
        "pass_at_8": "95.0",
        "contamination_13gram": "not checked",
    }
    assert cells[("terminaltraj", "size")] == "50"  # trajectories, with a note
    assert cells[("terminaltraj", "domain_balance")] == "not run"
    assert cells[("terminaltraj", "pass_at_1")] == "no environments"
    assert cells[("cli-gym", "domain_balance")] == "labelling off"
    assert cells[("cli-gym", "pass_at_8")] == "no reference model"
    assert cells[("cli-gym", "contamination_13gram")] == "20.0"  # the worst 13-gram
    assert all(cells[("termigen", c)] == "not run" for c in ("size", "pass_at_1"))
    # our generated tasks keep their row; the paper's rows keep their places
    assert cells[("tmax-15k", "size")] == "not run"

    page = (out / "dataset_comparison.md").read_text()
    assert "terminaltraj: size counts trajectories" in page
    assert "endless-terminals: 2 task(s) left unlabelled" in page
    assert (  # pandas pads the Markdown columns: compare with single spaces
        "| Endless Terminals | 20 | 0.912 (n=40) | 0.556 (n=40) | 91.3 (n=20×8, 3 infra) | "
        "95.0 (n=19×8, 3 infra) | not checked |"
    ) in re.sub(r" {2,}", " ", page)

    versus = table_texts(out / "dataset_comparison_vs_paper.csv")
    assert versus[("endless-terminals/pass_at_1", "paper")] == "92.0"
    assert versus[("endless-terminals/pass_at_1", "difference")] == "-0.7"


def test_the_released_tmax_15k_takes_the_papers_row(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    write_json(datasets / "tmax-15k/manifest.json", manifest_file(30, 30, True))
    out = tmp_path / "tables"
    write_report_tables([], out, formats=["csv"], datasets=["tmax-15k"], datasets_root=datasets)
    cells = table_texts(out / "dataset_comparison.csv")
    assert cells[("tmax-15k", "size")] == "30"
    assert ("tmax-generated", "size") in cells  # our generated tasks moved aside


def test_without_configured_datasets_the_table_is_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "tables"
    write_report_tables([], out, formats=["csv"])
    rows = {row for row, _ in table_texts(out / "dataset_comparison.csv")}
    assert rows == {"tmax-15k", "endless-terminals"}


# --- the rules under Snakemake -------------------------------------------------------------------

MEASURE_RULES = ("label_dataset", "dataset_difficulty")
TARGETS = ["results/datasets/prior/labels.json", "results/datasets/prior/difficulty.json"]


def measuring_workflow(tmp_path: Path) -> Path:
    """A workflow copy with a fixture manifest (trajectories only) in place of the
    adapters' output, and the sandbox toolbox marked as built (no trial runs here)."""
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf", small=False)
    stub = workdir / "rules" / "datasets.smk"
    if 'include: "rules/datasets.smk"' in (workdir / "Snakefile").read_text() and not stub.exists():
        stub.write_text("# the dataset adapters' rules are not in this checkout yet\n")
    write_manifest(workdir / "results" / "datasets", has_environments=False)
    write_json(workdir / "results" / "images" / "toolbox.json", {"fixture": True})
    return workdir


@pytest.mark.slow
def test_rules_label_and_measure_a_fixture_manifest(tmp_path: Path) -> None:
    workdir = measuring_workflow(tmp_path)
    with scripted_server(labeller) as server:

        def use_labeller(config: dict[str, Any]) -> None:
            config["labelling"] = {"base_url": server.base_url, "model": "m", "max_retries": 1}

        edit_config(workdir, use_labeller)
        assert planned_jobs(workdir, *TARGETS) == {"label_dataset": 1, "dataset_difficulty": 1}
        snakemake(workdir, *TARGETS, "--allowed-rules", *MEASURE_RULES)
        # harden-ssh 1, fix-crash 2, write-poem 1 + 1 retry, our-task 1 (no tmax.json here)
        assert server.request_count == len(INSTRUCTIONS) + 2

        dataset = workdir / "results" / "datasets" / "prior"
        labels = json.loads((dataset / "labels.json").read_text())
        assert (labels["balance"]["n_labelled"], labels["balance"]["n_unlabelled"]) == (3, 1)
        difficulty = json.loads((dataset / "difficulty.json").read_text())
        assert difficulty["status"] == "no environments"
        assert (workdir / "results/logs/datasets/prior/labels.log").is_file()
        assert (workdir / "results/benchmarks/datasets/prior/difficulty.tsv").is_file()

        assert planned_jobs(workdir, *TARGETS) == {}
        snakemake(workdir, TARGETS[0], "--forcerun", "label_dataset")
        assert server.request_count == len(INSTRUCTIONS) + 2  # answered from the cache
        # a labeller setting that changes the labels reruns only the labelling
        edit_config(workdir, lambda c: c["labelling"].update({"max_retries": 2}))
        assert planned_jobs(workdir, *TARGETS) == {"label_dataset": 1}


@pytest.mark.slow
@pytest.mark.skipif(
    "datasets" not in schema()["properties"],
    reason="the adapters' `datasets` config section is not in the schema yet",
)
def test_the_report_asks_for_the_configured_datasets(tmp_path: Path) -> None:
    workdir = measuring_workflow(tmp_path)
    source = {"name": "prior", "layout": "harbor", "path": str(tmp_path)}
    edit_config(workdir, lambda c: c.update({"datasets": {"sources": [source]}}))
    result = snakemake(workdir, "-n", "results/report/tables.md", "--forceall")
    text = result.stdout + result.stderr
    for rule in ("label_dataset", "dataset_difficulty", "report_tables"):
        assert rule in text
