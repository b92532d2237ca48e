"""Snakemake entry: one table of every evaluation."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.evaluate.metrics import write_summary
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
write_summary(
    [Path(p) for p in snakemake.input],
    Path(snakemake.output.json),
    Path(snakemake.output.markdown),
)
