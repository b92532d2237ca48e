"""Snakemake entry: the prior dataset's tasks the contamination rule removes."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.decontam.stage import write_removals
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
write_removals(
    Path(snakemake.input[0]),
    Path(snakemake.output[0]),
    ngram=snakemake.params.ngram,
    rule=snakemake.params.rule,
    threshold=snakemake.params.threshold,
)
