"""Snakemake entry: metrics of one (model, benchmark, harness) over its runs."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.evaluate.metrics import records_from_run_files, tracked_metrics, write_metrics
from tmax.logs import setup_logging
from tmax.tracking import job_tracker, set_workflow_job

setup_logging(snakemake.log[0])
# tracking: read here, never a param (changing it reruns nothing).
set_workflow_job(snakemake.config, snakemake.rule, dict(snakemake.wildcards.items()))
metrics = write_metrics(
    records_from_run_files([Path(p) for p in snakemake.input]),
    Path(snakemake.output.json),
    Path(snakemake.output.markdown),
    statistics=snakemake.params.statistics,
)
tracker = job_tracker(Path(snakemake.output.json).parent)
tracker.log(tracked_metrics(metrics))  # once: the run's summary
tracker.close()
