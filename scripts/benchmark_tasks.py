"""Snakemake entry: resolve a benchmark into a manifest of Harbor task directories."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.evaluate.stage import prepare_benchmark
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
tasks = snakemake.input.get("tasks")
settings = snakemake.params.benchmark
prepare_benchmark(
    snakemake.wildcards.benchmark,
    Path(snakemake.output[0]),
    work_dir=Path("results/eval/benchmarks") / snakemake.wildcards.benchmark,
    sources=settings["sources"],
    tasks_parquet=Path(tasks) if tasks else None,
    tasks_root=Path("results/tasks/shards"),
    heldout_fraction=settings.get("heldout_fraction", 0.0),
    seed=settings.get("seed", 0),
    max_tasks=settings["max_tasks"],
)
