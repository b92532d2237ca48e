"""A prior dataset goes through the contamination check the generated tasks get: a
converted task that copies a benchmark's instruction is flagged against that item,
and the report reads as the generated tasks' does (the dataset table's 13-gram column)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.datasets.ablation_support import (
    BENCHMARK_SOURCES,
    CLEAN_TASK,
    LEAKED_ITEM,
    LEAKY_TASK,
    dataset_entry,
)
from tests.workflow.test_snakemake import copy_workflow, edit_config, planned_jobs, snakemake
from tmax.datasets.convert import prepare_dataset
from tmax.datasets.measure_stage import dataset_decontam
from tmax.decontam.stage import load_benchmark


def instruction_hits(report: dict[str, Any], n: int = 13) -> dict[str, set[str]]:
    """Task id -> the benchmark items its instruction shares an n-gram with."""
    hits: dict[str, set[str]] = {}
    for entry in report["flagged"][str(n)]:
        for match in entry["matches"]:
            if match["task_field"] == "instruction":
                hits.setdefault(entry["task_id"], set()).add(match["item"])
    return hits


def check(tmp_path: Path, manifest: Path) -> dict[str, Any]:
    benchmarks = []
    for name in ("tb-lite",):
        texts, info = tmp_path / f"{name}.parquet", tmp_path / f"{name}.json"
        load_benchmark(name, texts, info, work_dir=tmp_path, sources=BENCHMARK_SOURCES)
        benchmarks.append((name, texts, info))
    return dataset_decontam(
        manifest, benchmarks, tmp_path / "decontam.json", tmp_path / "decontam.md",
        ngram_sizes=[13, 8], boilerplate_min_items=10, workers=1, self_test_leaks=4,
    )  # fmt: skip


def test_a_task_copying_a_benchmark_instruction_is_flagged(tmp_path: Path) -> None:
    out = tmp_path / "results" / "datasets" / "fx"
    prepare_dataset(dataset_entry("fx", tmp_path / "source"), out, seed=0, sample=None)
    report = check(tmp_path, out / "manifest.json")

    assert report["dataset"] == "fx" and report["tasks"] == 2
    assert instruction_hits(report) == {LEAKY_TASK: {LEAKED_ITEM}}
    row = next(r for r in report["summary"] if (r["benchmark"], r["n"]) == ("tb-lite", 13))
    assert row["tasks_flagged"] >= 1 and row["tasks"] == 2
    assert all(outcome["passed"] for outcome in report["self_test"].values())
    assert json.loads((tmp_path / "decontam.json").read_text()) == report
    assert f"`{LEAKY_TASK}`" in (tmp_path / "decontam.md").read_text()
    assert CLEAN_TASK not in instruction_hits(report)


def test_a_trajectory_dataset_is_checked_on_its_instructions(tmp_path: Path) -> None:
    leaked = BENCHMARK_SOURCES["tb-lite"]["path"] + f"/{LEAKED_ITEM}/instruction.md"
    tasks = [
        {"id": "t-leak", "instruction": Path(leaked).read_text(), "path": None},
        {
            "id": "t-own",
            "instruction": "Rename every .jpeg file under /data to .jpg.",
            "path": None,
        },
    ]
    manifest = tmp_path / "traj" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps(
        {"dataset": "traj", "has_environments": False, "tasks": tasks, "skipped": []}
    ))  # fmt: skip
    report = check(tmp_path, manifest)
    assert report["task_texts"] == 2  # one instruction each, no files
    assert instruction_hits(report) == {"t-leak": {LEAKED_ITEM}}
    row = next(r for r in report["summary"] if (r["benchmark"], r["n"]) == ("tb-lite", 13))
    assert row["tasks_flagged_pct"] == 50.0


@pytest.mark.slow
def test_the_rule_checks_each_configured_dataset(tmp_path: Path) -> None:
    """`dataset_decontam` under Snakemake: the configured benchmarks and n, its report
    beside the manifest, and the report (and `rule all`) ask for it."""
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf", small=False)

    def configure(config: dict[str, Any]) -> None:
        config["datasets"] = {"sources": [dataset_entry("fx", tmp_path / "source")]}
        config["evaluation"]["sources"] = BENCHMARK_SOURCES

    edit_config(workdir, configure)
    target = "results/datasets/fx/decontam.json"
    assert planned_jobs(workdir, target) == {
        "prepare_dataset": 1,
        "decontam_benchmark": 2,
        "dataset_decontam_ngram": 2,
        "dataset_decontam": 1,
    }
    plan = planned_jobs(workdir)
    assert {"label_dataset", "dataset_difficulty", "dataset_decontam"} <= set(plan)
    snakemake(workdir, target)
    report = json.loads((workdir / target).read_text())
    assert report["ngram_sizes"] == [13, 8]
    assert set(report["benchmarks"]) == {"terminal-bench-2.0", "tb-lite"}
    assert instruction_hits(report) == {LEAKY_TASK: {LEAKED_ITEM}}
    assert (workdir / "results/datasets/fx/decontam.md").is_file()
    assert (workdir / "results/logs/datasets/fx/decontam/13.log").stat().st_size > 0
