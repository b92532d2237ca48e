"""Snakemake entry: load one benchmark's texts for the contamination check."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.decontam.stage import load_benchmark
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
name = snakemake.wildcards.benchmark
load_benchmark(
    name,
    Path(snakemake.output.texts),
    Path(snakemake.output.manifest),
    work_dir=Path("results/decontam/benchmarks") / name,
    sources=snakemake.params.sources,
    on_missing=snakemake.params.on_missing,
)
