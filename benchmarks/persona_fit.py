"""How many procedural tasks had their persona replaced to fit the family's story.

Run (root, after ./setup.sh): .venv/bin/python benchmarks/persona_fit.py [--n 2000]

Draws the first N specs of a config (default configs/paper.yaml) with its seed,
renders them with the procedural generator at the config's generation.tier (no
sandbox validation), and prints, per family, how many tasks kept the spec's persona
and how many had it replaced (tmax.generate.personas; recorded in tmax.json as
generator.realised.persona), then a few instruction openings before (the spec's
persona) and after (the one the task opens with), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from rich.progress import track

from tmax.config import load_config
from tmax.generate.procedural import render_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parent.parent


def _opening(persona: str) -> str:
    """The instruction's first sentence for ``persona`` (as the generator writes it)."""
    return f"I'm {persona[0].lower()}{persona[1:].rstrip('.')}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="tasks to generate")
    parser.add_argument("--seed", type=int, default=None, help="default: the config's seed")
    parser.add_argument("--config", type=Path, default=ROOT / "configs/paper.yaml")
    parser.add_argument("--examples", type=int, default=5, help="before/after pairs to show")
    args = parser.parse_args()
    config = load_config(args.config)
    seed = config["seed"] if args.seed is None else args.seed
    taxonomy = load_taxonomy(config.get("taxonomy"))
    settings = SamplerSettings.from_config(config, taxonomy)
    tier = config.get("generation", {}).get("tier", "full")

    start = time.perf_counter()
    specs = sample_specs(taxonomy, settings, 0, args.n)
    tasks: Counter[str] = Counter()
    replaced: Counter[str] = Counter()
    examples: list[tuple[str, str, str, str]] = []
    seen_families: set[str] = set()
    for spec in track(specs, description="generating tasks"):
        task = render_task(spec, seed, tier=tier)
        assert task.meta is not None
        family = task.meta.generator["family"]
        tasks[family] += 1
        persona = task.meta.generator.get("realised", {}).get("persona")
        if persona is None:
            continue
        replaced[family] += 1
        if len(examples) < args.examples and family not in seen_families:
            seen_families.add(family)  # one example per family, for variety
            body = task.instruction.split("\n\n", 1)[1].split("\n")[0]
            examples.append((family, _opening(spec.persona), _opening(persona), body))
    seconds = time.perf_counter() - start

    total, total_replaced = sum(tasks.values()), sum(replaced.values())
    print(f"{total} procedural tasks from {args.config.name}, seed {seed}, tier {tier}: "
          f"{total_replaced} ({100 * total_replaced / total:.1f}%) had their persona "
          f"replaced to fit the family\n")  # fmt: skip
    print("| family | tasks | persona kept | replaced | replaced % |")
    print("|---|---:|---:|---:|---:|")
    for family in sorted(tasks):
        n, r = tasks[family], replaced[family]
        print(f"| {family} | {n} | {n - r} | {r} | {100 * r / n:.0f}% |")
    print(f"| **all** | {total} | {total - total_replaced} | {total_replaced} | "
          f"{100 * total_replaced / total:.0f}% |")  # fmt: skip
    for family, before, after, body in examples:
        print(f"\n{family}\n  before: {before}\n  after:  {after}\n  task:   {body[:160]}")
    print()
    print(json.dumps({"n": total, "seed": seed, "tier": tier, "replaced": total_replaced,
                      "by_family": {f: [tasks[f], replaced[f]] for f in sorted(tasks)},
                      "seconds": round(seconds, 2)}, sort_keys=True))  # fmt: skip


if __name__ == "__main__":
    main()
