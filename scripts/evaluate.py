"""Snakemake entry: one (model × benchmark × harness × run) evaluation, or one run of a
training snapshot on the selection benchmark (rule evaluate_snapshot)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.evaluate.stage import evaluate_run
from tmax.io import pointer_target
from tmax.logs import setup_logging
from tmax.rl.select import snapshot_name

setup_logging(snakemake.log.run)
if snakemake.rule == "evaluate_snapshot":
    step = int(snakemake.wildcards.step)
    model_dir = Path(snakemake.input.snapshots) / snapshot_name(step)
    harness = snakemake.params.harness
else:
    pointer = snakemake.input.get("pointer")  # a trained model, as select_checkpoint chose
    served = snakemake.input.get("model")
    model_dir = pointer_target(pointer) if pointer else Path(served) if served else None
    harness = snakemake.wildcards.harness
evaluate_run(
    Path(snakemake.input.tasks),
    snakemake.params.model,
    model_dir,
    harness,
    int(snakemake.wildcards.run),
    snakemake.params.evaluation,
    snakemake.params.backend,
    Path(snakemake.output[0]),
    concurrency=snakemake.threads,
    server_log=Path(snakemake.log.server),
)
