"""Snakemake entry: render one shard of specs into task directories."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.generate.stage import generate_for_backend
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
generate_for_backend(
    snakemake.params.backend,
    snakemake.input.specs,
    snakemake.output[0],
    snakemake.params.seed,
    config=snakemake.config,
)
