"""Diversity of procedurally generated tasks, read from the tasks themselves.

Run (root, after ./setup.sh): .venv/bin/python benchmarks/task_diversity.py [--n 2000]

Draws the first N specs of a config (default configs/paper.yaml) with its seed, or
--seed, renders them with the procedural generator at the config's generation.tier
(no sandbox validation: every rendered task is counted), reads them back the way the
collect stage exports them, and prints the figures of tmax.generate.diversity as the
report's Markdown table, then one JSON line, then the seconds each step took.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rich.progress import track

from tmax.config import load_config
from tmax.generate.diversity import diversity_markdown, task_diversity
from tmax.generate.procedural import render_task
from tmax.generate.stage import _row  # the exported row, exactly as collect() builds it
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="tasks to generate")
    parser.add_argument("--seed", type=int, default=None, help="default: the config's seed")
    parser.add_argument("--config", type=Path, default=ROOT / "configs/paper.yaml")
    args = parser.parse_args()
    config = load_config(args.config)
    if args.seed is not None:
        config["seed"] = args.seed
    taxonomy = load_taxonomy(config.get("taxonomy"))
    settings = SamplerSettings.from_config(config, taxonomy)
    tier = config.get("generation", {}).get("tier", "full")
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    specs = sample_specs(taxonomy, settings, 0, args.n)
    with tempfile.TemporaryDirectory() as tmp:
        task_dirs = [
            write_task(render_task(spec, config["seed"], tier=tier), tmp)
            for spec in track(specs, description="generating tasks")
        ]
        seconds["generate"] = time.perf_counter() - start
        start = time.perf_counter()
        rows = [_row(task_dir) for task_dir in task_dirs]
        seconds["read"] = time.perf_counter() - start
    start = time.perf_counter()
    diversity = task_diversity(rows)
    seconds["diversity"] = time.perf_counter() - start

    print(f"{len(rows)} procedural tasks from {args.config.name}, seed {config['seed']}, "
          f"tier {tier}\n")  # fmt: skip
    print("\n".join(diversity_markdown(diversity)))
    print()
    print(json.dumps({"n": len(rows), "seed": config["seed"], "tier": tier,
                      "seconds": {k: round(v, 2) for k, v in seconds.items()},
                      "diversity": diversity}, sort_keys=True))  # fmt: skip
    print("\nseconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))


if __name__ == "__main__":
    main()
