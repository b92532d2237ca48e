"""Snakemake entry: taxonomy labels and balance exp(H)/N of one prior dataset."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.datasets.labels import LabelSettings
from tmax.datasets.measure_stage import label_dataset
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
label_dataset(
    Path(snakemake.input.manifest),
    Path(snakemake.output[0]),
    LabelSettings.from_config(snakemake.config),
    taxonomy_path=snakemake.input.taxonomy,
    progress=False,
)
