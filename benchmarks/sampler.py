"""Sampler throughput at paper scale, and `snakemake -n` time on the paper config.

Run: .venv/bin/python benchmarks/sampler.py [--repeats 5]

Prints medians. Specs are drawn with one generator per spec (seeded by (seed, i)) so
shards are independent; the baseline is the same draws from a single shared
generator, measured in the same run, to show what that independence costs.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tmax.config import load_config
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs, write_specs
from tmax.taxonomy.sampler import _weighted

ROOT = Path(__file__).resolve().parent.parent


def shared_stream_baseline(taxonomy, settings: SamplerSettings) -> int:
    """The same axis draws from one shared generator (no per-spec seeding, no ids)."""
    rng = random.Random(settings.seed)
    drawn = 0
    for _ in range(settings.n_specs):
        domain = taxonomy.domains[_weighted(rng, settings.domain_weights)]
        rng.choice(list(domain.skill_types.values()))
        rng.sample(list(domain.primitive_skills), rng.randint(3, 5))
        rng.choice(domain.personas)
        for weights in (
            settings.language_weights,
            settings.task_complexity_weights,
            settings.command_complexity_weights,
            settings.fixture_weights,
            settings.verifier_weights,
        ):
            _weighted(rng, weights)
        drawn += 1
    return drawn


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    config = load_config(ROOT / "configs/paper.yaml")
    taxonomy = load_taxonomy()
    settings = SamplerSettings.from_config(config, taxonomy)
    n = settings.n_specs

    ours = median_time(lambda: sample_specs(taxonomy, settings), args.repeats)
    base = median_time(lambda: shared_stream_baseline(taxonomy, settings), args.repeats)
    specs = sample_specs(taxonomy, settings)
    with tempfile.TemporaryDirectory() as tmp:
        write = median_time(lambda: write_specs(specs, Path(tmp) / "s.parquet"), args.repeats)
    print(f"sampler, {n:,} specs (median of {args.repeats}):")
    print(f"  per-spec seeded sampler : {ours:6.3f} s  ({n / ours:,.0f} specs/s)")
    print(f"  shared-stream baseline  : {base:6.3f} s  ({n / base:,.0f} specs/s)")
    print(f"  ratio ours / baseline   : {ours / base:6.2f}x")
    print(f"  Parquet write           : {write:6.3f} s")

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("Snakefile", "config.yaml", "configs", "rules", "scripts", "envs", "profiles"):
            source = ROOT / name
            copy = shutil.copytree if source.is_dir() else shutil.copy2
            copy(source, Path(tmp) / name)
        (Path(tmp) / "src").symlink_to(ROOT / "src")
        cmd = [sys.executable, "-m", "snakemake", "-n", "--configfile", "configs/paper.yaml", "-q"]
        version = [sys.executable, "-m", "snakemake", "--version"]
        dry = median_time(lambda: subprocess.run(cmd, cwd=tmp, check=True, capture_output=True), 3)
        start_up = median_time(lambda: subprocess.run(version, check=True, capture_output=True), 3)
    print("snakemake -n, paper config (146 sampling jobs + merge + balance), median of 3:")
    print(f"  dry run                 : {dry:6.2f} s")
    print(f"  snakemake --version     : {start_up:6.2f} s  (interpreter + import baseline)")
    print(f"  DAG work beyond start-up: {dry - start_up:6.2f} s")


if __name__ == "__main__":
    main()
