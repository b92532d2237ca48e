"""Procedural generation speed: materialisation and validation throughput.

Run (root, after ./setup.sh): .venv/bin/python benchmarks/generate.py [--quick] [--render-only]

- materialisation: render + write task directories for specs of the paper config
  on one core (target >= 200 tasks/s), with render-only as the baseline;
- validation: tasks per minute on bwrap and podman (oracle and no-op per task);
- the embedded default: task count and the time its generate/validate jobs took,
  read from results/benchmarks/ after `./setup.sh run`.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

from tmax.config import load_config
from tmax.generate.procedural import render_task
from tmax.generate.validate import check_task
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="only the render throughputs (no task directories, no sandboxes)",
    )
    args = parser.parse_args()
    config = load_config(ROOT / "configs/paper.yaml")
    taxonomy = load_taxonomy()
    count = 500 if args.quick else 2000
    specs = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, count)
    seed = config["seed"]

    start = time.perf_counter()
    tasks = [render_task(spec, seed) for spec in specs]
    render = time.perf_counter() - start
    embedded = load_config(ROOT / "config.yaml")
    easy = sample_specs(taxonomy, SamplerSettings.from_config(embedded, taxonomy), 0, count)
    start = time.perf_counter()
    for spec in easy:
        render_task(spec, embedded["seed"], tier=embedded["generation"]["tier"])
    easy_render = time.perf_counter() - start
    if args.render_only:
        print(f"render only, {count} specs, one core: paper config (full tier) "
              f"{count / render:.0f} tasks/s, embedded default (easy tier) "
              f"{count / easy_render:.0f} tasks/s")  # fmt: skip
        return
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for spec in specs:
            write_task(render_task(spec, seed), tmp)
        full = time.perf_counter() - start
    print(f"materialisation, {count} paper-config specs, one core:")
    print(f"  render only         : {count / render:8.0f} tasks/s")
    print(f"  render only, easy   : {count / easy_render:8.0f} tasks/s (embedded default's tier)")
    print(f"  render + write dirs : {count / full:8.0f} tasks/s (target >= 200)")

    sample = 6 if args.quick else 20
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [write_task(task, tmp) for task in tasks[:sample]]
        for backend in ("bwrap", "podman"):
            check_task(dirs[0], backend)  # warm: domain images, toolbox, task builds
            start = time.perf_counter()
            checks = [check_task(d, backend) for d in dirs]
            minutes = (time.perf_counter() - start) / 60
            passed = sum(c.ok for c in checks)
            print(f"validation on {backend:6s}: {len(dirs) / minutes:6.1f} tasks/min "
                  f"({passed}/{len(dirs)} passed, one at a time)")  # fmt: skip

    bench = ROOT / "results/benchmarks"
    if (bench / "collect_tasks.tsv").exists():

        def seconds(pattern: str) -> float:
            total = 0.0
            for path in bench.glob(pattern):
                with path.open() as handle:
                    total += float(next(csv.DictReader(handle, delimiter="\t"))["s"])
            return total

        report = (ROOT / "results/tasks/report.md").read_text().splitlines()[2]
        print("embedded default (from results/benchmarks, job seconds summed):")
        print(f"  {report}")
        print(f"  generate_tasks {seconds('generate_tasks/*.tsv'):.1f} s, "
              f"validate_tasks {seconds('validate_tasks/*.tsv'):.1f} s, "
              f"images {seconds('images/*.tsv'):.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
