"""Snakemake entry: sample one prior dataset and convert it into our task format."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.datasets.convert import prepare_dataset
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
prepare_dataset(
    snakemake.params.source,
    Path(snakemake.output.manifest).parent,
    seed=snakemake.params.seed,
    sample=snakemake.params.sample,
)
