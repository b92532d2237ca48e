"""Snakemake entry: one (model × benchmark × harness × run) evaluation."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.evaluate.stage import evaluate_run
from tmax.logs import setup_logging

setup_logging(snakemake.log.run)
model_dir = snakemake.input.get("model")
evaluate_run(
    Path(snakemake.input.tasks),
    snakemake.params.model,
    Path(model_dir) if model_dir else None,
    snakemake.wildcards.harness,
    int(snakemake.wildcards.run),
    snakemake.params.evaluation,
    snakemake.params.backend,
    Path(snakemake.output[0]),
    concurrency=snakemake.threads,
    server_log=Path(snakemake.log.server),
)
