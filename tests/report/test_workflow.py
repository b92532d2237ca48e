"""The report rules under Snakemake on fixture results in a temporary copy of the
workflow: no training or evaluation runs, only the three report jobs and the HTML
report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.report.conftest import markdown_rows, write_data_reports, write_scenario
from tests.workflow.test_snakemake import copy_workflow, edit_config, snakemake
from tmax.report.stage import FIGURE_NAMES

pytestmark = pytest.mark.slow

REPORT_RULES = ("report_tables", "report_figures", "report_provenance")

#: The embedded default's evaluation shape (SFT and TMAX variants of tiny-qwen3 on
#: held-out tasks), one harness, two runs; report.statistics "paper" (the default):
#:   SFT:  run 0 = 1/2, run 1 = 0/2 (b is an infra error, scored 0) -> 25.0 ± 25.0
#:   TMAX: run 0 = 2/2, run 1 = 1/2                                   -> 75.0 ± 25.0
#: (population std of two runs = half their difference).
SCENARIO = {
    ("tiny-qwen3-sft", "heldout", "tmax"): {"a": [1, 0], "b": [0, "infra"]},
    ("tiny-qwen3-tmax", "heldout", "tmax"): {"a": [1, 1], "b": [1, 0]},
}


def test_report_rules_build_tables_figures_provenance_and_html(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path, small=False)
    edit_config(
        workdir,
        lambda c: c["evaluation"].update(harnesses=["tmax"], runs=2, variants=["sft", "tmax"]),
    )
    results = workdir / "results"
    write_scenario(results, SCENARIO)
    write_data_reports(results)

    snakemake(workdir, "results/report/provenance.json", "--allowed-rules", *REPORT_RULES)

    tables = (results / "report" / "tables.md").read_text()
    assert [
        "TMAX", "not run", "not run", "25.0 ± 25.0 (n=2×2, 1 infra)", "75.0 ± 25.0 (n=2×2)"
    ] in markdown_rows(tables)  # fmt: skip
    assert "statistics: paper" in tables
    ablation = (results / "report" / "tables" / "dataset_ablation.md").read_text()
    assert ["none (before RL)", "not run", "not run", "25.0 ± 25.0 (n=2×2, 1 infra)"] in (
        markdown_rows(ablation)
    )
    comparison = (results / "report" / "tables" / "cross_harness_vs_paper.csv").read_text()
    assert "tmax/tb-lite/base,paper,41.9,41.9" in comparison
    for name in FIGURE_NAMES:
        for fmt in ("png", "pdf"):
            assert (results / "report" / "figures" / f"{name}.{fmt}").stat().st_size > 0

    # the tidy tables: one row per trial (2 settings × 2 tasks × 2 runs), per RL step
    trials = pd.read_parquet(results / "report" / "evaluations.parquet")
    assert len(trials) == 8 and trials["infra_error"].sum() == 1
    steps = pd.read_parquet(results / "report" / "training.parquet")
    assert steps[["model", "variant", "step"]].values.tolist() == [
        ["tiny-qwen3", "tmax", step] for step in (1, 2, 3)
    ]

    record = json.loads((results / "report" / "provenance.json").read_text())
    assert len(record["config_hash"]) == 16
    assert "git" in record and "packages" in record
    assert "results/report/tables/cross_size.csv" in record["results"]
    assert "results/report/evaluations.parquet" in record["results"]
    assert "results/eval/tiny-qwen3-sft/heldout/tmax/run0.json" in record["inputs"]

    snakemake(workdir, "--report", "results/report.html")
    html = (results / "report.html").read_text()
    assert "cross_harness_vs_paper.csv" in html
    assert "training_curves.png" in html
    assert "Provenance" in html
