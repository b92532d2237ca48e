"""Snakemake entry: a model's memory plan (tmax plan), before its training job is
submitted; the job fails here, naming the knob, when a GPU layout cannot fit."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.rl.launch.plan import write_plan

setup_logging(snakemake.log[0])
write_plan(
    snakemake.params.model,
    snakemake.params.rl,
    snakemake.params.hardware,
    Path(snakemake.output[0]),
)
