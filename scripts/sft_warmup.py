"""Snakemake entry: the SFT warm-up on reference-solution trajectories."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.rl.stage import sft_warmup

setup_logging(snakemake.log[0])
decontam = snakemake.input.get("decontam")  # set when the model trains on a prior dataset
sft_warmup(
    Path(snakemake.input.model),
    Path(snakemake.input.tasks),
    Path(snakemake.output.model),
    Path(snakemake.output.curve),
    rl=snakemake.params.rl,
    heldout_fraction=snakemake.params.heldout_fraction,
    seed=snakemake.params.seed,
    threads=snakemake.threads,
    decontam=Path(decontam) if decontam else None,
    removal=snakemake.params.source["removal"],
)
