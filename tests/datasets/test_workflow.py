"""`prepare_dataset` in Snakemake: a configured local source becomes
results/datasets/<name>/ (manifest, tasks, report), and editing the source's entry
reruns exactly that conversion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.datasets.adapter_support import DATASET_FIXTURES
from tests.workflow.test_snakemake import copy_workflow, edit_config, planned_jobs, snakemake

pytestmark = pytest.mark.slow

TARGET = "results/datasets/tb-fixture/manifest.json"


def add_source(config: dict, **overrides: object) -> None:
    source = {
        "name": "tb-fixture",
        "layout": "terminal_bench_v1",
        "path": str(DATASET_FIXTURES / "terminal_bench_v1"),
        **overrides,
    }
    config["datasets"] = {"sample": 250, "sources": [source]}


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("datasets-workflow"), small=False)
    edit_config(workdir, add_source)
    return workdir


def test_prepare_dataset_runs_from_the_config(workflow: Path) -> None:
    assert planned_jobs(workflow, TARGET) == {"prepare_dataset": 1}
    snakemake(workflow, TARGET)
    manifest = json.loads((workflow / TARGET).read_text())
    assert manifest["dataset"] == "tb-fixture" and manifest["sample"] == 250
    assert [t["id"] for t in manifest["tasks"]] == ["sum-numbers"]
    assert (workflow / "results/datasets/tb-fixture/tasks/sum-numbers/tests/test.sh").is_file()
    assert (
        "converted: 1, skipped: 1"
        in (workflow / "results/datasets/tb-fixture/report.md").read_text()
    )
    assert (workflow / "results/logs/datasets/tb-fixture/prepare.log").stat().st_size > 0
    assert (workflow / "results/benchmarks/datasets/tb-fixture/prepare.tsv").is_file()
    assert planned_jobs(workflow, TARGET) == {}


def test_editing_the_source_entry_reruns_the_conversion(workflow: Path) -> None:
    if not (workflow / TARGET).exists():
        snakemake(workflow, TARGET)
    edit_config(workflow, lambda config: add_source(config, sample=1))
    assert planned_jobs(workflow, TARGET) == {"prepare_dataset": 1}
