"""Training memory: the peak memory of one DPPO micro-batch at 4k and 16k tokens, with
and without gradient checkpointing (``rl.gradient_checkpointing``), and the peak memory
per rank of loading a model into DeepSpeed ZeRO-3 on 2 CPU ranks, with and without
partitioned loading (:func:`tmax.rl.learners.learner.load_partitioned`), and the peak memory per
rank of one 16k-token micro-batch split over 2 ranks (``rl.sequence_parallel_size``)
against one process holding it whole, as ratios.

Run (after ./setup.sh): .venv/bin/python benchmarks/memory.py [--quick]

Loading: a random Qwen3-0.6B-shaped model (about 0.6B parameters; --quick: a 4-layer
one) saved as fp32 safetensors; each of 2 gloo ranks either loads it whole and hands it
to ``DeepSpeedLearner`` (what rl_train did before) or loads it partitioned; reported is
each rank's peak resident memory once the learner exists.

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
import contextlib
import gc
import json
import os
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


M_MMAP_THRESHOLD = -3
"""mallopt's parameter number for the mmap threshold (glibc's malloc.h)."""


def fix_malloc_mmap_threshold(nbytes: int = 64 * 1024) -> None:
    """Allocations of ``nbytes`` and more get a mapping of their own, unmapped when freed
    (and glibc no longer moves the threshold); nothing where libc is not glibc."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, nbytes)


def peak_resident_bytes() -> int:
    """This process image's high-water resident memory (``VmHWM``). Not ``ru_maxrss``:
    Linux carries the parent's high-water mark into it across fork and exec, so a case
    started by a large process (pytest late in the suite, holding over a GB) measured
    the parent, not the micro-batch."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_case(tokens: int, checkpointing: bool, split: bool = False) -> dict[str, float]:
    """One micro-batch in this process (a fresh one: VmHWM is a high-water mark);
    with ``split``, as one rank of a sequence group of 2 (RANK etc. set by
    :func:`measure_sequence`) that scores its half of the sequence.

    glibc's threshold for serving an allocation from its own mapping is fixed first: left
    to itself it rises after each large free and freed blocks stay resident (the
    checkpointed case's peak: 0.33 GB instead of 0.17), where a GPU's caching allocator
    would reuse them; fixed, a freed tensor leaves at once, and the peak repeats to 0.1%."""
    fix_malloc_mmap_threshold()
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from tmax.rl.learners.learner import enable_gradient_checkpointing, init_distributed
    from tmax.rl.learners.sequence_parallel import sequence_groups, split_token_mixers
    from tmax.rl.loss import sequence_logprobs

    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("TMAX_BENCH_THREADS", "2")))
    model = AutoModelForCausalLM.from_config(Qwen3Config(**SHAPE), attn_implementation="sdpa")
    shard = None
    if split:
        init_distributed()
        shard = sequence_groups(2, timeout_s=600)
        assert shard is not None
        split_token_mixers(model, shard)
    if checkpointing:
        enable_gradient_checkpointing(model)
    model.train()

    def micro_batch(length: int) -> None:
        ids = torch.randint(0, SHAPE["vocab_size"], (1, length),
                            generator=torch.Generator().manual_seed(length))  # fmt: skip
        logprobs, _ = sequence_logprobs(model, ids, torch.ones_like(ids), shard=shard)
        logprobs.sum().backward()
        model.zero_grad(set_to_none=True)

    micro_batch(256)
    before = resident_bytes()
    started = time.perf_counter()
    micro_batch(tokens)
    seconds = time.perf_counter() - started
    peak = peak_resident_bytes()
    return {"peak_above_weights_gb": (peak - before) / 1e9, "seconds": seconds}


def measure_sequence(tokens: int) -> list[dict[str, float]]:
    return run_two_ranks(["--sequence-rank", str(tokens)], "sequence rank")


def run_two_ranks(
    arguments: list[str], what: str, ranks: int = 2, extra: dict[str, str] | None = None
) -> list[dict[str, float]]:
    """This script with ``arguments`` as ``ranks`` gloo ranks (``extra``: more environment);
    each rank's last JSON line."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = []
    for rank in range(ranks):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(ranks),
               "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1",
               "TMAX_BENCH_THREADS": "1", **(extra or {})}  # fmt: skip
        procs.append(subprocess.Popen([sys.executable, __file__, *arguments], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))  # fmt: skip
    results = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{what} failed:\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def sequence(quick: bool) -> None:
    tokens = 2048 if quick else 16384
    whole = measure(tokens, True, threads=1)
    ranks = measure_sequence(tokens)
    peak = max(r["peak_above_weights_gb"] for r in ranks)
    slowest = max(r["seconds"] for r in ranks)
    print(f"\none {tokens}-token micro-batch with checkpointing, random Qwen3 as above, fp32, "
          "one thread per process:")  # fmt: skip
    print(f"{'':>24} {'peak GB':>8} {'seconds':>8}")
    whole_gb, whole_s = whole["peak_above_weights_gb"], whole["seconds"]
    print(f"{'one process, whole':>24} {whole_gb:>8.2f} {whole_s:>8.1f}")
    for index, rank in enumerate(ranks):
        print(f"{f'rank {index} of 2, its half':>24} {rank['peak_above_weights_gb']:>8.2f} "
              f"{rank['seconds']:>8.1f}")  # fmt: skip
    print(
        f"memory per rank: {whole['peak_above_weights_gb'] / peak:.2f}x less; "
        f"time: {slowest / whole['seconds']:.2f}x the single process's"
    )


def measure(tokens: int, checkpointing: bool, threads: int | None = None) -> dict[str, float]:
    env = {**os.environ, **({"TMAX_BENCH_THREADS": str(threads)} if threads else {})}
    out = subprocess.run(
        [sys.executable, __file__, "--case", str(tokens), str(int(checkpointing))],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"case {tokens} tokens, checkpointing {checkpointing}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


LOAD_SHAPE = {
    "vocab_size": 151936,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "tie_word_embeddings": True,
}
"""Qwen3-0.6B's published shape."""
LOAD_SHAPES = {
    "Qwen3-0.6B": LOAD_SHAPE,
    "Qwen3-0.6B's body with a 16k vocabulary": {**LOAD_SHAPE, "vocab_size": 16384},
}
"""Loading moves one parameter at a time whole (gathered, filled, partitioned again), so a
rank's peak is its share plus about two copies of the largest parameter. In Qwen3-0.6B
that is the 152k-row embedding (a quarter of the model; a 27B's is 5 %); the second
shape shows the same body without it."""


class AnonymousPeak:
    """The peak of this process's anonymous resident memory (``RssAnon``: what it
    allocated, not the checkpoint's page cache, which mmap'd safetensors put in RSS and
    the kernel can drop), sampled every 5 ms in a thread."""

    def __init__(self) -> None:
        import threading

        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no RssAnon in /proc/self/status")

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.now())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now())


def load_rank(model_dir: Path, partitioned: bool) -> dict[str, float]:
    """One rank (RANK etc. set by :func:`measure_loading`): load the model, wrap it in
    the learner, report the peak anonymous memory above what the rank held before."""
    import deepspeed.ops
    import torch

    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed, load_partitioned
    from tmax.rl.stage import _load

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # see tests/rl/test_learner.py
    torch.set_num_threads(1)
    where = init_distributed()
    before = AnonymousPeak.now()
    sampler = AnonymousPeak()
    if partitioned:
        model, _keep = load_partitioned(model_dir, lr=1e-6, bf16=False)
    else:
        model, _ = _load(model_dir)
    loaded = sampler.stop()
    gc.collect()  # what loading left behind (its temporaries sit in reference cycles)
    held = AnonymousPeak.now()
    sampler = AnonymousPeak()
    learner = DeepSpeedLearner(model, lr=1e-6, zero_stage=3, bf16=False)
    wrapped = max(loaded, sampler.stop())
    shard = sum(p.ds_tensor.numel() for p in learner.engine.module.parameters())
    return {"rank": where.rank, "load_gb": (loaded - before) / 1e9,
            "held_gb": (held - before) / 1e9, "peak_gb": (wrapped - before) / 1e9,
            "shard_params": shard}  # fmt: skip


RETURN_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(2**20), "MALLOC_TRIM_THRESHOLD_": str(2**20)}
"""glibc's malloc serves allocations below its mmap threshold (which grows up to 32 MB as
large blocks are freed) from its heap and keeps them there once freed. Loading allocates
and frees a whole parameter per module, so a rank's resident memory would show what the
allocator kept, not what the rank holds (measured: 0.4-1.1 GB more per rank). With a
1 MiB threshold every tensor is its own mapping, returned when freed."""


def measure_loading(model_dir: Path, partitioned: bool, ranks: int = 2) -> list[dict[str, float]]:
    arguments = ["--load", str(model_dir), str(int(partitioned))]
    return run_two_ranks(arguments, "loading rank", ranks, extra=RETURN_FREED_MEMORY)


def loading(quick: bool) -> None:
    """Both shapes (:data:`LOAD_SHAPES`), whole and partitioned."""
    for title, shape in LOAD_SHAPES.items():
        load_shape(title, {**shape, "num_hidden_layers": 4} if quick else shape)


def load_shape(title: str, shape: dict[str, int]) -> None:
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    with tempfile.TemporaryDirectory(prefix="tmax-load-") as tmp:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(Qwen3Config(**shape), dtype=torch.bfloat16)
        params = sum(p.numel() for p in model.parameters())
        largest = max(p.numel() for p in model.parameters())
        # Sharded as published checkpoints are (a 27B's 5 GB shards are 1/11 of it).
        model.save_pretrained(tmp, max_shard_size=params * 2 // 12 + 1)
        del model
        whole = measure_loading(Path(tmp), partitioned=False)
        parts = measure_loading(Path(tmp), partitioned=True)
    print(f"\n{title}: {params / 1e9:.2f}B parameters (fp32 on CPU), ZeRO-3 on 2 CPU ranks")
    print(f"fp32 weights: {params * 4 / 1e9:.2f} GB in all, {params * 2 / 1e9:.2f} GB per "
          f"rank's share; the largest parameter {largest * 4 / 1e9:.2f} GB")  # fmt: skip
    print("anonymous memory per rank above what it held before (glibc returning freed")
    print("memory: RETURN_FREED_MEMORY): the peak while loading,")
    print("what it holds once loaded, and the peak until the learner (fp32 master weights")
    print("and Adam state of its partition) exists")
    print(f"{'rank':>5} {'phase':>12} {'whole GB':>9} {'partitioned GB':>15} {'ratio':>7}")
    for a, b in zip(whole, parts, strict=True):
        for phase, key in (("load peak", "load_gb"), ("loaded", "held_gb"),
                           ("learner peak", "peak_gb")):  # fmt: skip
            print(f"{a['rank']:>5} {phase:>12} {a[key]:>9.2f} {b[key]:>15.2f} "
                  f"{a[key] / b[key]:>6.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k and 2k tokens (a smoke run)")
    parser.add_argument("--case", nargs=2, type=int, metavar=("TOKENS", "CHECKPOINTING"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--load", nargs=2, metavar=("DIR", "PARTITIONED"), help=argparse.SUPPRESS)
    parser.add_argument("--sequence-rank", type=int, metavar="TOKENS", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=["activations", "loading", "sequence"],
                        help="one part only")  # fmt: skip
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case[0], bool(args.case[1]))))
        return
    if args.load or args.sequence_rank:  # one rank of a process group
        from tmax.rl.launch.ranks import leave_without_teardown

        if args.load:
            print(json.dumps(load_rank(Path(args.load[0]), bool(int(args.load[1])))))
        else:
            print(json.dumps(run_case(args.sequence_rank, checkpointing=True, split=True)))
        leave_without_teardown(0)  # as a real rank ends: gloo's teardown can abort
    if args.only in (None, "activations"):
        activations(args.quick)
    if args.only in (None, "loading"):
        loading(args.quick)
    if args.only in (None, "sequence"):
        sequence(args.quick)


def activations(quick: bool) -> None:
    sizes = [1024, 2048] if quick else [4096, 16384]
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
