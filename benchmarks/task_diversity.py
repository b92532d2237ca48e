"""Diversity of procedurally generated tasks, read from the tasks themselves.

Run (root, after ./setup.sh): .venv/bin/python benchmarks/task_diversity.py [--n 2000]

Draws the first N specs of a config (default configs/paper.yaml) with its seed, or
--seed, renders them with the procedural generator at the config's generation.tier
(no sandbox validation: every rendered task is counted), reads them back the way the
collect stage exports them, and prints the figures of tmax.generate.diversity as the
report's Markdown table, then one JSON line, then the seconds each step took.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from task_sample import sample_from, sample_parser

from tmax.generate.diversity import diversity_markdown, task_diversity
from tmax.generate.stage import _row  # the exported row, exactly as collect() builds it
from tmax.tasks import write_task

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    sample = sample_from(sample_parser(__doc__).parse_args())
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        task_dirs = [write_task(task, tmp) for _, task in sample.tasks()]
        seconds["generate"] = time.perf_counter() - start
        start = time.perf_counter()
        rows = [_row(task_dir) for task_dir in task_dirs]
        seconds["read"] = time.perf_counter() - start
    start = time.perf_counter()
    diversity = task_diversity(rows)
    seconds["diversity"] = time.perf_counter() - start

    print(sample.header() + "\n")
    print("\n".join(diversity_markdown(diversity)))
    print()
    print(json.dumps({"n": len(rows), "seed": sample.seed, "tier": sample.tier,
                      "seconds": {k: round(v, 2) for k, v in seconds.items()},
                      "diversity": diversity}, sort_keys=True))  # fmt: skip
    print("\nseconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))


if __name__ == "__main__":
    main()
