"""Snakemake entry: DPPO for one model size (resumes from its checkpoints)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.rl.stage import rl_train

setup_logging(snakemake.log[0])
rl = snakemake.params.rl
source = snakemake.params.source  # the generated tasks, or a prior dataset's
decontam = snakemake.input.get("decontam")
rl_train(
    Path(snakemake.input.model),
    Path(snakemake.input.tasks),
    Path(source["tasks_root"]),
    Path(snakemake.output.snapshots),
    Path(snakemake.output.curve),
    Path(snakemake.params.run_dir),
    rl=rl,
    heldout_fraction=snakemake.params.heldout_fraction,
    seed=snakemake.params.seed,
    threads=snakemake.threads,
    backend=snakemake.params.backend,
    decontam=Path(decontam) if decontam else None,
    removal=source["removal"],
)
