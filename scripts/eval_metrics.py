"""Snakemake entry: metrics of one (model, benchmark, harness) over its runs."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.evaluate.metrics import records_from_run_files, write_metrics
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
write_metrics(
    records_from_run_files([Path(p) for p in snakemake.input]),
    Path(snakemake.output.json),
    Path(snakemake.output.markdown),
    statistics=snakemake.params.statistics,
)
