"""Training memory: the peak memory of one DPPO micro-batch at 4k and 16k tokens, with
and without gradient checkpointing (``rl.gradient_checkpointing``), as a ratio.

Run (after ./setup.sh): .venv/bin/python benchmarks/memory.py [--quick]

Each case runs in a fresh process: a random Qwen3-shaped model (fp32, CPU), one warm-up
micro-batch of 256 tokens, then one micro-batch of N tokens: the body's forward, the
FP32-head log-probs (chunked, as the trainer computes them), backward. Reported: the peak
resident memory during that micro-batch above the resident memory before it (the
activations and the gradients; the weights are already there), and its time. The
gradients are the same size in both modes, so the ratio understates what checkpointing
saves on activations alone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SHAPE = {
    "vocab_size": 4096,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
}
"""Qwen3's layout, small enough for two CPU cores at 16k tokens, with the body's share of
the activations near a real model's (a 9B's 32+ layers dwarf its chunked head; a large
vocabulary here would make the head's chunk the peak instead)."""


def resident_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def run_case(tokens: int, checkpointing: bool) -> dict[str, float]:
    """One micro-batch in this process (a fresh one: ru_maxrss is a high-water mark)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from tmax.rl.learner import enable_gradient_checkpointing
    from tmax.rl.loss import sequence_logprobs

    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("TMAX_BENCH_THREADS", "2")))
    model = AutoModelForCausalLM.from_config(Qwen3Config(**SHAPE))
    if checkpointing:
        enable_gradient_checkpointing(model)
    model.train()

    def micro_batch(length: int) -> None:
        ids = torch.randint(0, SHAPE["vocab_size"], (1, length))
        logprobs, _ = sequence_logprobs(model, ids, torch.ones_like(ids), fp32_lm_head=True)
        logprobs.sum().backward()
        model.zero_grad(set_to_none=True)

    micro_batch(256)
    before = resident_bytes()
    started = time.perf_counter()
    micro_batch(tokens)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak_above_weights_gb": (peak - before) / 1e9, "seconds": seconds}


def measure(tokens: int, checkpointing: bool) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--case", str(tokens), str(int(checkpointing))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"case {tokens} tokens, checkpointing {checkpointing}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k and 2k tokens (a smoke run)")
    parser.add_argument("--case", nargs=2, type=int, metavar=("TOKENS", "CHECKPOINTING"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case[0], bool(args.case[1]))))
        return
    sizes = [1024, 2048] if args.quick else [4096, 16384]
    shape = ", ".join(f"{k} {v}" for k, v in SHAPE.items())
    print(f"one DPPO micro-batch, random Qwen3 ({shape}), fp32 on CPU")
    print(f"{'tokens':>7} {'plain GB':>9} {'ckpt GB':>8} {'memory ratio':>13} {'time ratio':>11}")
    for tokens in sizes:
        plain, ckpt = measure(tokens, False), measure(tokens, True)
        ratio = plain["peak_above_weights_gb"] / max(ckpt["peak_above_weights_gb"], 1e-9)
        slower = ckpt["seconds"] / plain["seconds"]
        print(
            f"{tokens:>7} {plain['peak_above_weights_gb']:>9.2f} "
            f"{ckpt['peak_above_weights_gb']:>8.2f} {ratio:>12.2f}x {slower:>10.2f}x"
        )


if __name__ == "__main__":
    main()
