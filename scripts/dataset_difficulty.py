"""Snakemake entry: pass@1 and pass@8 of the reference model on one prior dataset."""

import sys
from dataclasses import replace
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.datasets.difficulty import DifficultySettings
from tmax.datasets.measure_stage import dataset_difficulty
from tmax.logs import setup_logging

setup_logging(snakemake.log.run)
model_dir = snakemake.input.get("model")
dataset_difficulty(
    Path(snakemake.input.manifest),
    Path(snakemake.output[0]),
    replace(DifficultySettings.from_config(snakemake.config), concurrency=snakemake.threads),
    model_dir=Path(model_dir) if model_dir else None,
    server_log=Path(snakemake.log.server),
    progress=False,
)
