"""Snakemake entry: DPPO for one model size (resumes from its checkpoints)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.io import read_pointer
from tmax.logs import setup_logging
from tmax.rl.recipe import model_rl
from tmax.rl.stage import rl_train
from tmax.settings import RLSection
from tmax.tracking import set_workflow_job

setup_logging(snakemake.log[0])
# tracking: read here, never a param (changing it reruns nothing); rank 0 logs the steps.
set_workflow_job(snakemake.config, snakemake.rule, dict(snakemake.wildcards.items()))
# The clean generated tasks (a pointer naming their content hash), or a prior dataset's
# manifest.
clean = snakemake.input.get("clean")
tasks = read_pointer(clean) if clean else Path(snakemake.input.tasks)
# Every rl setting, operational ones too (params.recipe holds only those that change
# the trained model: the rerun trigger), typed once.
rl = RLSection.of(model_rl(snakemake.config, snakemake.wildcards.model))
source = snakemake.params.source  # the generated tasks, or a prior dataset's
removed = snakemake.input.get("removed")  # a prior dataset's flagged tasks
rl_train(
    Path(snakemake.input.model),
    tasks,
    Path(source["tasks_root"]),
    Path(snakemake.output.snapshots),
    Path(snakemake.output.curve),
    Path(snakemake.params.run_dir),
    rl=rl,
    heldout_fraction=snakemake.params.heldout_fraction,
    seed=snakemake.params.seed,
    threads=snakemake.threads,
    backend=snakemake.params.backend,
    removed=Path(removed) if removed else None,
)
