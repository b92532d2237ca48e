#!/usr/bin/env python
"""GPU smoke test of the RL stack on one GPU: vLLM rollouts, FP32 LM head, ZeRO-3, weight push.

Needs one CUDA GPU and ``pip install -e .[gpu,model]`` (vLLM and DeepSpeed). Stages, each
timed, each reported even when an earlier one failed (what can still run, runs):

1. ``vllm_engine`` / ``vllm_generate``: a ``vllm.LLM`` on the model (default: the tiny offline
   Qwen3) samples completions of token-id prompts and reports each sampled token's log-prob
   (μ, the behaviour probability the DPPO mask compares against).
2. ``trainer_logprobs``: the trainer's forward (``tmax.rl.loss.sequence_logprobs``) scores the
   same tokens with a bf16 body and the LM head in FP32, then in bf16, plus an all-FP32 model
   as reference; prints mean/max |Δ log-prob| against vLLM and against the reference (the
   paper's motivation for the FP32 head).
3. ``zero3_step``: one DeepSpeed ZeRO-3 step (world size 1, NCCL, bf16) through
   ``tmax.rl.learner.DeepSpeedLearner``; ``push_weights``: its ``full_state_dict`` loaded into
   the running engine (``LLM.apply_model`` → ``model.load_weights``); ``generate_after_push``:
   generation still works and vLLM now agrees with the updated trainer.
4. One JSON line on stdout, prefixed ``SMOKE_SUMMARY``, with every stage and figure.

See docs/gpu.md for how to run it and what the figures mean. ``--help`` works without a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# src/ on the path, so the script also runs from a checkout without an editable install.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

SUMMARY_PREFIX = "SMOKE_SUMMARY "
PROMPTS = (
    "List the files in /tmp, largest first.",
    "Count the lines of every Python file under src/.",
    "Find which process listens on port 8080 and stop it.",
    "Write a bash loop that renames *.txt files to *.md.",
)
DPPO_DELTA = 0.1
"""The paper's binary-TV threshold: |π − μ| above it is masked when it moves away from μ."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=(
            "One-GPU smoke test: vLLM sampling with log-probs, trainer log-probs with an FP32 "
            "vs bf16 LM head, one DeepSpeed ZeRO-3 step, weight push into vLLM. Prints one "
            f"'{SUMMARY_PREFIX.strip()} {{json}}' line; exit status 1 if any stage failed."
        )
    )
    parser.add_argument(
        "--model",
        help="HF id or local folder of a causal LM (default: build the tiny offline Qwen3)",
    )
    parser.add_argument("--samples", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens per completion")
    parser.add_argument("--max-model-len", type=int, default=2048, help="vLLM context length")
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.3,
        help="vLLM's share of GPU memory; the rest is for the DeepSpeed step",
    )
    parser.add_argument(
        "--lr",
        type=float,
        default=1e-4,
        help="learning rate of the one ZeRO-3 step (large, so bf16 weights visibly move)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run vLLM's engine core in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0)",
    )
    parser.add_argument(
        "--device",
        default="cuda",
        help="device of the transformers/DeepSpeed stages; 'cpu' rehearses them without a GPU "
        "(gloo, fp32 ZeRO-3; the vLLM stages then fail and are reported)",
    )
    parser.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="let vLLM capture CUDA graphs (slower start-up; default is enforce_eager)",
    )
    return parser


# --------------------------------------------------------------------------------------------
# Stage bookkeeping


@dataclass
class Report:
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage; record an exception instead of raising it, so later stages still run."""
        print(f"[smoke] {name} …", file=sys.stderr, flush=True)
        started = time.perf_counter()
        entry: dict[str, Any] = {"ok": False}
        self.stages[name] = entry
        try:
            yield
            entry["ok"] = True
        except Exception as error:
            entry["error"] = f"{type(error).__name__}: {error}"[:2000]
            traceback.print_exc()
        finally:
            entry["seconds"] = round(time.perf_counter() - started, 2)
            status = "ok" if entry["ok"] else f"FAILED ({entry.get('error', '')[:200]})"
            print(f"[smoke] {name}: {status} in {entry['seconds']} s", file=sys.stderr, flush=True)

    def skip(self, name: str, reason: str) -> None:
        self.stages[name] = {"ok": False, "skipped": reason, "seconds": 0.0}
        print(f"[smoke] {name}: skipped ({reason})", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------------------------
# Sequences: prompt ids + sampled ids + the engine's log-probs of the sampled ids


@dataclass
class Rollout:
    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float] | None  # μ from vLLM; None when sampled by transformers


def vllm_sampled_logprobs(completion: Any) -> list[float]:
    """The log-prob vLLM reported for each sampled token (``logprobs=0``: the sampled one)."""
    values = []
    for token_id, entry in zip(completion.token_ids, completion.logprobs, strict=True):
        values.append(float(entry[token_id].logprob))
    return values


def vllm_generate(llm: Any, prompts: list[list[int]], args: argparse.Namespace) -> list[Rollout]:
    from vllm import SamplingParams

    params = SamplingParams(
        n=args.samples,
        temperature=1.0,  # on-policy: no top-k/top-p truncation, so μ is the model's own
        top_p=1.0,
        max_tokens=args.max_tokens,
        logprobs=0,
        seed=args.seed,
    )
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
    rollouts = []
    for prompt_ids, output in zip(prompts, outputs, strict=True):
        for completion in output.outputs:
            if completion.token_ids:
                rollouts.append(
                    Rollout(
                        prompt_ids,
                        list(completion.token_ids),
                        vllm_sampled_logprobs(completion),
                    )
                )
    return rollouts


def vllm_score(llm: Any, rollouts: list[Rollout]) -> list[list[float]]:
    """vLLM's log-probs of given completions (teacher-forced through ``prompt_logprobs``)."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
    outputs = llm.generate(
        [{"prompt_token_ids": r.prompt_ids + r.completion_ids} for r in rollouts],
        params,
        use_tqdm=False,
    )
    scores = []
    for rollout, output in zip(rollouts, outputs, strict=True):
        start = len(rollout.prompt_ids)
        entries = output.prompt_logprobs[start:]
        scores.append(
            [float(e[t].logprob) for t, e in zip(rollout.completion_ids, entries, strict=True)]
        )
    return scores


def hf_generate(model: Any, prompts: list[list[int]], args: argparse.Namespace) -> list[Rollout]:
    """Fallback sampler when vLLM is down, so the head comparison still runs."""
    import torch

    rollouts = []
    torch.manual_seed(args.seed)
    for ids in prompts:
        prompt = torch.tensor([ids], device=model.device)
        out = model.generate(
            prompt,
            do_sample=True,
            top_k=0,
            top_p=1.0,
            temperature=1.0,
            max_new_tokens=args.max_tokens,
            num_return_sequences=args.samples,
        )
        for row in out[:, len(ids) :].tolist():
            if row:
                rollouts.append(Rollout(ids, row, None))
    return rollouts


def batch(rollouts: list[Rollout], device: Any) -> tuple[Any, Any, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and the completion mask over [B, T − 1]."""
    import torch

    width = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    input_ids = torch.zeros(len(rollouts), width, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    completion = torch.zeros(len(rollouts), width - 1, dtype=torch.bool)
    for row, r in enumerate(rollouts):
        seq = r.prompt_ids + r.completion_ids
        input_ids[row, : len(seq)] = torch.tensor(seq)
        attention[row, : len(seq)] = 1
        # Position t scores token t + 1: completion tokens sit at P … P+C−1, scored at P−1 … .
        completion[row, len(r.prompt_ids) - 1 : len(seq) - 1] = True
    return input_ids.to(device), attention.to(device), completion.to(device)


def completion_logprobs(rollouts: list[Rollout], values: Any, mask: Any) -> list[list[float]]:
    """Split a [B, T − 1] tensor of log-probs back into per-rollout completion lists."""
    rows = values.float().cpu()
    mask = mask.cpu()
    return [rows[b][mask[b]].tolist() for b in range(len(rollouts))]


def differences(a: list[list[float]], b: list[list[float]]) -> dict[str, float]:
    """mean and max |Δ log-prob| and the share of tokens with |Δ prob| > δ (DPPO's mask test)."""
    deltas, prob_deltas = [], []
    for row_a, row_b in zip(a, b, strict=True):
        for x, y in zip(row_a, row_b, strict=True):
            deltas.append(abs(x - y))
            prob_deltas.append(abs(math.exp(x) - math.exp(y)))
    if not deltas:
        return {"tokens": 0}
    return {
        "tokens": len(deltas),
        "mean_abs_dlogp": sum(deltas) / len(deltas),
        "max_abs_dlogp": max(deltas),
        "frac_abs_dprob_gt_delta": sum(d > DPPO_DELTA for d in prob_deltas) / len(prob_deltas),
    }


@contextmanager
def fp32_lm_head(model: Any) -> Iterator[None]:
    """Run the LM head module in FP32 (``F.linear(h.float(), W.float())``) inside its forward.

    Inside the module's own forward ZeRO-3 has gathered the (tied) weight, which a direct
    read of ``lm_head.weight`` outside the forward would not see.
    """
    import torch.nn.functional as F

    head = model.get_output_embeddings()

    def forward(hidden: Any) -> Any:
        bias = head.bias.float() if getattr(head, "bias", None) is not None else None
        return F.linear(hidden.float(), head.weight.float(), bias)

    head.forward = forward
    try:
        yield
    finally:
        del head.forward


def module_logprobs(model: Any, input_ids: Any, attention: Any) -> Any:
    """Next-token log-probs of ``input_ids[:, 1:]`` through the model's forward (ZeRO-3 safe)."""
    import torch

    with fp32_lm_head(model):
        logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


# --------------------------------------------------------------------------------------------
# The stages


def run(args: argparse.Namespace) -> dict[str, Any]:
    report = Report()
    state: dict[str, Any] = {}

    # vLLM must see these before it is imported.
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # apply_model's function
    if args.in_process:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    with report.stage("environment"):
        import torch

        report.figures["device"] = args.device
        if args.device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device visible: this script needs one GPU")
            report.figures["gpu"] = torch.cuda.get_device_name(0)
        versions = {"torch": torch.__version__, "cuda": torch.version.cuda}
        for name in ("transformers", "deepspeed", "vllm"):
            try:
                versions[name] = __import__(name).__version__
            except Exception as error:  # report, do not stop: other stages may still run
                versions[name] = f"unavailable: {type(error).__name__}: {error}"
        report.figures["versions"] = versions

    with report.stage("build_model"):
        if args.model:
            state["model_path"] = args.model
        else:
            from tmax.models.tiny import ensure_tiny_model

            state["model_path"] = str(ensure_tiny_model())
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(state["model_path"])
        state["prompts"] = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
            for text in PROMPTS
        ]
        report.figures["model"] = state["model_path"]

    if "prompts" not in state:
        report.skip("vllm_engine", "no model")
    else:
        with report.stage("vllm_engine"):
            from vllm import LLM

            state["llm"] = LLM(
                model=state["model_path"],
                dtype="bfloat16",
                seed=args.seed,
                gpu_memory_utilization=args.gpu_memory_utilization,
                max_model_len=args.max_model_len,
                enforce_eager=not args.cuda_graphs,
            )

    if "llm" in state:
        with report.stage("vllm_generate"):
            rollouts = vllm_generate(state["llm"], state["prompts"], args)
            if not rollouts:
                raise RuntimeError("vLLM returned no completion tokens")
            state["rollouts"] = rollouts
            report.figures["vllm_completions"] = len(rollouts)
            report.figures["vllm_tokens"] = sum(len(r.completion_ids) for r in rollouts)
    else:
        report.skip("vllm_generate", "no vLLM engine")

    if "prompts" in state:
        with report.stage("trainer_logprobs"):
            trainer_logprobs(args, state, report)
    else:
        report.skip("trainer_logprobs", "no model")

    if "rollouts" in state or "hf_rollouts" in state:
        with report.stage("zero3_step"):
            zero3_step(args, state, report)
    else:
        report.skip("zero3_step", "no rollouts to train on")

    if "llm" in state and "pushed_weights" in state:
        with report.stage("push_weights"):
            push_weights(state, report)
    else:
        report.skip("push_weights", "needs both the vLLM engine and the ZeRO-3 step")

    if state.get("pushed"):
        with report.stage("generate_after_push"):
            generate_after_push(args, state, report)
    else:
        report.skip("generate_after_push", "weights were not pushed")

    if "pushed_weights" in state and not args.device.startswith("cpu"):
        with report.stage("engine_server"):
            engine_server(args, state, report)
    else:
        report.skip("engine_server", "needs a GPU and the ZeRO-3 step's weights")

    return {
        "ok": all(stage["ok"] for stage in report.stages.values()),
        "stages": report.stages,
        "figures": report.figures,
    }


def trainer_logprobs(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """Same tokens through the trainer's forward: bf16 body with an FP32 vs a bf16 LM head."""
    import torch
    from transformers import AutoModelForCausalLM

    from tmax.rl.loss import sequence_logprobs

    device = torch.device(args.device)
    bf16 = AutoModelForCausalLM.from_pretrained(state["model_path"], dtype=torch.bfloat16)
    bf16.to(device).eval()
    rollouts: list[Rollout] | None = state.get("rollouts")
    if rollouts is None:  # vLLM down: sample with transformers so the head comparison runs
        rollouts = hf_generate(bf16, state["prompts"], args)
        state["hf_rollouts"] = rollouts
    input_ids, attention, completion = batch(rollouts, device)

    scored: dict[str, list[list[float]]] = {}
    with torch.no_grad():
        for name, fp32 in (("fp32_head", True), ("bf16_head", False)):
            logp, _ = sequence_logprobs(bf16, input_ids, attention, fp32_lm_head=fp32)
            scored[name] = completion_logprobs(rollouts, logp, completion)
        del bf16
        empty_cache(device)
        reference = AutoModelForCausalLM.from_pretrained(state["model_path"], dtype=torch.float32)
        reference.to(device).eval()
        logp, _ = sequence_logprobs(reference, input_ids, attention, fp32_lm_head=True)
        scored["fp32_model"] = completion_logprobs(rollouts, logp, completion)
        del reference
        empty_cache(device)

    figures: dict[str, Any] = {}
    behaviour = [r.behaviour_logprobs for r in rollouts]
    if all(b is not None for b in behaviour):
        figures["vs_vllm"] = {
            head: differences(scored[head], behaviour)  # type: ignore[arg-type]
            for head in ("fp32_head", "bf16_head")
        }
    figures["vs_fp32_model"] = {
        head: differences(scored[head], scored["fp32_model"]) for head in ("fp32_head", "bf16_head")
    }
    report.figures["logprob_mismatch"] = figures
    for against, table in figures.items():
        for head, row in table.items():
            if row.get("tokens"):
                print(
                    f"[smoke] {head} {against}: mean |Δlogp| {row['mean_abs_dlogp']:.5f}, "
                    f"max {row['max_abs_dlogp']:.5f}, |Δp|>{DPPO_DELTA}: "
                    f"{100 * row['frac_abs_dprob_gt_delta']:.2f}% of {row['tokens']} tokens",
                    file=sys.stderr,
                )


def zero3_step(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """One ZeRO-3 step (world size 1; NCCL and bf16 on a GPU) on the sampled completions."""
    import torch
    from transformers import AutoModelForCausalLM

    from tmax.rl.learner import DeepSpeedLearner, init_distributed
    from tmax.rl.loss import sequence_logprobs

    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    where = init_distributed(backend="nccl" if on_gpu else "gloo")
    report.figures["distributed"] = {"launcher": where.launcher, "world_size": where.world_size}
    dtype = torch.bfloat16 if on_gpu else torch.float32
    model = AutoModelForCausalLM.from_pretrained(state["model_path"], dtype=dtype).to(device)
    learner = DeepSpeedLearner(model, lr=args.lr, zero_stage=3, bf16=on_gpu, max_grad_norm=1.0)
    initial = learner.full_state_dict()

    # vLLM's samples; transformers' when vLLM is down (then nothing is pushed afterwards).
    rollouts: list[Rollout] = state.get("rollouts") or state["hf_rollouts"]
    input_ids, attention, completion = batch(rollouts, device)
    total_tokens = int(completion.sum())

    # The trainer's own log-prob function reads lm_head.weight outside the head's forward;
    # record whether that works under ZeRO-3 (partitioned weights), then train through the
    # module's forward with an FP32 head either way.
    try:
        logp, _ = sequence_logprobs(learner.model, input_ids, attention, fp32_lm_head=True)
        report.figures["sequence_logprobs_under_zero3"] = "ok"
    except Exception as error:
        report.figures["sequence_logprobs_under_zero3"] = f"{type(error).__name__}: {error}"[:500]
    logp = module_logprobs(learner.model, input_ids, attention)
    # A policy-gradient-shaped loss (advantage +1 on every sampled token), token-normalised.
    loss = -(logp * completion).sum() / total_tokens
    learner.backward(loss)
    stats = learner.step()
    weights = learner.full_state_dict()
    with torch.no_grad():
        updated = module_logprobs(learner.model, input_ids, attention)
    state["trainer_after_step"] = completion_logprobs(rollouts, updated, completion)

    changed = sum(int((weights[n] != initial[n]).sum()) for n in weights)
    total = sum(t.numel() for t in weights.values())
    report.figures["zero3_step"] = {
        "loss": loss.item(),
        "grad_norm": stats["grad_norm"],
        "lr": stats["lr"],
        "weights": len(weights),
        "parameters": total,
        "frac_weights_changed": changed / max(total, 1),
    }
    if on_gpu:
        report.figures["zero3_step"]["peak_gpu_memory_gib"] = (
            torch.cuda.max_memory_allocated() / 2**30
        )
    state["pushed_weights"] = weights


def empty_cache(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()


def _load_weights(model: Any, weights: list[tuple[str, Any]]) -> int:
    """Runs inside the vLLM worker: vLLM's loader maps HF names (q/k/v → qkv_proj, …)."""
    loaded = model.load_weights(iter(weights))
    return len(loaded) if loaded is not None else len(weights)


def push_weights(state: dict[str, Any], report: Report) -> None:
    import functools

    llm = state["llm"]
    weights = list(state["pushed_weights"].items())
    started = time.perf_counter()
    results = llm.apply_model(functools.partial(_load_weights, weights=weights))
    # Cached prefixes hold keys/values computed with the old weights.
    if hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()
    report.figures["push"] = {
        "tensors": len(weights),
        "loaded_per_worker": results,
        "seconds": round(time.perf_counter() - started, 3),
    }
    state["pushed"] = True


def generate_after_push(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """Generation still works, and vLLM now scores tokens as the updated trainer does."""
    llm = state["llm"]
    rollouts: list[Rollout] = state["rollouts"]
    fresh = vllm_generate(llm, state["prompts"], args)
    if not fresh:
        raise RuntimeError("no completion tokens after the weight push")
    after = vllm_score(llm, rollouts)
    before = [r.behaviour_logprobs for r in rollouts]
    report.figures["after_push"] = {
        "completions": len(fresh),
        "tokens": sum(len(r.completion_ids) for r in fresh),
        # The trainer moved: old vLLM log-probs differ from it; pushed ones should agree.
        "trainer_vs_vllm_before_push": differences(state["trainer_after_step"], before),  # type: ignore[arg-type]
        "trainer_vs_vllm_after_push": differences(state["trainer_after_step"], after),
    }
    moved = report.figures["after_push"]["trainer_vs_vllm_before_push"].get("mean_abs_dlogp", 0)
    kept = report.figures["after_push"]["trainer_vs_vllm_after_push"].get("mean_abs_dlogp", 0)
    if not kept < moved:
        raise RuntimeError(
            f"vLLM did not take the new weights: mean |Δlogp| vs the trainer {kept:.5f} after "
            f"the push, {moved:.5f} before"
        )


def engine_server(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """What an inference node runs (tmax.rl.remote): a vLLM engine server in its own
    process, sampling over TCP, then sent the ZeRO-3 step's weights over the weight group.
    One GPU cannot host a NCCL group of two processes, so the group is gloo here; on the
    paper's nodes it is NCCL."""
    import subprocess
    import tempfile

    from tmax.rl.remote import (
        RemoteEngine,
        prepare_server_dir,
        read_authkey,
        wait_for_servers,
    )  # fmt: skip

    folder = Path(tempfile.mkdtemp(prefix="tmax-engine-"))
    settings = prepare_server_dir(folder, {
        "model_dir": state["model_path"], "engine": "vllm", "tensor_parallel": 1,
        "engine_options": {"gpu_memory_utilization": args.gpu_memory_utilization / 2,
                           "max_model_len": args.max_model_len,
                           "enforce_eager": not args.cuda_graphs, "dtype": "bfloat16"},
    })  # fmt: skip
    log_path = folder / "engine0.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    with log_path.open("w") as log_file:
        server = subprocess.Popen([sys.executable, "-m", "tmax.rl.remote", str(settings), "0"],
                                  env=env, stdout=log_file, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        started = time.perf_counter()

        def failed() -> str | None:
            if server.poll() is None:
                return None
            return f"exit status {server.returncode}: {log_path.read_text()[-2000:]}"

        addresses = wait_for_servers(folder, 1, timeout_s=900, failed=failed)
        ready = time.perf_counter() - started
        engine = RemoteEngine(addresses, read_authkey(folder), backend="gloo")
        options = {"max_tokens": args.max_tokens, "temperature": 1.0, "stop_token_ids": [],
                   "seed": args.seed}  # fmt: skip
        started = time.perf_counter()
        before = engine.generate(state["prompts"], **options)
        sampled = time.perf_counter() - started
        started = time.perf_counter()
        engine.update_weights(state["pushed_weights"], version=1)
        pushed = time.perf_counter() - started
        after = engine.generate(state["prompts"], **options)
        engine.close()
        report.figures["engine_server"] = {
            "ready_seconds": round(ready, 1),
            "generate_seconds": round(sampled, 3),
            "tokens": sum(len(g.token_ids) for g in before),
            "push_seconds": round(pushed, 3),
            "tensors": len(state["pushed_weights"]),
            "samples_changed_after_push": sum(
                a.token_ids != b.token_ids for a, b in zip(after, before, strict=True)
            ),
        }
        if engine.policy_version != 1:
            raise RuntimeError(f"the server reports version {engine.policy_version} after a push")
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    summary = run(args)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    print(SUMMARY_PREFIX + json.dumps(summary, default=str), flush=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    exit_code: int = main()
    # vLLM's and NCCL's background threads can keep a finished interpreter alive.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
