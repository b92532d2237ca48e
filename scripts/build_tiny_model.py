"""Snakemake entry: build the tiny offline Qwen3 (cached by content key)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

import shutil

from tmax.logs import setup_logging
from tmax.models.tiny import ensure_tiny_model

setup_logging(snakemake.log[0])
# Built in the shared cache, copied to the declared output: the served model id is
# the folder's name, so the output folder is named after the model.
cached = ensure_tiny_model(snakemake.wildcards.tiny, seed=snakemake.params.seed)
shutil.copytree(cached, snakemake.output[0])
