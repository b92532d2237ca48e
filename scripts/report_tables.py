"""Snakemake entry: the paper's tables from this run's trials, with the paper's numbers."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.report.ingest import records_from_runs
from tmax.report.stage import write_report_tables

setup_logging(snakemake.log[0])
write_report_tables(
    records_from_runs([Path(p) for p in snakemake.input.runs]),
    Path(snakemake.output[0]).parent,  # every table is written beside the first
    formats=snakemake.params.formats,
    combined=Path(snakemake.output.combined),
    reference=snakemake.params.reference_model,
    paper_values=Path(snakemake.input.paper),
    tasks_report=Path(snakemake.input.tasks),
    decontam_report=Path(snakemake.input.decontam),
    removed=Path(snakemake.input.removed),
    datasets=snakemake.params.datasets,
    datasets_root=Path("results/datasets"),
    ablations=snakemake.params.ablations,
    statistics=snakemake.params.statistics,
    evaluations=Path(snakemake.output.evaluations),
)
