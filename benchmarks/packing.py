"""Would sequence packing pay? The trainer's micro-batches (tmax.rl.trainer.micro_batches:
whole episodes, sorted by length, right-padded to the longest of their micro-batch, at
most ``rl.micro_batch_tokens`` slots each) against packing (episodes laid end to end in
rows of the same budget, attention kept within each episode, no padding).

Run: .venv/bin/python benchmarks/packing.py [--budget 65536] [--episodes 256] [--ranks 16]

Printed per length distribution, summed over one step of ``--episodes`` episodes:
- slots: token positions run through the model (padding included), padded / packed;
- passes: micro-batches, i.e. forward+backward passes (each one gathers every ZeRO-3
  partition once), of the busiest of ``--ranks`` training ranks (the episodes split by
  tokens as the trainer splits them; every rank runs as many passes as the busiest),
  padded / packed;
- attention: Σ (row length)² for padded rows against Σ (episode length)² when packed
  (the quadratic part of the cost), padded / packed.

The distributions are synthetic (the paper does not publish its length histogram):
log-normal lengths with the median and spread given, capped at the episode budget
(rl.max_total_tokens, 65,536), plus a bimodal mix of quick episodes and long ones.
"""

from __future__ import annotations

import argparse
import math
import random

from tmax.rl.collective import balanced_shards
from tmax.rl.rollout import Sample
from tmax.rl.trainer import micro_batches


def lengths(kind: str, count: int, cap: int, rng: random.Random) -> list[int]:
    if kind.startswith("lognormal"):
        median, sigma = {"lognormal-4k": (4096, 0.8), "lognormal-12k": (12288, 0.9)}[kind]
        return [min(cap, max(64, int(rng.lognormvariate(math.log(median), sigma))))
                for _ in range(count)]  # fmt: skip
    if kind == "bimodal":
        return [min(cap, int(rng.lognormvariate(math.log(1500 if rng.random() < 0.6 else 30000),
                                                0.5))) for _ in range(count)]  # fmt: skip
    raise ValueError(kind)


def padded(sizes: list[int], budget: int) -> tuple[int, int, int]:
    samples = [Sample("t", [0] * n, [0] * n, [0.0] * n, 0.0, 0, "", 0, 0, 0) for n in sizes]
    slots = passes = attention = 0
    for batch in micro_batches(samples, [0.0] * len(samples), budget):
        rows, width = batch["attention_mask"].shape
        slots += rows * width
        passes += 1
        attention += rows * width * width
    return slots, passes, attention


def packed(sizes: list[int], budget: int) -> tuple[int, int, int]:
    """First-fit decreasing into rows of ``budget`` tokens (one row per micro-batch)."""
    rows: list[int] = []
    for size in sorted(sizes, reverse=True):
        for i, used in enumerate(rows):
            if used + size <= budget:
                rows[i] += size
                break
        else:
            rows.append(size)
    return sum(sizes), len(rows), sum(n * n for n in sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=65536, help="rl.micro_batch_tokens")
    parser.add_argument("--episodes", type=int, default=256, help="episodes per step (8 × 32)")
    parser.add_argument("--ranks", type=int, default=16, help="training ranks (2 nodes × 8)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"budget {args.budget:,} tokens, {args.episodes} episodes per step, "
          f"{args.ranks} ranks")  # fmt: skip
    print(f"{'distribution':<15} {'mean len':>9} {'slots pad/pack':>15} "
          f"{'passes pad/pack':>17} {'attention pad/pack':>19}")  # fmt: skip
    for kind in ["lognormal-4k", "lognormal-12k", "bimodal"]:
        sizes = lengths(kind, args.episodes, args.budget, rng)
        shards = [[sizes[i] for i in part] for part in balanced_shards(sizes, args.ranks)]
        a = [padded(part, args.budget) for part in shards if part]
        b = [packed(part, args.budget) for part in shards if part]
        slots = sum(x[0] for x in a) / sum(x[0] for x in b)
        attention = sum(x[2] for x in a) / sum(x[2] for x in b)
        passes = f"{max(x[1] for x in a)}/{max(x[1] for x in b)}"
        print(f"{kind:<15} {sum(sizes) / len(sizes):>9,.0f} {slots:>15.3f} "
              f"{passes:>17} {attention:>19.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
