"""Snakemake entry: the n-gram check of every task against every benchmark at one n."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.decontam.stage import decontaminate
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
decontaminate(
    Path(snakemake.input.tasks),
    list(
        zip(
            snakemake.params.benchmarks,
            map(Path, snakemake.input.texts),
            map(Path, snakemake.input.manifests),
            strict=True,
        )
    ),
    ngram_sizes=[int(snakemake.wildcards.n)],
    boilerplate_min_items=snakemake.params.boilerplate_min_items,
    report_json=Path(snakemake.output[0]),
    report_md=None,
    workers=snakemake.threads,
    self_test_leaks=snakemake.params.self_test_leaks,
    seed=snakemake.params.seed,
)
