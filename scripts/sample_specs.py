"""Snakemake entry: draw one shard of task specs."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.taxonomy.stage import sample_to_parquet

setup_logging(snakemake.log[0])
start, stop = snakemake.params.bounds
sample_to_parquet(
    snakemake.config,
    snakemake.output[0],
    start=start,
    stop=stop,
    taxonomy_path=snakemake.input.taxonomy,
)
