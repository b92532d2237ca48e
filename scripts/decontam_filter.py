"""Snakemake entry: the clean task set (what RL trains on), a pointer to it with its
content hash (what the training jobs declare as input), and the removed tasks."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.decontam.stage import filter_tasks
from tmax.io import write_pointer
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
filter_tasks(
    Path(snakemake.input.tasks),
    Path(snakemake.input.report),
    ngram=snakemake.params.ngram,
    rule=snakemake.params.rule,
    threshold=snakemake.params.threshold,
    clean=Path(snakemake.output.clean),
    removed=Path(snakemake.output.removed),
)
write_pointer(snakemake.output.pointer, snakemake.output.clean)
