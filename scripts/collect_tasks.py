"""Snakemake entry: export validated tasks as Parquet and write the generation report."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.generate.stage import collect
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
collect(
    [Path(p) for p in snakemake.input.tasks],
    [Path(p) for p in snakemake.input.validations],
    Path(snakemake.output.export),
    Path(snakemake.output.json),
    Path(snakemake.output.markdown),
    taxonomy_path=snakemake.input.taxonomy,
)
