"""Procedural generation speed: materialisation and validation throughput.

Run (root, after ./setup.sh): .venv/bin/python benchmarks/generate.py [--quick] [--render-only]
    [--against REV]

- materialisation: render + write task directories for specs of the paper config
  on one core (target >= 200 tasks/s), with render-only as the baseline;
- validation: tasks per minute on bwrap and podman (oracle and no-op per task);
- the embedded default: task count and the time its generate/validate jobs took,
  read from results/benchmarks/ after `./setup.sh run`;
- ``--against REV``: render-only throughput of this tree and of the commit ``REV``
  (``git archive``), in alternating rounds of one process each, and their ratio (the
  families' refactor into template folders is measured against the commit before it).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tmax.config import load_config
from tmax.generate.procedural import render_task
from tmax.generate.validate import check_task
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parent.parent


_ROUND = """
import sys, time
from tmax.config import load_config
from tmax.generate.procedural import render_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs
count = int(sys.argv[1])
rates = []
for name, tier in (("configs/paper.yaml", None), ("config.yaml", "easy")):
    config = load_config(name)
    taxonomy = load_taxonomy()
    specs = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, count)
    render_task(specs[0], config["seed"], tier=tier or "full")  # imports, template compiles
    start = time.perf_counter()
    for spec in specs:
        render_task(spec, config["seed"], tier=tier or "full")
    rates.append(len(specs) / (time.perf_counter() - start))
print(*rates)
"""


def _round(tree: Path, count: int) -> tuple[float, float]:
    """(full tier, easy tier) renders per second of the generator in ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run([sys.executable, "-c", _ROUND, str(count)], cwd=tree, env=env,
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    full, easy = (float(x) for x in out.split())
    return full, easy


def compare(rev: str, rounds: int, count: int) -> None:
    """This tree against ``rev``, alternating, one process per round (so neither gets
    a warmer cache or a quieter minute)."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        rates: dict[str, list[tuple[float, float]]] = {"this tree": [], rev: []}
        for _ in range(rounds):
            rates[rev].append(_round(base, count))
            rates["this tree"].append(_round(ROOT, count))
    medians = {
        name: tuple(statistics.median(r[i] for r in runs) for i in (0, 1))
        for name, runs in rates.items()
    }
    print(
        f"render only, up to {count} specs per tier (the embedded default has 400), one core, "
        f"median of {rounds} rounds:"
    )
    for name, (full, easy) in medians.items():
        print(f"  {name:10s}: paper config (full tier) {full:7.0f} tasks/s, "
              f"embedded default (easy tier) {easy:7.0f} tasks/s")  # fmt: skip
    new, old = medians["this tree"], medians[rev]
    print(f"  ratio this tree / {rev}: full {new[0] / old[0]:.2f}, easy {new[1] / old[1]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="only the render throughputs (no task directories, no sandboxes)",
    )
    parser.add_argument("--against", metavar="REV", help="compare render throughput with REV")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --against")
    args = parser.parse_args()
    if args.against:
        compare(args.against, args.rounds, 500 if args.quick else 2000)
        return
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
              f"{len(easy) / easy_render:.0f} tasks/s")  # fmt: skip
        return
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for spec in specs:
            write_task(render_task(spec, seed), tmp)
        full = time.perf_counter() - start
    print(f"materialisation, {count} paper-config specs, one core:")
    print(f"  render only         : {count / render:8.0f} tasks/s")
    print(f"  render only, easy   : {len(easy) / easy_render:8.0f} tasks/s (the embedded default)")
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
