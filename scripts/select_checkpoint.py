"""Snakemake entry: the trained model is the best training snapshot (or the last)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.rl.select import select_checkpoint

setup_logging(snakemake.log[0])
select_checkpoint(
    Path(snakemake.input.snapshots),
    {int(step): [Path(f) for f in files] for step, files in snakemake.params.selected.items()},
    Path(snakemake.output.model),
    Path(snakemake.output.selection),
    steps=snakemake.params.steps,
    on=snakemake.params.on,
    pointer=Path(snakemake.output.pointer),
)
