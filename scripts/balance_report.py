"""Snakemake entry: balance score exp(H)/N and per-axis counts of the specs."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.taxonomy.stage import write_balance

setup_logging(snakemake.log[0])
write_balance(
    snakemake.input.specs,
    snakemake.output.json,
    snakemake.output.markdown,
    taxonomy_path=snakemake.input.taxonomy,
)
