"""Snakemake entry: the SFT warm-up on reference-solution trajectories."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.io import read_pointer
from tmax.logs import setup_logging
from tmax.rl.stage import sft_warmup
from tmax.settings import RLSection
from tmax.tracking import set_workflow_job

setup_logging(snakemake.log[0])
set_workflow_job(snakemake.config, snakemake.rule, dict(snakemake.wildcards.items()))
# The clean generated tasks (a pointer naming their content hash), or a prior dataset's
# manifest.
clean = snakemake.input.get("clean")
tasks = read_pointer(clean) if clean else Path(snakemake.input.tasks)
removed = snakemake.input.get("removed")  # a prior dataset's flagged tasks
sft_warmup(
    Path(snakemake.input.model),
    tasks,
    Path(snakemake.output.model),
    Path(snakemake.output.curve),
    # the keys SFT reads (its rerun trigger); the others are the schema defaults
    rl=RLSection.of(snakemake.params.rl),
    heldout_fraction=snakemake.params.heldout_fraction,
    seed=snakemake.params.seed,
    threads=snakemake.threads,
    removed=Path(removed) if removed else None,
)
