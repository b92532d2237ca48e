"""The memory plan of one RL run, before any GPU is asked for (``tmax plan``).

The paper trains each model on "2 training + N inference nodes of 8×H100": DeepSpeed
ZeRO-3 ranks (one per GPU) on the training nodes, one vLLM engine per
``rl.engine_tensor_parallel`` GPUs on the inference nodes, the sandboxes beside rank 0.
This module answers, per model and layout, whether that fits, by how much, and which
knob to turn when it does not:

- **Model states** per training GPU: DeepSpeed's own estimator
  (``estimate_zero3_model_states_mem_needs``) for the exact parameter counts of the
  architecture built on the meta device.
- **Activations** of one micro-batch of ``rl.micro_batch_tokens`` tokens, with and
  without ``rl.gradient_checkpointing`` (:func:`activation_memory`), the FP32 head's
  chunk and its weight copies, and ZeRO-3's communication buffers.
- **vLLM** per inference GPU: weights, the full-attention layers' KV cache and the
  Gated DeltaNet layers' recurrent and conv state of the episodes each engine holds at
  once, against ``gpu_memory_utilization`` of the GPU.
- **Host RAM** per node: DeepSpeed's CPU figure with ``zero_init`` (partitioned
  loading, :func:`tmax.rl.learners.learner.load_partitioned`), the rank processes, rank 0's
  buckets of the streamed weight push and snapshot (two of ``rl.push_bucket_mb`` and
  the largest tensor, not the model) and the sandboxes.

The hardware is the top-level ``hardware`` config section (H100 80 GB × 8 by default);
it is not part of ``rl``, so changing it never reruns ``rl_train``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tmax.config import schema_default
from tmax.rl.recipe import config_model, rl_settings
from tmax.settings import RLSection, RLValues, Section

GIB = 2**30

log = logging.getLogger("tmax.rl.launch.plan")

ARCHITECTURE_FIELDS = (
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "layer_types",
    "full_attention_interval",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)

VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's own default for ``--gpu-memory-utilization`` (rl.engine_options may set it)."""

ZERO3_REDUCE_BUCKET = 500_000_000
ZERO3_PREFETCH_BUCKET = 50_000_000
"""DeepSpeed's defaults for ``reduce_bucket_size`` and ``stage3_prefetch_bucket_size``
(elements); :func:`tmax.rl.learners.learner.deepspeed_config` leaves both unset."""

HEAD_CHUNK = 1024
"""Positions per FP32-head chunk (:func:`tmax.rl.loss.token_logprobs`'s ``chunk_size``)."""

HEAD_CHUNK_COPIES = 5
"""``chunk × vocab`` fp32 buffers alive at the peak of one head chunk's backward: the
recomputed log-softmax and its exp (saved), the gradients of both and the softmax
backward's output."""

VLLM_CUDA_GRAPHS_GIB = 1.0
VLLM_PROFILE_TOKENS = 8192
"""vLLM's extra memory beyond weights and cache: CUDA graphs (about 1 GiB) and the
activations of its profiling batch (``max_num_batched_tokens``, 8192 by default)."""


class PlanError(ValueError):
    """A layout that does not fit; the message names the model, what and the knob."""


# --------------------------------------------------------------------------------------------
# Hardware and architecture
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hardware(Section):
    """One node type of the cluster (config section ``hardware``)."""

    gpu_memory_gib: float = schema_default("hardware", "gpu_memory_gib")
    """An H100 80 GB: 81,559 MiB as nvidia-smi reports it."""
    gpus_per_node: int = schema_default("hardware", "gpus_per_node")
    host_memory_gib: float = schema_default("hardware", "host_memory_gib")
    gpu_reserve_gib: float = schema_default("hardware", "gpu_reserve_gib")
    """CUDA context, NCCL buffers, allocator fragmentation."""
    rank_host_gib: float = schema_default("hardware", "rank_host_gib")
    """One rank's process: CUDA/torch/NCCL host side, pinned buffers."""
    sandbox_memory_gib: float = schema_default("hardware", "sandbox_memory_gib")
    """One task sandbox (container and its services)."""
    plan_check: bool = schema_default("hardware", "plan_check")
    """Fail the DAG's build when a plan does not fit (else only warn)."""

    PATH = ("hardware",)

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> Hardware:
        """The ``hardware`` section (a key it does not have is an error)."""
        return cls.of(section or {})


@dataclass(frozen=True)
class Architecture:
    """What memory depends on in a decoder: Qwen3 (every layer full attention) or the
    Qwen3.5/3.6 hybrid (Gated DeltaNet "linear_attention" layers, every
    ``full_attention_interval``-th one "full_attention")."""

    model_type: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    layer_types: tuple[str, ...]
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    source: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str) -> Architecture:
        text = dict(raw.get("text_config") or raw)  # multimodal checkpoints nest the text
        layers = int(text["num_hidden_layers"])
        hybrid = "linear_num_value_heads" in text
        layer_types = text.get("layer_types")
        if not layer_types:
            interval = int(text.get("full_attention_interval") or 4) if hybrid else 1
            layer_types = [
                "full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(layers)
            ]
        heads = int(text["num_attention_heads"])
        model_type = str(text.get("model_type") or "qwen3")
        if hybrid and not model_type.endswith("_text"):
            model_type = "qwen3_5_text"
        return cls(
            model_type=model_type,
            hidden_size=int(text["hidden_size"]),
            intermediate_size=int(text["intermediate_size"]),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=int(text.get("num_key_value_heads") or heads),
            head_dim=int(text.get("head_dim") or text["hidden_size"] // heads),
            vocab_size=int(text["vocab_size"]),
            tie_word_embeddings=bool(
                text.get("tie_word_embeddings", raw.get("tie_word_embeddings", False))
            ),
            layer_types=tuple(layer_types),
            linear_num_key_heads=int(text.get("linear_num_key_heads") or 0),
            linear_num_value_heads=int(text.get("linear_num_value_heads") or 0),
            linear_key_head_dim=int(text.get("linear_key_head_dim") or 0),
            linear_value_head_dim=int(text.get("linear_value_head_dim") or 0),
            linear_conv_kernel_dim=int(text.get("linear_conv_kernel_dim") or 0),
            source=source,
        )

    @property
    def hybrid(self) -> bool:
        return "linear_attention" in self.layer_types

    @property
    def full_layers(self) -> int:
        return sum(t == "full_attention" for t in self.layer_types)

    @property
    def linear_layers(self) -> int:
        return sum(t == "linear_attention" for t in self.layer_types)

    def transformers_config(self) -> Any:
        """The transformers config AutoModelForCausalLM builds this text model from."""
        from transformers import Qwen3_5TextConfig, Qwen3Config

        common = {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "tie_word_embeddings": self.tie_word_embeddings,
        }
        if not self.hybrid:
            return Qwen3Config(**common)
        return Qwen3_5TextConfig(
            **common,
            layer_types=list(self.layer_types),
            linear_num_key_heads=self.linear_num_key_heads,
            linear_num_value_heads=self.linear_num_value_heads,
            linear_key_head_dim=self.linear_key_head_dim,
            linear_value_head_dim=self.linear_value_head_dim,
            linear_conv_kernel_dim=self.linear_conv_kernel_dim,
        )


@cache
def known_architectures() -> dict[str, dict[str, Any]]:
    """The embedded table (``tmax/rl/data/architectures.yaml``): the paper's four models."""
    text = resources.files("tmax").joinpath("rl/data/architectures.yaml").read_text("utf-8")
    table: dict[str, dict[str, Any]] = yaml.safe_load(text)
    return table


def _cached_config(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    found = try_to_load_from_cache(repo_id, "config.json")
    return Path(found) if isinstance(found, str) else None


def resolve_architecture(path: str) -> Architecture | None:
    """The architecture of a model path: its ``config.json`` in a local folder or in the
    Hugging Face cache, else the embedded table's entry, else None (unknown)."""
    local = Path(path) / "config.json"
    where = local if local.is_file() else None
    if where is None and "/" in path and not Path(path).exists():
        where = _cached_config(path)
    if where is not None:
        return Architecture.from_dict(json.loads(where.read_text("utf-8")), str(where))
    entry = known_architectures().get(path)
    if entry is None:
        return None
    return Architecture.from_dict(entry, f"embedded table: {entry.get('source', '')}".strip())


@dataclass(frozen=True)
class ParameterCounts:
    total: int
    largest_layer: int  # DeepSpeed's "largest layer": the most parameters one module owns
    head: int  # the LM head's weight (the embedding's when tied)
    largest_tensor: int  # the most parameters in one tensor: a push bucket of its own


@cache  # the ablation models share one architecture: build it once
def parameter_counts(architecture: Architecture) -> ParameterCounts:
    """Exact counts from the model transformers builds (on the meta device: no memory).
    ``largest_layer`` follows DeepSpeed's ``model_to_params``: the most parameters one
    module holds directly (here the embedding or the LM head); ``largest_tensor`` is the
    largest single parameter tensor (the same V×H weight here; an architecture that
    stacks its experts into one tensor would count that tensor); the total counts a tied
    weight once (DeepSpeed's own helper dedups by ``data_ptr``, which is 0 on meta)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture.transformers_config())
    total = sum(p.numel() for p in model.parameters())
    largest = max(
        sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules()
    )
    head = model.get_output_embeddings().weight.numel()
    tensor = max(p.numel() for p in model.parameters())
    return ParameterCounts(total=total, largest_layer=largest, head=head, largest_tensor=tensor)


# --------------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------------


def layer_activation_bytes(architecture: Architecture, layer_type: str, dtype_bytes: int) -> int:
    """Bytes per token that one decoder layer keeps for backward (no checkpointing):
    the sum of :func:`layer_parts`."""
    return sum(layer_parts(architecture, layer_type, dtype_bytes))


def layer_parts(architecture: Architecture, layer_type: str, dtype_bytes: int) -> tuple[int, int]:
    """Bytes per token that one decoder layer keeps for backward (no checkpointing), as
    ``(token-local, token mixer)``: its two norms and MLP, and its attention or Gated
    DeltaNet without the input norm (the part that sees the whole sequence under
    sequence parallelism).

    With ``a`` = activation bytes (2 bf16, 4 fp32), H hidden, I intermediate, q = heads ×
    head_dim, kv = KV heads × head_dim, n = heads, and ``norm(d)`` an RMSNorm over width d:

    - ``norm(d) = 4d + 4 + 2·a·d`` (Qwen3: the fp32 input or its fp32 copy, 1/rms, the
      normalised and the output tensors) or ``4d + 4 + 4d + a·d`` (Qwen3.5's zero-centred
      norm multiplies in fp32 before casting back).
    - MLP: ``norm(H) + 4·a·I`` (gate, SiLU, up, their product).
    - Full attention: ``norm(H) + norm_q + 2·a·q`` (q-norm, rotate_half(q), rotated q) +
      ``norm_kv + 2·a·kv`` (the same for k) ``+ a·kv`` (v) ``+ 2·a·q + 4n`` (the fused
      kernel's output and log-sum-exp, the contiguous copy o_proj keeps) where the head
      norms count one 1/rms per head; Qwen3.5's output gate adds ``2·a·q`` (sigmoid and
      the gated output).
    - Gated DeltaNet (fla chunk kernel, causal-conv1d; on GPUs), with c = 2·k_dim + v_dim
      conv channels, v = value heads × value dim, h = value heads: ``norm(H)`` + ``2·a·c``
      (projection and conv output; q, k, v are views) ``+ a·v`` (z) ``+ 3·a·h + 8h``
      (b, a, β; g and its softplus input in fp32) ``+ 256·h`` (the kernel's 64-wide fp32
      chunk matrices per head) ``+ a·v`` (kernel output) ``+ 12v + 3·a·v`` (the gated
      RMSNorm: fp32 copies, SiLU of the gate, output).
    """
    a, H = dtype_bytes, architecture.hidden_size
    zero_centred = _zero_centred(architecture)

    def norm(width: int, groups: int = 1) -> int:
        return norm_bytes(architecture, width, a, groups)

    mlp = norm(H) + 4 * a * architecture.intermediate_size
    if layer_type == "linear_attention":
        conv = 2 * architecture.linear_num_key_heads * architecture.linear_key_head_dim
        conv += architecture.linear_num_value_heads * architecture.linear_value_head_dim
        value = architecture.linear_num_value_heads * architecture.linear_value_head_dim
        heads = architecture.linear_num_value_heads
        mixer = norm(H) + 2 * a * conv + a * value + 3 * a * heads + 8 * heads
        mixer += 256 * heads + a * value + 12 * value + 3 * a * value
        return norm(H) + mlp, mixer - norm(H)
    n, d = architecture.num_attention_heads, architecture.head_dim
    q, kv = n * d, architecture.num_key_value_heads * d
    mixer = norm(H) + norm(q, n) + 2 * a * q + norm(kv, architecture.num_key_value_heads)
    mixer += 2 * a * kv + a * kv + 2 * a * q + 4 * n
    if zero_centred:  # the attention output gate
        mixer += 2 * a * q
    return norm(H) + mlp, mixer - norm(H)


def _zero_centred(architecture: Architecture) -> bool:
    return architecture.model_type.startswith(("qwen3_5", "qwen3_next"))


def norm_bytes(architecture: Architecture, width: int, dtype_bytes: int, groups: int = 1) -> int:
    """Bytes per token an RMSNorm over ``width`` (``groups`` rows of it) keeps for backward
    (see :func:`layer_activation_bytes`)."""
    if _zero_centred(architecture):
        return 8 * width + 4 * groups + dtype_bytes * width
    return 4 * width + 4 * groups + 2 * dtype_bytes * width


@dataclass(frozen=True)
class Activations:
    """One micro-batch's memory on a training GPU beyond the model states (bytes)."""

    tokens: int
    body_plain: int  # every layer's saved tensors
    body_checkpointed: int  # the layer inputs + one layer recomputed
    backward_transient: int  # activation gradients alive during one layer's backward
    head: int  # FP32 head: hidden copy, one chunk's logits, weight copy and its gradient
    zero3_buffers: int  # ZeRO-3 reduce and prefetch buckets (0 for one process)

    def total(self, checkpointing: bool) -> int:
        body = self.body_checkpointed if checkpointing else self.body_plain
        return body + self.backward_transient + self.head + self.zero3_buffers


def activation_memory(
    architecture: Architecture,
    tokens: int,
    *,
    dtype_bytes: int = 2,
    fp32_head: bool = True,
    chunk_size: int = HEAD_CHUNK,
    zero3: bool = True,
    sequence_parallel: int = 1,
) -> Activations:
    """The activation memory of one micro-batch of ``tokens`` tokens (one sequence, or
    right-padded rows whose padding counts as tokens), as the trainer computes it
    (:func:`tmax.rl.loss.sequence_logprobs`: the body, then the chunked FP32 head).

    - Without checkpointing: ``T · Σ_layers layer_bytes`` (:func:`layer_activation_bytes`)
      plus the final norm and the rotary tables (``2·a·head_dim`` per token).
    - With ``rl.gradient_checkpointing`` (non-reentrant, per decoder layer): ``T · L · a·H``
      (each layer's input) ``+ T · max(layer_bytes)`` (the layer being recomputed; autograd
      frees its saved tensors as its backward consumes them). Measured on CPU (glibc keeps
      freed blocks resident) the peak was about 1.7× this term; on GPUs the caching
      allocator reuses those blocks, but the figure is the least certain one of the plan.
    - Backward transient, either way: ``T · (2·a·I + 2·a·H)``: the gradients of the MLP's
      widest tensors and of the residual stream while one layer runs backward.
    - FP32 head (:func:`tmax.rl.loss.token_logprobs`, chunks checkpointed):
      ``T · (4H + 16)`` (the fp32 hidden copy, log-probs and entropies) ``+ 5 · chunk · V · 4``
      (one chunk's recomputed logits at its backward's peak) ``+ V · H · 8`` (the gathered
      head weight's fp32 copy and its fp32 gradient; 0 in an fp32 model, whose weight
      is used as is and whose gradient is the parameter's).
    - ZeRO-3 buffers: the reduce bucket and the prefetch bucket (DeepSpeed's defaults, in
      the 16-bit dtype).
    DeepSpeed's estimator already counts the largest layer gathered (parameter and
    gradient, 16-bit), so that is not repeated here.

    With ``sequence_parallel`` = P > 1 (:mod:`tmax.rl.learners.sequence_parallel`) a rank holds
    ``t = ⌈T/P⌉`` tokens of everything but the token mixers, which run on all ``T``
    (:func:`layer_parts`), keep the gathered input (``a·H`` per token) and the gathered
    rotary tables, and whose backward holds the whole input's gradient and its
    all-reduced copy (``2·a·H`` per token).
    """
    a, H, V = dtype_bytes, architecture.hidden_size, architecture.vocab_size
    if sequence_parallel < 1:
        raise ValueError(f"sequence_parallel must be at least 1, got {sequence_parallel}")
    split = sequence_parallel > 1
    local = -(-tokens // sequence_parallel)
    parts = [layer_parts(architecture, t, a) for t in architecture.layer_types]
    gathered = a * H if split else 0
    per_layer = [local * own + tokens * (mixer + gathered) for own, mixer in parts]
    final_norm = norm_bytes(architecture, H, a)
    rotary = 2 * a * architecture.head_dim
    whole_rotary = tokens * rotary if split else 0
    plain = sum(per_layer) + local * (final_norm + rotary) + whole_rotary
    checkpointed = local * architecture.num_hidden_layers * a * H + max(per_layer)
    checkpointed += local * (final_norm + rotary) + whole_rotary
    transient = local * (2 * a * architecture.intermediate_size + 2 * a * H)
    transient += tokens * 2 * a * H if split else 0
    head = local * ((4 * H if a != 4 else 0) + 16)
    if fp32_head or a == 4:
        head += HEAD_CHUNK_COPIES * min(chunk_size, local) * V * 4
    if fp32_head and a != 4:
        head += V * H * 8
    buffers = (ZERO3_REDUCE_BUCKET + ZERO3_PREFETCH_BUCKET) * a if zero3 else 0
    return Activations(tokens, plain, checkpointed, transient, head, buffers)


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------


@dataclass
class Check:
    """One memory budget: what is needed against what there is."""

    what: str
    needed_gib: float
    available_gib: float
    knobs: list[str]
    detail: dict[str, float] = field(default_factory=dict)
    hard: bool = True  # False: running short slows the run down instead of failing it

    @property
    def headroom_gib(self) -> float:
        return self.available_gib - self.needed_gib

    @property
    def headroom_pct(self) -> float:
        return 100.0 * self.headroom_gib / self.available_gib if self.available_gib else 0.0

    @property
    def fits(self) -> bool:
        return self.headroom_gib >= 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "headroom_gib": round(self.headroom_gib, 2),
                "headroom_pct": round(self.headroom_pct, 1), "fits": self.fits}  # fmt: skip


@dataclass
class ModelPlan:
    model: str
    path: str
    architecture_source: str
    parameters: dict[str, int]
    layout: dict[str, Any]
    checks: list[Check]
    notes: list[str]

    @property
    def fits(self) -> bool:
        return all(check.fits for check in self.checks if check.hard)

    def warnings(self) -> list[str]:
        return [
            f"{self.model}: {check.what} needs {check.needed_gib:.1f} GiB of "
            f"{check.available_gib:.1f} GiB; it runs, slower (consider "
            + " or ".join(f"'{k}'" for k in check.knobs)
            + ")"
            for check in self.checks
            if not check.hard and not check.fits
        ]

    def problems(self) -> list[str]:
        """One sentence per budget that does not fit, naming the knobs to change."""
        lines = []
        for check in self.checks:
            if check.hard and not check.fits:
                lines.append(
                    f"{self.model}: {check.what} needs {check.needed_gib:.1f} GiB but "
                    f"{check.available_gib:.1f} GiB is available "
                    f"({-check.headroom_gib:.1f} GiB short); change "
                    + " or ".join(f"'{k}'" for k in check.knobs)
                )
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "path": self.path,
                "architecture_source": self.architecture_source,
                "parameters": self.parameters, "layout": self.layout, "fits": self.fits,
                "checks": [c.as_dict() for c in self.checks], "notes": self.notes}  # fmt: skip


def gpu_layout(rl: RLValues) -> bool:
    """Whether ``rl`` describes a multi-node GPU job (the layouts this plan is for):
    engines on inference nodes, or DeepSpeed ranks on more than one node."""
    rl = RLSection.of(rl)
    return rl.inference_nodes > 0 or rl.training_nodes > 1


def plan_model(
    name: str,
    path: str,
    rl: RLValues,
    hardware: Hardware,
    architecture: Architecture,
) -> ModelPlan:
    """The memory plan of one model's RL run (``rl``: its resolved rl section)."""
    rl = RLSection.of(rl)
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    counts = parameter_counts(architecture)
    gpus = hardware.gpus_per_node
    training_nodes = rl.training_nodes
    ranks_per_node = rl.ranks_per_node or gpus
    inference_nodes = rl.inference_nodes
    parallel = rl.engine_tensor_parallel
    engines_per_node = rl.engines_per_node or max(1, gpus // parallel)
    engines = inference_nodes * engines_per_node
    # A sample longer than the budget is a micro-batch of its own (trainer.micro_batches):
    # the largest micro-batch is the budget or one whole episode, whichever is longer.
    tokens = max(rl.micro_batch_tokens, rl.max_total_tokens)
    checkpointing = rl.gradient_checkpointing
    notes: list[str] = []
    gpu = hardware.gpu_memory_gib

    # --- training GPU: ZeRO-3 model states (DeepSpeed's estimator) + one micro-batch.
    zero_stage = rl.zero_stage
    if zero_stage != 3:
        notes.append(f"rl.zero_stage is {zero_stage}: the model-state figure is ZeRO-3's")
    cpu_bytes, gpu_bytes, _ = estimate_zero3_model_states_mem_needs(
        total_params=counts.total, largest_layer_params=counts.largest_layer,
        num_gpus_per_node=ranks_per_node, num_nodes=training_nodes, cpu_offload=False,
        cpu_offload_params=False, zero_init=True, additional_buffer_factor=1.5,
    )  # fmt: skip
    notes.append(
        "DeepSpeed's ZeRO-3 estimate counts 18 bytes per parameter over the ranks "
        "(16-bit weight and gradient, fp32 master weight and Adam's two moments) and the "
        "largest layer gathered; our learner keeps bf16 weights, fp32 master weights, "
        "AdamW (torch) moments and fp32 gradient accumulation (grad_accum_dtype fp32), "
        "which is 18 bytes as well. torch's AdamW step allocates temporaries of about one "
        "fp32 partition more; it runs after backward, when the activations are gone."
    )
    fp32_head = rl.fp32_lm_head
    ranks = training_nodes * ranks_per_node
    sequence = rl.sequence_parallel_size
    if ranks % sequence:
        raise ValueError(
            f"{name}: rl.sequence_parallel_size ({sequence}) must divide the training ranks "
            f"({ranks} = rl.training_nodes {training_nodes} × {ranks_per_node} per node)"
        )
    acts = activation_memory(architecture, tokens, fp32_head=fp32_head, sequence_parallel=sequence)
    states_gib = gpu_bytes / GIB
    act_gib = acts.total(checkpointing) / GIB
    overhead = hardware.gpu_reserve_gib
    # The knobs that can make it fit: more ranks shrink only the model states, a smaller
    # budget only micro-batches of several episodes; what is left is the episode length.
    train_knobs = []
    if not checkpointing:
        train_knobs.append("rl.gradient_checkpointing")
    if rl.micro_batch_tokens > rl.max_total_tokens:
        train_knobs.append("rl.micro_batch_tokens")
    if act_gib + overhead < gpu:
        train_knobs.append("rl.training_nodes")

    def fits_with(length: int, split: int = sequence) -> bool:
        used = activation_memory(
            architecture, length, fp32_head=fp32_head, sequence_parallel=split
        ).total(checkpointing)
        return states_gib + used / GIB + overhead <= gpu

    # The smallest sequence group (dividing the ranks) that makes the episode fit.
    if not fits_with(tokens):
        larger = [n for n in range(sequence + 1, ranks + 1) if ranks % n == 0]
        enough = next((n for n in larger if fits_with(tokens, n)), None)
        if enough is not None:
            train_knobs.append(f"rl.sequence_parallel_size ({enough} fits)")

    longest = 0
    if not fits_with(tokens):
        low, high = 0, tokens  # the longest episode that fits, to 1k tokens
        while high - low > 1024:
            middle = (low + high) // 2
            low, high = (middle, high) if fits_with(middle) else (low, middle)
        longest = low
        train_knobs.append(f"rl.max_total_tokens (at most {longest:,} fits)")
    if sequence > 1:
        notes.append(
            f"Each episode is split over {sequence} ranks (rl.sequence_parallel_size): "
            f"everything but the token mixers holds 1/{sequence} of the tokens; each mixer "
            "gathers the whole sequence (exact for Gated DeltaNet too) and is computed on "
            "every rank of the group. The paper's release uses DeepSpeed Ulysses (attention "
            "split by heads) with the same group size."
        )
    checks = [
        Check(
            "training GPU (ZeRO-3 states + one micro-batch)",
            states_gib + act_gib + hardware.gpu_reserve_gib,
            gpu,
            train_knobs,
            {
                "model_states_gib": states_gib,
                "activations_gib": act_gib,
                "activations_plain_gib": acts.total(False) / GIB,
                "activations_checkpointed_gib": acts.total(True) / GIB,
                "body_gib": (acts.body_checkpointed if checkpointing else acts.body_plain) / GIB,
                "head_gib": acts.head / GIB,
                "backward_transient_gib": acts.backward_transient / GIB,
                "zero3_buffers_gib": acts.zero3_buffers / GIB,
                "reserve_gib": hardware.gpu_reserve_gib,
            },
        )
    ]
    if architecture.hybrid:
        notes.append(
            "Gated DeltaNet activations assume the fused kernels (flash-linear-attention, "
            "causal-conv1d) in the GPU environment; transformers' torch fallback keeps far "
            "more and is not meant for 64k-token training."
        )
    notes.append(
        "Activations assume one unpadded sequence per micro-batch; right-padded rows also "
        "build a [rows, 1, T, T] boolean attention mask (T = the longest row) for sdpa."
    )

    # --- inference GPU: vLLM weights + KV cache + linear-attention state.
    if engines:
        options = dict(rl.engine_options)
        utilization = float(
            options.get("gpu_memory_utilization") or VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
        )
        in_flight = rl.groups_in_flight * rl.group_size
        per_engine = math.ceil(in_flight / engines)
        max_tokens = rl.max_total_tokens
        weight_gib = counts.total * 2 / parallel / GIB
        if rl.fp32_lm_head:
            weight_gib += counts.head * 2 / parallel / GIB  # the head kept in fp32
        kv_per_token = 2 * architecture.num_key_value_heads * architecture.head_dim * 2
        kv_per_token *= architecture.full_layers
        state_per_sequence = 0
        if architecture.hybrid:
            recurrent = architecture.linear_num_value_heads * architecture.linear_key_head_dim
            recurrent *= architecture.linear_value_head_dim * 2
            conv = 2 * architecture.linear_num_key_heads * architecture.linear_key_head_dim
            conv += architecture.linear_num_value_heads * architecture.linear_value_head_dim
            conv *= max(0, architecture.linear_conv_kernel_dim - 1) * 2
            state_per_sequence = (recurrent + conv) * architecture.linear_layers
        sequence_gib = (kv_per_token * max_tokens + state_per_sequence) / parallel / GIB
        runtime_gib = (
            VLLM_CUDA_GRAPHS_GIB
            + VLLM_PROFILE_TOKENS
            * 2
            * (2 * architecture.intermediate_size + 4 * architecture.hidden_size)
            / GIB
        )
        budget = utilization * gpu
        fit_sequences = max(0, int((budget - weight_gib - runtime_gib) // sequence_gib))
        checks.append(
            Check(
                f"inference GPU (vLLM: weights + {per_engine} episode(s) at {max_tokens:,} tokens)",
                weight_gib + runtime_gib + per_engine * sequence_gib,
                budget,
                [
                    "rl.engine_tensor_parallel",
                    "rl.inference_nodes",
                    "rl.groups_in_flight",
                    "rl.max_total_tokens",
                    "rl.engine_options.gpu_memory_utilization",
                ],
                hard=False,
                detail={
                    "weights_gib": weight_gib,
                    "kv_and_state_gib": per_engine * sequence_gib,
                    "per_sequence_gib": sequence_gib,
                    "runtime_gib": runtime_gib,
                    "episodes_per_engine": per_engine,
                    "full_length_sequences_that_fit": fit_sequences,
                    "gpu_memory_utilization": utilization,
                },
            )
        )
        notes.append(
            "vLLM does not fail when the episodes in flight outgrow its cache: it queues or "
            "preempts them (slower rollouts); it does fail to start when one sequence of "
            "rl.max_total_tokens does not fit beside the weights (the hard check)."
        )
        checks.append(
            Check(
                "inference GPU (vLLM: weights + one full-length sequence)",
                weight_gib + runtime_gib + sequence_gib,
                budget,
                [
                    "rl.engine_tensor_parallel",
                    "rl.max_total_tokens",
                    "rl.engine_options.gpu_memory_utilization",
                ],
            )
        )

    # --- host RAM: training node 0 (ranks, rank 0's push buckets, sandboxes), inference nodes.
    # The weight push and the snapshot stream the gathered weights in buckets of
    # rl.push_bucket_mb MiB: rank 0 holds the bucket being sent or written and the next
    # one being gathered, and a tensor larger than a bucket travels alone (bf16 on GPUs).
    # NCCL pushes keep their buckets on the GPU; the snapshot's are on the host, so count
    # them there.
    bucket_bytes = rl.push_bucket_mb * 2**20
    push_gib = (2 * bucket_bytes + counts.largest_tensor * 2) / GIB
    sandboxes = rl.groups_in_flight * (rl.rollout_workers or rl.group_size)
    loading_gib = counts.total * 2 / (training_nodes * ranks_per_node) / GIB * ranks_per_node
    training_host = cpu_bytes / GIB + ranks_per_node * hardware.rank_host_gib + loading_gib
    training_host += push_gib + sandboxes * hardware.sandbox_memory_gib
    checks.append(
        Check(
            "training node 0 host RAM",
            training_host,
            hardware.host_memory_gib,
            [
                "hardware.host_memory_gib",
                "rl.groups_in_flight",
                "rl.rollout_workers",
                "rl.training_nodes",
                "rl.push_bucket_mb",
            ],
            {
                "deepspeed_cpu_gib": cpu_bytes / GIB,
                "ranks_gib": ranks_per_node * hardware.rank_host_gib,
                "partitioned_load_gib": loading_gib,
                "rank0_push_buckets_gib": push_gib,
                "sandboxes_running": sandboxes,
                "sandboxes_gib": sandboxes * hardware.sandbox_memory_gib,
            },
        )
    )
    if engines:
        # Each engine process maps the checkpoint (page cache) and keeps a CPU copy while
        # loading; count one bf16 copy per engine plus the process itself.
        engine_host = engines_per_node * (counts.total * 2 / GIB + hardware.rank_host_gib)
        checks.append(
            Check(
                "inference node host RAM",
                engine_host,
                hardware.host_memory_gib,
                ["hardware.host_memory_gib", "rl.engine_tensor_parallel"],
                {"engines_per_node": engines_per_node},
            )
        )
    layout = {
        "training_nodes": training_nodes,
        "ranks_per_node": ranks_per_node,
        "inference_nodes": inference_nodes,
        "engines": engines,
        "engine_tensor_parallel": parallel,
        "micro_batch_tokens": tokens,
        "gradient_checkpointing": checkpointing,
        "max_total_tokens": rl.max_total_tokens,
        "gpu_memory_gib": gpu,
        "gpus_per_node": gpus,
        "host_memory_gib": hardware.host_memory_gib,
    }
    parameters = {"total": counts.total, "largest_layer": counts.largest_layer,
                  "lm_head": counts.head, "largest_tensor": counts.largest_tensor}  # fmt: skip
    return ModelPlan(name, path, architecture.source, parameters, layout, checks, notes)


def plan_config(
    config: Mapping[str, Any], models: list[str] | None = None, *, gpu_only: bool = False
) -> tuple[list[ModelPlan], list[str]]:
    """Plans of the configured models that train (all, or those named in ``models``);
    and the names skipped, each with why (an endpoint, no training, an architecture
    this machine cannot read, or, with ``gpu_only``, not a GPU layout)."""
    hardware = Hardware.from_config(config.get("hardware"))
    plans, skipped = [], []
    for model in config["models"]:
        if models and model["name"] not in models:
            continue
        rl = rl_settings(config, model)
        if model.get("endpoint") or not model.get("train", True):
            skipped.append(f"{model['name']}: not trained here")
            continue
        if gpu_only and not gpu_layout(rl):
            skipped.append(f"{model['name']}: not a multi-node GPU layout")
            continue
        architecture = resolve_architecture(model["path"])
        if architecture is None:
            skipped.append(f"{model['name']}: architecture of {model['path']!r} unknown here")
            continue
        plans.append(plan_model(model["name"], model["path"], rl, hardware, architecture))
    if models:
        unknown = sorted(set(models) - {m["name"] for m in config["models"]})
        if unknown:
            raise PlanError(f"no configured model named {', '.join(unknown)}")
    return plans, skipped


def check_config(config: Mapping[str, Any], models: list[str] | None = None) -> list[ModelPlan]:
    """Plan every trained model (or those named) on a multi-node GPU layout; raise
    :class:`PlanError` naming each model, what does not fit and the knob, when any does
    not fit and ``hardware.plan_check`` is on (the default)."""
    if not Hardware.from_config(config.get("hardware")).plan_check:
        return []
    plans, _ = plan_config(config, models, gpu_only=True)
    _raise_if_unfit(plans)
    return plans


def check_model_cached(config: Mapping[str, Any], name: str) -> None:
    """:func:`check_config` for one model, its outcome remembered: every Snakemake
    invocation asks it of every training job while building the plan (rules/common.smk,
    ``rl_plan_gate``), and a plan takes about half a second (transformers builds the
    model on the meta device). The record, under ``$TMAX_CACHE/plan-checks``, is keyed
    by all the plan reads: the model entry, its rl section, the hardware, the resolved
    architecture, this module's source and the versions of the packages it asks."""
    import hashlib
    from importlib import metadata

    from tmax.io import cache_dir, write_json

    try:
        model = config_model(config, name)
    except KeyError:
        check_config(config, [name])  # raises a PlanError naming the model
        return
    architecture = resolve_architecture(model["path"])
    versions = {}
    for package in ("torch", "transformers", "deepspeed"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    key = json.dumps(
        [model, rl_settings(config, model), config.get("hardware") or {},
         asdict(architecture) if architecture else None, versions,
         hashlib.sha256(Path(__file__).read_bytes()).hexdigest()],
        sort_keys=True, default=str,
    )  # fmt: skip
    record = cache_dir() / "plan-checks" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
    if record.exists():
        problem = json.loads(record.read_text())["problem"]
    else:
        try:
            check_config(config, [name])
            problem = None
        except PlanError as error:
            problem = str(error)
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json(record, {"key": json.loads(key), "problem": problem})
    if problem is not None:
        raise PlanError(problem)


def _raise_if_unfit(plans: list[ModelPlan]) -> None:
    problems = [line for plan in plans for line in plan.problems()]
    if problems:
        raise PlanError(
            "the memory plan does not fit (see `tmax plan`; hardware.plan_check: false "
            "skips this check):\n  " + "\n  ".join(problems)
        )


def write_plan(
    model: Mapping[str, Any],
    rl: Mapping[str, Any],
    hardware: Mapping[str, Any] | None,
    output: Path,
) -> ModelPlan | None:
    """The workflow's ``rl_plan`` job: one model's plan (``rl``: its resolved rl
    section) written to ``output`` as JSON, or why it was not planned (not a multi-node
    GPU layout, an architecture unknown here). Raises :class:`PlanError` instead, with
    nothing written, when the plan does not fit and ``hardware.plan_check`` is on."""
    from tmax.io import write_json

    config = {"models": [dict(model)], "rl": dict(rl), "hardware": dict(hardware or {})}
    plans, skipped = plan_config(config, [model["name"]], gpu_only=True)
    for plan in plans:
        log.info("%s", format_plan(plan))
        for line in plan.warnings():
            log.warning("%s", line)
    if Hardware.from_config(config["hardware"]).plan_check:
        try:
            _raise_if_unfit(plans)
        except PlanError as error:
            log.error("%s", error)
            raise
    write_json(output, {"plans": [p.as_dict() for p in plans], "skipped": skipped})
    return plans[0] if plans else None


def format_plan(plan: ModelPlan) -> str:
    """A readable table of one model's plan."""
    p = plan.parameters
    layout = plan.layout
    lines = [
        f"{plan.model} ({plan.path}): {p['total'] / 1e9:.2f}B parameters, largest layer "
        f"{p['largest_layer'] / 1e6:.0f}M",
        f"  layout: {layout['training_nodes']} training node(s) x {layout['ranks_per_node']} "
        f"ranks, {layout['inference_nodes']} inference node(s) = {layout['engines']} engine(s)"
        f" at TP {layout['engine_tensor_parallel']}; {layout['gpus_per_node']} x "
        f"{layout['gpu_memory_gib']:g} GiB GPUs, {layout['host_memory_gib']:g} GiB host RAM",
        f"  {'budget':<58} {'needed':>8} {'have':>8} {'headroom':>16}",
    ]
    for check in plan.checks:
        mark = "ok  " if check.fits else ("FAIL" if check.hard else "slow")
        lines.append(
            f"  {mark} {check.what:<53} {check.needed_gib:>7.1f}G {check.available_gib:>7.1f}G"
            f" {check.headroom_gib:>+7.1f}G {check.headroom_pct:>+6.1f}%"
        )
        parts = []
        for key, value in check.detail.items():
            label = key.removesuffix("_gib")
            parts.append(f"{label} {value:.1f}G" if key.endswith("_gib") else f"{label} {value:g}")
        if parts:
            lines.append("         " + ", ".join(parts))
    lines.append(f"  architecture: {plan.architecture_source}")
    return "\n".join(lines)
