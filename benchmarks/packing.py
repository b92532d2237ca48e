"""Does sequence packing pay? The trainer's right-padded micro-batches
(tmax.rl.trainer.micro_batches: whole episodes, sorted by length, padded to the longest of
their micro-batch, at most ``rl.micro_batch_tokens`` slots each) against ``rl.packing``
(tmax.rl.learners.packing: episodes end to end in rows of the same budget, mixers cut at each
episode's ends, no padding).

Run: .venv/bin/python benchmarks/packing.py [--budget 65536] [--episodes 256] [--ranks 16]
     .venv/bin/python benchmarks/packing.py --measure [--budget 4096] [--threads 2]

Printed per length distribution, summed over one step of ``--episodes`` episodes:
- slots: token positions run through the model (padding included), padded / packed;
- passes: micro-batches, i.e. forward+backward passes (each one gathers every ZeRO-3
  partition once), of the busiest of ``--ranks`` training ranks (the episodes split by
  tokens as the trainer splits them; every rank runs as many passes as the busiest),
  padded / packed;
- attention: Σ (row length)² for padded rows against Σ (episode length)² when packed
  (the quadratic part of the cost), padded / packed.

With ``--measure``: one rank's share of a step (``--episodes`` / ``--ranks`` episodes,
lengths scaled by budget / 65,536) through the trainer's own DPPO update on a random
Qwen3-shaped model and a Qwen3.5-shaped hybrid on CPU, padded then packed, from the same
weights: seconds (best of ``--repeats``), micro-batches, and the loss and gradient norm of
both (they must agree: the same gradient).

The distributions are synthetic (the paper does not publish its length histogram):
log-normal lengths with the median and spread given, capped at the episode budget
(rl.max_total_tokens, 65,536), plus a bimodal mix of quick episodes and long ones.
"""

from __future__ import annotations

import argparse
import math
import random

from tmax.rl.episodes.rollout import Sample
from tmax.rl.launch.collective import balanced_shards
from tmax.rl.learners.packing import pack_rows
from tmax.rl.trainer import micro_batches

KINDS = ["lognormal-4k", "lognormal-12k", "bimodal"]


def lengths(kind: str, count: int, cap: int, rng: random.Random, scale: float = 1.0) -> list[int]:
    """``count`` episode lengths; ``scale`` shrinks the medians (and the floor of 64)."""
    floor = max(2, int(64 * scale))
    if kind.startswith("lognormal"):
        median, sigma = {"lognormal-4k": (4096, 0.8), "lognormal-12k": (12288, 0.9)}[kind]
        return [min(cap, max(floor, int(rng.lognormvariate(math.log(median * scale), sigma))))
                for _ in range(count)]  # fmt: skip
    if kind == "bimodal":
        return [min(cap, max(floor, int(rng.lognormvariate(
            math.log((1500 if rng.random() < 0.6 else 30000) * scale), 0.5))))
            for _ in range(count)]  # fmt: skip
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
    """The trainer's packing (first fit by decreasing length, one row per micro-batch)."""
    return sum(sizes), len(pack_rows(sizes, budget)), sum(n * n for n in sizes)


def episodes(sizes: list[int], vocab: int, rng: random.Random) -> list[Sample]:
    """Random episodes: the first quarter of each is its prompt, the rest is scored."""
    out = []
    for n in sizes:
        prompt = max(1, n // 4)
        mask = [0] * prompt + [1] * (n - prompt)
        behaviour = [0.0] * prompt + [-rng.uniform(0.5, 3.0) for _ in range(n - prompt)]
        tokens = [rng.randrange(2, vocab) for _ in range(n)]
        out.append(Sample("t", tokens, mask, behaviour, 1.0, 0, "done", 0, 1, n - prompt))
    return out


def model(kind: str) -> object:
    """A random model of a few layers: Qwen3 (attention) or the Qwen3.5 hybrid
    (three Gated DeltaNet layers to one attention layer), float32, sdpa."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.models.qwen3_5 import Qwen3_5TextConfig

    common = {"vocab_size": 4096, "hidden_size": 256, "intermediate_size": 768,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
              "tie_word_embeddings": False}  # fmt: skip
    if kind == "qwen3":
        config: object = Qwen3Config(num_hidden_layers=4, **common)
    else:
        config = Qwen3_5TextConfig(num_hidden_layers=4, full_attention_interval=4,
                                   linear_num_key_heads=2, linear_num_value_heads=4,
                                   linear_key_head_dim=64, linear_value_head_dim=64,
                                   **common)  # fmt: skip
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")


def timed_update(kind: str, samples: list[Sample], budget: int, pack: bool,
                 repeats: int) -> tuple[float, int, dict[str, float]]:  # fmt: skip
    """Best-of-``repeats`` seconds of the trainer's update (the first run warms up),
    the micro-batches it ran, and the first update's loss and gradient norm."""
    import tempfile
    import time
    from pathlib import Path

    from tmax.rl.learners.learner import LocalLearner, enable_gradient_checkpointing
    from tmax.rl.learners.packing import enable_packing
    from tmax.rl.trainer import RLSettings, Trainer

    settings = RLSettings(micro_batch_tokens=budget, packing=pack, temperature=1.0)
    advantages = [(-1.0) ** i * (0.5 + i % 3) for i in range(len(samples))]
    batches = sum(1 for _ in micro_batches(samples, advantages, budget, pack=pack))
    best, first = math.inf, {}
    for attempt in range(repeats + 1):
        net = model(kind)
        enable_packing(net)  # type: ignore[arg-type]
        enable_gradient_checkpointing(net)  # type: ignore[arg-type]
        learner = LocalLearner(net, lr=1e-6)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory() as run_dir:
            trainer = Trainer(None, None, learner, settings, Path(run_dir))  # type: ignore[arg-type]
            start = time.perf_counter()
            stats = trainer.update(samples, advantages)
            seconds = time.perf_counter() - start
        if attempt == 0:
            first = {"loss": stats["loss"], "grad_norm": stats["grad_norm"]}
        else:
            best = min(best, seconds)
    return best, batches, first


def measure(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    share = max(1, args.episodes // args.ranks)
    scale = args.budget / 65536
    print(f"measured: one rank's {share} episodes, budget {args.budget:,} tokens, lengths "
          f"x{scale:g}, {args.threads} thread(s), gradient checkpointing, best of "
          f"{args.repeats}")  # fmt: skip
    print(f"{'model':<8} {'distribution':<14} {'tokens':>7} {'passes pad/pack':>16} "
          f"{'seconds pad/pack':>17} {'speed-up':>9} {'|Δloss|/loss':>13} "
          f"{'|Δnorm|/norm':>13}")  # fmt: skip
    for kind in ["qwen3", "qwen3_5"]:
        for distribution in KINDS:
            sizes = lengths(distribution, share, args.budget, rng, scale)
            samples = episodes(sizes, 4096, rng)
            pad = timed_update(kind, samples, args.budget, False, args.repeats)
            pack = timed_update(kind, samples, args.budget, True, args.repeats)
            dloss = abs(pad[2]["loss"] - pack[2]["loss"]) / abs(pad[2]["loss"])
            dnorm = abs(pad[2]["grad_norm"] - pack[2]["grad_norm"]) / pad[2]["grad_norm"]
            print(f"{kind:<8} {distribution:<14} {sum(sizes):>7,} "
                  f"{f'{pad[1]}/{pack[1]}':>16} {f'{pad[0]:.2f}/{pack[0]:.2f}':>17} "
                  f"{pad[0] / pack[0]:>8.2f}x {dloss:>13.1e} {dnorm:>13.1e}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=None,
                        help="rl.micro_batch_tokens (65,536; 4,096 with --measure)")  # fmt: skip
    parser.add_argument("--episodes", type=int, default=256, help="episodes per step (8 × 32)")
    parser.add_argument("--ranks", type=int, default=16, help="training ranks (2 nodes × 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure", action="store_true",
                        help="time the trainer's update padded and packed on CPU")  # fmt: skip
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (--measure)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs each (--measure)")
    args = parser.parse_args()
    if args.measure:
        args.budget = args.budget or 4096
        measure(args)
        return
    args.budget = args.budget or 65536
    rng = random.Random(args.seed)
    print(f"budget {args.budget:,} tokens, {args.episodes} episodes per step, "
          f"{args.ranks} ranks")  # fmt: skip
    print(f"{'distribution':<15} {'mean len':>9} {'slots pad/pack':>15} "
          f"{'passes pad/pack':>17} {'attention pad/pack':>19}")  # fmt: skip
    for kind in KINDS:
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
