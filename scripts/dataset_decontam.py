"""Snakemake entry: the n-gram check of one prior dataset's tasks against every benchmark."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.datasets.measure_stage import dataset_decontam
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
dataset_decontam(
    Path(snakemake.input.manifest),
    list(
        zip(
            snakemake.params.benchmarks,
            map(Path, snakemake.input.texts),
            map(Path, snakemake.input.manifests),
            strict=True,
        )
    ),
    Path(snakemake.output[0]),
    None,
    ngram_sizes=[int(snakemake.wildcards.n)],
    boilerplate_min_items=snakemake.params.boilerplate_min_items,
    workers=snakemake.threads,
    self_test_leaks=snakemake.params.self_test_leaks,
    seed=snakemake.params.seed,
)
