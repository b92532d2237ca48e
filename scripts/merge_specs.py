"""Snakemake entry: concatenate spec shards into one Parquet file."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.taxonomy.stage import merge_specs

setup_logging(snakemake.log[0])
merge_specs(list(snakemake.input), snakemake.output[0])
