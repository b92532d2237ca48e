"""Does the embedded default show the recipe working? The whole DAG, once per seed.

Run (as root, after ./setup.sh): .venv/bin/python benchmarks/miniature.py [--seeds 1 2 3]
                                  .venv/bin/python benchmarks/miniature.py --from-results DIR

For each seed, a copy of the workflow (config.yaml with ``seed`` replaced) runs from
scratch on this machine's cores (images and the toolbox come from the shared cache, as
on a second run of ``./setup.sh run``), and the script prints:

- the wall time of the whole DAG (Snakemake's own start to end);
- the RL reward curve: the mean of the first 3 and of the last 3 steps, and their gap;
- held-out pass@1 (mean over runs, in %) of the SFT model, the SFT control trained for
  RL's learner tokens, and the RL model, under each harness;
- RL minus SFT and RL minus the control on the same held-out tasks, with a paired 95%
  bootstrap interval (``tmax.evaluate.metrics.paired_difference``, as in the report);
- held-out tasks and runs per model, and how many (model, task) pairs had runs that did
  not all score alike (0 when the runs are copies rather than samples).

It ends with the acceptance lines: in at least 2 of the seeds RL is ahead of the SFT
model held out beyond the noise (the paired interval above 0) and not below the
control; the whole DAG within 15 minutes; and, beside them, the reward's rise and the
plain comparisons of the means. ``--from-results`` reads finished runs
(``results/`` folders) instead of running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.workflow.rerun_matrix import copy_workflow_files  # noqa: E402
from tmax.evaluate.metrics import paired_difference  # noqa: E402

MODEL = "tiny-qwen3"
VARIANTS = {"sft": f"{MODEL}-sft", "control": f"{MODEL}-control", "tmax": f"{MODEL}-tmax"}


def override(config: dict[str, Any], setting: str) -> None:
    """Apply one ``--set a.b.c=VALUE`` (VALUE read as YAML) to ``config``."""
    key, sep, value = setting.partition("=")
    if not sep or not key:
        sys.exit(f"--set {setting!r}: write it as a.b.c=VALUE")
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            sys.exit(f"--set {setting!r}: {part!r} is not a mapping in config.yaml")
        node = child
    node[leaf] = yaml.safe_load(value)


def run_seed(seed: int, workdir: Path, cores: int, settings: list[str] | None = None) -> float:
    """The whole DAG in ``workdir`` for ``seed`` (config.yaml with ``settings`` applied);
    its wall time in seconds."""
    copy_workflow_files(workdir)
    config_path = workdir / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["seed"] = seed
    for setting in settings or []:
        override(config, setting)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", str(cores)],
        cwd=workdir, capture_output=True, text=True,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"seed {seed}: the workflow failed (in {workdir}):\n{result.stderr[-3000:]}")
    return elapsed


def reward_gap(results: Path) -> tuple[list[float], float, float]:
    """(rewards per step, mean of the first 3, mean of the last 3)."""
    curve = json.loads((results / "rl" / MODEL / "curve.json").read_text())["curve"]
    rewards = [float(m["reward_mean"]) for m in curve]
    return rewards, statistics.mean(rewards[:3]), statistics.mean(rewards[-3:])


def held_out(results: Path) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
    """pass@1 in % (mean over runs) by harness and variant, and each variant's per-task
    (successes, attempts), from each evaluation's metrics.json (the statistics the
    report uses)."""
    table: dict[str, dict[str, float]] = defaultdict(dict)
    per_task: dict[str, dict[str, Any]] = defaultdict(dict)
    for variant, label in VARIANTS.items():
        for metrics in sorted((results / "eval" / label / "heldout").glob("*/metrics.json")):
            for group in json.loads(metrics.read_text())["groups"]:
                table[group["harness"]][variant] = float(group["pass_at_1_mean"])  # already in %
                per_task[group["harness"]][variant] = {
                    task: (c["successes"], c["attempts"]) for task, c in group["per_task"].items()
                }
    return dict(table), dict(per_task)


def run_agreement(results: Path, harness: str = "tmax") -> tuple[int, int, int, int]:
    """Under ``harness``: (model, task) pairs whose runs did not all score alike, of all
    such pairs; and the runs and tasks per model (the most any variant had)."""
    differ = pairs = runs = tasks = 0
    for label in VARIANTS.values():
        by_task: dict[str, list[float]] = defaultdict(list)
        files = sorted((results / "eval" / label / "heldout" / harness).glob("run*.json"))
        for path in files:
            for trial in json.loads(path.read_text())["trials"]:
                by_task[trial["task"]].append(trial["reward"] or 0.0)
        pairs += len(by_task)
        differ += sum(len(set(scores)) > 1 for scores in by_task.values())
        runs, tasks = max(runs, len(files)), max(tasks, len(by_task))
    return differ, pairs, runs, tasks


def report(seed: int | str, results: Path, elapsed: float | None) -> dict[str, Any]:
    rewards, first, last = reward_gap(results)
    scores, per_task = held_out(results)
    differ, pairs, runs, tasks = run_agreement(results)
    print(f"\nseed {seed}" + (f": whole DAG {elapsed / 60:.1f} min" if elapsed else ""))
    print("  reward per step: " + " ".join(f"{r:.2f}" for r in rewards))
    print(f"  first 3 steps {first:.3f}, last 3 {last:.3f}: gap {last - first:+.3f}")
    print(f"  held out under tmax: {tasks} tasks x {runs} runs per model; the runs of "
          f"{differ} of {pairs} (model, task) pairs ({100 * differ / max(pairs, 1):.0f} %) "
          "did not all score alike")  # fmt: skip
    print(f"  {'held-out pass@1 %':<24}" + "".join(f"{v:>10}" for v in VARIANTS))
    for harness, row in sorted(scores.items()):
        cells = "".join(f"{row[v]:>10.1f}" if v in row else f"{'-':>10}" for v in VARIANTS)
        print(f"  {harness:<24}{cells}")
    gaps = {}
    for harness, tasks in sorted(per_task.items()):
        for baseline in ("sft", "control"):
            if "tmax" in tasks and baseline in tasks:
                gap = paired_difference(tasks["tmax"], tasks[baseline])
                if gap is not None:
                    gaps[(harness, baseline)] = gap
                    print(f"  RL - {baseline} under {harness}: {gap.describe()}: {gap.verdict}")
    return {"gap": last - first, "scores": scores, "gaps": gaps, "elapsed": elapsed,
            "differ": (differ, pairs)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--from-results", type=Path, nargs="+",
                        help="report finished runs (results/ folders), one per seed")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep each seed's workflow copy")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change the embedded config (a.b.c=YAML value), e.g. "
                             "--set generation.tier=easy")  # fmt: skip
    args = parser.parse_args()
    outcomes = [report(str(results), results, None) for results in args.from_results or []]
    for seed in [] if args.from_results else args.seeds:
        workdir = Path(tempfile.mkdtemp(prefix=f"tmax-miniature-{seed}-"))
        print(f"seed {seed}: {workdir}", flush=True)
        elapsed = run_seed(seed, workdir, args.cores, args.set)
        outcomes.append(report(seed, workdir / "results", elapsed))
        if not args.keep:
            subprocess.run(["rm", "-rf", str(workdir)], check=False)
    primary = "tmax"
    rising = sum(o["gap"] >= 0.10 for o in outcomes)
    better = sum(
        o["scores"].get(primary, {}).get("tmax", 0) > o["scores"].get(primary, {}).get("sft", 0) > 0
        for o in outcomes
    )
    beats_control = sum(
        o["scores"].get(primary, {}).get("tmax", 0) > o["scores"].get(primary, {}).get("control", 0)
        for o in outcomes
    )
    resolved = {
        baseline: sum(o["gaps"].get((primary, baseline)) is not None
                      and o["gaps"][(primary, baseline)].verdict == "ahead" for o in outcomes)
        for baseline in ("sft", "control")
    }  # fmt: skip
    timed = [o["elapsed"] for o in outcomes if o["elapsed"] is not None]
    n = len(outcomes)
    held = [o["scores"].get(primary, {}) for o in outcomes]
    not_below = sum(row.get("tmax", 0) >= row.get("control", 0) for row in held)
    print(f"\nRL ahead of SFT beyond the noise in {resolved['sft']}/{n} seeds (wanted: >= 2 of 3),"
          f" RL not below the control in {not_below}/{n}")  # fmt: skip
    print(f"reward gap >= 0.10 in {rising}/{n} seeds")
    print(f"held-out pass@1 (tmax harness) RL > SFT > 0 in {better}/{n} seeds (wanted: >= 2 of 3)")
    print(f"RL beats the SFT control in {beats_control}/{n} seeds")
    print(f"RL ahead beyond the noise (paired 95% CI above 0): of SFT in {resolved['sft']}/{n}, "
          f"of the control in {resolved['control']}/{n} seeds")  # fmt: skip
    if timed:
        print(f"slowest whole DAG {max(timed) / 60:.1f} min (wanted: <= 15 on 2 cores)")


if __name__ == "__main__":
    main()
