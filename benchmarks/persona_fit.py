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

import json
import time
from collections import Counter
from pathlib import Path

from task_sample import sample_from, sample_parser

ROOT = Path(__file__).resolve().parent.parent


def _opening(persona: str) -> str:
    """The instruction's first sentence for ``persona`` (as the generator writes it)."""
    return f"I'm {persona[0].lower()}{persona[1:].rstrip('.')}."


def main() -> None:
    parser = sample_parser(__doc__)
    parser.add_argument("--examples", type=int, default=5, help="before/after pairs to show")
    args = parser.parse_args()
    sample = sample_from(args)
    seed, tier = sample.seed, sample.tier

    start = time.perf_counter()
    tasks: Counter[str] = Counter()
    replaced: Counter[str] = Counter()
    examples: list[tuple[str, str, str, str]] = []
    seen_families: set[str] = set()
    for spec, task in sample.tasks():
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
