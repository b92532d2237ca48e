"""The learner: the policy's weights, its optimizer and their distribution, behind one protocol.

The RL loop (DESIGN.md, "RL") computes log-probabilities and the DPPO loss itself; the learner
only owns what the paper's infrastructure sentence names: "DeepSpeed ZeRO-3, 2 training + 6
inference nodes of 8×H100", AdamW with a constant learning rate of 1e-6, and the hand-off of
fresh weights to the vLLM engines after every step::

    learner = make_learner("deepspeed", model, lr=1e-6, max_grad_norm=1.0)
    for micro_batch in step_batches:                    # any number of micro-batches per step
        loss = dppo_loss(...) / global_token_count      # normalised by the trainer, not here
        learner.backward(loss)
    stats = learner.step()                              # {"grad_norm": ..., "lr": ...}
    stream_weights(learner, sink, limit=bucket_bytes)   # the push: bucket by bucket

Two implementations:

- :class:`LocalLearner`: one process, ``torch.optim.AdamW``; CPU runs, tests and the embedded
  default.
- :class:`DeepSpeedLearner`: one process per GPU on the training nodes (``srun`` starts them;
  :func:`init_distributed` reads Slurm's or torchrun's environment), ZeRO stage 3 by default.

Loss convention, identical for both: the gradient applied by :meth:`Learner.step` is the
gradient of the **sum** of every loss passed to :meth:`Learner.backward` since the last step,
over all micro-batches and all ranks. The trainer divides each micro-batch's summed token loss
by the step's global number of response tokens (the paper's token-level loss), so the sum is
the loss of the whole step. DeepSpeed averages gradients over data-parallel ranks and divides
by its gradient-accumulation count; :class:`DeepSpeedLearner` undoes both.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from tmax.io import swap_in_directory

if TYPE_CHECKING:
    from deepspeed import DeepSpeedEngine

log = logging.getLogger("tmax.rl")

LearnerKind = Literal["local", "deepspeed"]
LEARNER_KINDS: tuple[str, ...] = ("local", "deepspeed")

LOCAL_CHECKPOINT = "learner.pt"
"""The single file a :class:`LocalLearner` checkpoint directory holds."""
DEEPSPEED_TAG = "learner"
"""The fixed tag (sub-folder) of a :class:`DeepSpeedLearner` checkpoint."""
DEFAULT_MASTER_PORT = 29500


@runtime_checkable
class Learner(Protocol):
    """The trainable policy: call ``model`` for log-probs; the trainer computes the loss."""

    model: nn.Module
    rank: int
    world_size: int

    def backward(self, loss: Tensor) -> None:
        """Accumulate the gradient of ``loss`` (one micro-batch, already normalised)."""
        ...

    def step(self) -> dict[str, float]:
        """Clip gradients, take one optimizer step, zero the gradients; ``grad_norm`` and ``lr``.

        ``grad_norm`` is the global L2 norm of the gradient before clipping.
        """
        ...

    def full_state_dict(self) -> dict[str, Tensor]:
        """Every weight, gathered, on CPU on rank 0 (``{}`` on other ranks).

        Collective: every rank must call it. Names are the model's parameter names (shared
        parameters once) plus its persistent buffers. The whole model on one host: the
        trainer streams instead (:func:`tmax.rl.weights.streaming.stream_weights`).
        """
        ...

    def weight_tensors(self) -> list[tuple[str, Tensor]]:
        """The tensors :meth:`full_state_dict` gathers, in its order, as this rank holds
        them (under ZeRO-3, partitions)."""
        ...

    def gathered(self, tensor: Tensor) -> AbstractContextManager[Any]:
        """A context in which ``tensor`` is whole (collective under ZeRO-3)."""
        ...

    def save(self, directory: Path) -> None:
        """Write model, optimizer and step counter to ``directory``, atomically."""
        ...

    def load(self, directory: Path) -> None:
        """Restore what :meth:`save` wrote, so the next step is the uninterrupted run's."""
        ...


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _check_clip(max_grad_norm: float | None) -> float:
    """``None`` or 0 turn clipping off (the norm is still reported)."""
    if max_grad_norm is None:
        return 0.0
    if not (isinstance(max_grad_norm, int | float) and max_grad_norm >= 0):
        raise ValueError(f"max_grad_norm must be ≥ 0 or None (no clipping), got {max_grad_norm!r}")
    return float(max_grad_norm)


def _module_tensors(
    model: nn.Module,
) -> Iterator[tuple[nn.Module, list[tuple[str, nn.Parameter]], list[tuple[str, Tensor]]]]:
    """Per module: its own parameters (each shared parameter once) and persistent buffers.

    Yields full dotted names. Walking module by module lets ZeRO-3 gather one module's
    parameters at a time instead of the whole model.
    """
    seen: set[int] = set()
    for prefix, module in model.named_modules():
        dot = f"{prefix}." if prefix else ""
        params = []
        for name, param in module.named_parameters(recurse=False):
            if id(param) not in seen:
                seen.add(id(param))
                params.append((dot + name, param))
        persistent = [
            (dot + name, buffer)
            for name, buffer in module.named_buffers(recurse=False)
            if buffer is not None and name not in module._non_persistent_buffers_set
        ]
        if params or persistent:
            yield module, params, persistent


def _weight_tensors(model: nn.Module) -> list[tuple[str, Tensor]]:
    return [pair for _, params, buffers in _module_tensors(model) for pair in [*params, *buffers]]


def _gather_whole(learner: Learner) -> dict[str, Tensor]:
    """Every weight on rank 0's CPU, through the same stream as a push (collective)."""
    from tmax.rl.weights.streaming import StateDictSink, stream_weights

    sink = StateDictSink() if learner.rank == 0 else None
    stream_weights(learner, sink)
    return sink.weights if sink is not None else {}


@contextmanager
def _replacing_directory(directory: Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``directory``; swap it in on success.

    A previous checkpoint at ``directory`` is kept until the new one is complete, so a crash
    leaves either the old checkpoint or the new one, never a half-written folder under the
    final name (a stale ``.tmp``/``.old`` sibling at worst).
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
    try:
        yield tmp
        swap_in_directory(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Keep only each decoder layer's input in the forward pass and recompute the rest in
    the backward pass (``rl.gradient_checkpointing``): the activations of a micro-batch
    shrink from every layer's to one layer's plus the layer inputs. Non-reentrant, which
    works under ZeRO-3 (parameters gathered again for the recomputation)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers ≥ 5.2x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    elif hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        raise ValueError(f"{type(model).__name__} does not support gradient checkpointing")


# --------------------------------------------------------------------------------------------
# LocalLearner
# --------------------------------------------------------------------------------------------


class LocalLearner:
    """One process: ``torch.optim.AdamW`` at a constant learning rate (paper: lr 1e-6)."""

    rank = 0
    world_size = 1

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float = 1e-6,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 0.0,
        eps: float = 1e-8,
        max_grad_norm: float | None = 1.0,
    ) -> None:
        _check_positive("lr", lr)
        self.model = model
        self.max_grad_norm = _check_clip(max_grad_norm)
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
        )
        self.global_step = 0

    def backward(self, loss: Tensor) -> None:
        loss.backward()

    def step(self) -> dict[str, float]:
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        # max_norm=inf measures the norm without scaling anything.
        max_norm = self.max_grad_norm if self.max_grad_norm > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        return {"grad_norm": float(grad_norm), "lr": float(self.optimizer.param_groups[0]["lr"])}

    def full_state_dict(self) -> dict[str, Tensor]:
        return _gather_whole(self)

    def weight_tensors(self) -> list[tuple[str, Tensor]]:
        return _weight_tensors(self.model)

    def gathered(self, tensor: Tensor) -> AbstractContextManager[Any]:
        return nullcontext()

    def save(self, directory: Path) -> None:
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "global_step": self.global_step,
        }
        with _replacing_directory(Path(directory)) as tmp:
            torch.save(state, tmp / LOCAL_CHECKPOINT)

    def load(self, directory: Path) -> None:
        path = Path(directory) / LOCAL_CHECKPOINT
        if not path.is_file():
            raise FileNotFoundError(f"no LocalLearner checkpoint at {path}")
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.global_step = int(state["global_step"])


# --------------------------------------------------------------------------------------------
# Distributed set-up: Slurm (srun) or torchrun
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistributedEnv:
    """Where this process sits in the training job."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: Literal["torchrun", "slurm", "single"]
    attempt: str = ""
    """Which run of the job this process belongs to (:func:`rendezvous_attempt`); the
    ranks' rendezvous refuses a process of another attempt."""


RESTART_PORT_STRIDE = 7919
"""A prime to 10000: restarts 0..9999 of one job take 10000 different ports."""
RENDEZVOUS_KEY = "tmax/attempt"
"""Where rank 0 writes its attempt in the rendezvous store for the other ranks to check."""


def slurm_rendezvous_port(job_id: int, restarts: int = 0) -> int:
    """A Slurm job's default ``MASTER_PORT``: 29500 + (job id + 7919 x restarts) mod 10000.

    A requeued job (preemption, ``scontrol requeue``) keeps its id and counts its
    restarts (``SLURM_RESTART_COUNT``), so no two attempts of one job share a port: a
    previous attempt's rank still shutting down cannot answer the next attempt's ranks.
    Jobs with nearby ids (jobs sharing a node) differ too."""
    offset = (job_id + RESTART_PORT_STRIDE * restarts) % 10000
    return DEFAULT_MASTER_PORT + offset


def rendezvous_attempt(environ: Mapping[str, str]) -> str:
    """What every rank of one attempt has in common and no other attempt has: the
    launcher's ``TMAX_RENDEZVOUS_ID``, else the Slurm job, restart count and step; empty
    otherwise (torchrun's agent keeps its restarts apart itself)."""
    if environ.get("TMAX_RENDEZVOUS_ID"):
        return environ["TMAX_RENDEZVOUS_ID"]
    if environ.get("SLURM_JOB_ID"):
        restart = environ.get("SLURM_RESTART_COUNT") or "0"
        step = environ.get("SLURM_STEP_ID", "?")
        return f"slurm job {environ['SLURM_JOB_ID']} restart {restart} step {step}"
    return ""


def scontrol_hostnames(nodelist: str) -> list[str]:
    """Expand a Slurm node list (``gpu[01-02]``) with ``scontrol show hostnames``."""
    try:
        result = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except FileNotFoundError as error:
        raise RuntimeError(
            "scontrol not found: set MASTER_ADDR, or run inside a Slurm allocation"
        ) from error
    except subprocess.CalledProcessError as error:
        raise RuntimeError(
            f"scontrol show hostnames {nodelist!r} failed: {error.stderr.strip()}"
        ) from error
    hosts = result.stdout.split()
    if not hosts:
        raise RuntimeError(f"scontrol show hostnames {nodelist!r} printed no host")
    return hosts


def _int_var(environ: Mapping[str, str], name: str) -> int:
    value = environ[name]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def distributed_env(
    environ: Mapping[str, str] | None = None,
    *,
    hostnames: Callable[[str], list[str]] = scontrol_hostnames,
) -> DistributedEnv:
    """Read rank, world size, local rank and the rendezvous address from the environment.

    torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` win when present (``srun … torchrun``
    also leaves Slurm's variables, which then describe the launcher, not the workers). Else
    Slurm's ``SLURM_PROCID``/``SLURM_NTASKS``/``SLURM_LOCALID`` (plain ``srun``, one task per
    GPU). Else a single process. ``MASTER_ADDR`` defaults to the first host of the step's node
    list (``SLURM_STEP_NODELIST``, else ``SLURM_JOB_NODELIST``: on the paper's cluster the
    training step runs on 2 of the job's 8 nodes, so the job's first host may not take part);
    ``MASTER_PORT`` to :func:`slurm_rendezvous_port` of the job id and restart count (the
    launcher sets one it checked free, :func:`tmax.rl.launch.ranks.rendezvous_env`), else 29500.
    ``hostnames`` expands a node list (injectable for tests).
    """
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        launcher: Literal["torchrun", "slurm", "single"] = "torchrun"
        rank = _int_var(env, "RANK")
        world_size = _int_var(env, "WORLD_SIZE")
        local_rank = _int_var(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
    elif "SLURM_PROCID" in env:
        launcher = "slurm"
        rank = _int_var(env, "SLURM_PROCID")
        world_size = _int_var(env, "SLURM_NTASKS") if "SLURM_NTASKS" in env else 1
        local_rank = _int_var(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
    else:
        launcher, rank, world_size, local_rank = "single", 0, 1, 0
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise ValueError(
            f"inconsistent {launcher} environment: rank {rank}, world size {world_size}, "
            f"local rank {local_rank}"
        )

    if env.get("MASTER_ADDR"):
        master_addr = env["MASTER_ADDR"]
    elif launcher == "slurm" and (env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")):
        nodelist = env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"]
        master_addr = hostnames(nodelist)[0]
    elif world_size == 1:
        master_addr = "127.0.0.1"
    else:
        raise ValueError(
            f"{launcher} environment with world size {world_size} but no MASTER_ADDR and no "
            "SLURM_JOB_NODELIST to derive it from"
        )

    if env.get("MASTER_PORT"):
        master_port = _int_var(env, "MASTER_PORT")
    elif env.get("SLURM_JOB_ID", "").isdigit():
        restarts = _int_var(env, "SLURM_RESTART_COUNT") if env.get("SLURM_RESTART_COUNT") else 0
        master_port = slurm_rendezvous_port(int(env["SLURM_JOB_ID"]), restarts)
    else:
        master_port = DEFAULT_MASTER_PORT
    if not 0 < master_port < 65536:
        raise ValueError(f"MASTER_PORT must be in 1..65535, got {master_port}")
    return DistributedEnv(rank, world_size, local_rank, master_addr, master_port, launcher,
                          rendezvous_attempt(env))  # fmt: skip


def init_distributed(
    environ: MutableMapping[str, str] | None = None,
    *,
    hostnames: Callable[[str], list[str]] = scontrol_hostnames,
    backend: str | None = None,
    timeout_s: float | None = None,
) -> DistributedEnv:
    """Join the training job's process group (no-op if already joined); return where we are.

    Reads :func:`distributed_env`, writes the standard ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/
    ``MASTER_ADDR``/``MASTER_PORT`` back into ``environ`` (DeepSpeed and libraries read them),
    selects the local GPU, and initialises ``torch.distributed`` with ``backend``: NCCL when
    CUDA is available, else gloo. ``timeout_s`` (``rl.collective_timeout_sec``) bounds
    each collective of the group (torch's default: 10 minutes for NCCL, 30 for gloo) and
    the rendezvous. A rendezvous that cannot happen (the port taken on rank 0's node, no
    rank 0 answering, a store of another attempt) raises a ``RuntimeError`` that says so.
    """
    import torch.distributed as dist

    env = os.environ if environ is None else environ
    where = distributed_env(env, hostnames=hostnames)
    env.update(
        RANK=str(where.rank),
        WORLD_SIZE=str(where.world_size),
        LOCAL_RANK=str(where.local_rank),
        MASTER_ADDR=where.master_addr,
        MASTER_PORT=str(where.master_port),
    )
    if dist.is_initialized():
        return where
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(where.local_rank)
    timeout = timedelta(seconds=timeout_s) if timeout_s else None
    store = _rendezvous(where, timeout)
    dist.init_process_group(
        backend=backend,
        store=store,
        rank=where.rank,
        world_size=where.world_size,
        **({"timeout": timeout} if timeout else {}),
    )
    log.info(
        "joined %s process group: rank %d of %d (local %d) via %s:%d (%s on %s)",
        backend,
        where.rank,
        where.world_size,
        where.local_rank,
        where.master_addr,
        where.master_port,
        where.launcher,
        env.get("SLURMD_NODENAME") or socket.gethostname(),
    )
    return where


def _rendezvous(where: DistributedEnv, timeout: timedelta | None) -> Any:
    """The job's store at ``MASTER_ADDR:MASTER_PORT`` (rank 0 serves it), as
    ``init_method="tcp://..."`` would make it, after checking that it serves this attempt:
    a rank that reached a previous attempt's rank 0 (still shutting down, same port)
    would join that attempt's group and fail later, far from the cause."""
    import torch.distributed as dist
    from torch.distributed.constants import default_pg_timeout

    timeout = timeout or default_pg_timeout
    address = f"{where.master_addr}:{where.master_port}"
    try:
        store, _, _ = next(dist.rendezvous(f"tcp://{address}", where.rank, where.world_size,
                                           timeout=timeout))  # fmt: skip
        store.set_timeout(timeout)
    except RuntimeError as error:  # torch's DistNetworkError, DistStoreError
        if where.rank == 0 and "EADDRINUSE" in str(error):
            raise RuntimeError(
                f"rank 0 cannot serve the rendezvous at {address}: another process holds "
                "the port (a previous attempt of this job still shutting down, or another "
                "job on this node); free it or set MASTER_PORT"
            ) from error
        if where.rank == 0:
            raise RuntimeError(
                f"rank 0 cannot serve the rendezvous at {address}: {error}"
            ) from error
        raise RuntimeError(
            f"rank {where.rank} of {where.world_size} found no rendezvous at {address} "
            f"within {timeout}: rank 0 did not start or could not open the port (see its "
            f"log): {error}"
        ) from error
    if where.rank == 0:
        store.set(RENDEZVOUS_KEY, where.attempt)
        return store
    try:
        theirs = store.get(RENDEZVOUS_KEY).decode()
    except RuntimeError as error:
        raise RuntimeError(
            f"rank {where.rank} reached a store at {address}, but no rank 0 of this attempt "
            f"({where.attempt or 'unnamed'}) answered there within {timeout}: another "
            "process serves that port"
        ) from error
    if theirs != where.attempt:
        raise RuntimeError(
            f"rank {where.rank} reached the rendezvous at {address} of another attempt "
            f"({theirs or 'unnamed'}), not this one ({where.attempt or 'unnamed'}): that "
            "attempt's rank 0 still runs there; stop it, or give this attempt another "
            "MASTER_PORT"
        )
    return store


# --------------------------------------------------------------------------------------------
# DeepSpeedLearner
# --------------------------------------------------------------------------------------------


def deepspeed_config(
    *,
    lr: float,
    zero_stage: int = 3,
    bf16: bool,
    gradient_accumulation_steps: int = 1,
    max_grad_norm: float | None = 1.0,
    offload: bool = False,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
    eps: float = 1e-8,
) -> dict[str, Any]:
    """The paper's learner as a DeepSpeed config (the plain dict ``deepspeed.initialize`` takes).

    - ZeRO ``zero_stage`` (paper: 3); with ``offload``, optimizer state (and, at stage 3,
      parameters) live in CPU memory.
    - AdamW at a constant ``lr`` (paper: 1e-6, "constant"): no scheduler section at all.
      ``torch_adam`` selects ``torch.optim.AdamW`` (no compiled op needed, and the same
      arithmetic as :class:`LocalLearner`); with ``offload`` DeepSpeed's CPU Adam is used.
    - ``gradient_clipping`` = ``max_grad_norm`` (0 = off).
    - bf16 weights and activations with fp32 master weights and fp32 gradient accumulation,
      or plain fp32 (CPU).
    - ``train_micro_batch_size_per_gpu`` = 1: the trainer packs sequences and normalises by
      token count itself. ``managed_gradient_accumulation`` is off, so a step may have any
      number of micro-batches (``backward`` calls) and ``step()`` is always the boundary;
      ``gradient_accumulation_steps`` is then only DeepSpeed's bookkeeping of the nominal
      batch size.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    _check_positive("lr", lr)
    if not (isinstance(gradient_accumulation_steps, int) and gradient_accumulation_steps >= 1):
        raise ValueError(
            "gradient_accumulation_steps must be an integer ≥ 1, "
            f"got {gradient_accumulation_steps!r}"
        )
    zero: dict[str, Any] = {"stage": zero_stage}
    if zero_stage == 3:
        # No 16-bit copy of the whole model at save time: save/load go through ZeRO shards.
        zero["stage3_gather_16bit_weights_on_model_save"] = False
    if offload:
        if zero_stage == 0:
            raise ValueError("offload needs zero_stage ≥ 1 (ZeRO-Offload)")
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if zero_stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    optimizer_params: dict[str, Any] = {
        "lr": lr,
        "betas": list(betas),
        "eps": eps,
        "weight_decay": weight_decay,
    }
    if not offload:
        optimizer_params["torch_adam"] = True
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": gradient_accumulation_steps,
        "managed_gradient_accumulation": False,
        "gradient_clipping": _check_clip(max_grad_norm),
        "optimizer": {"type": "AdamW", "params": optimizer_params},
        "bf16": {"enabled": bool(bf16)},
        "zero_optimization": zero,
        "steps_per_print": 2**31 - 1,  # the trainer logs; DeepSpeed stays quiet
        "wall_clock_breakdown": False,
    }
    if bf16:
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    return config


def _no_shm_comm_on_cpu() -> None:
    """On CPU, DeepSpeed's communication layer would first JIT-compile a shared-memory
    all-reduce (minutes of g++) that only tensor-parallel inference uses; ZeRO training
    talks through gloo. The op-probe cache is a mutable dict by design."""
    if not torch.cuda.is_available():
        import deepspeed.ops

        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def load_partitioned(
    model_dir: Path, *, lr: float, zero_stage: int = 3, bf16: bool | None = None
) -> tuple[nn.Module, Any]:
    """Load a checkpoint the way a ZeRO-3 run must at 9B/27B: each rank reads the
    safetensors and keeps only its partition of every parameter (DeepSpeed's
    ``zero.Init``, through transformers' DeepSpeed integration), in bf16 on GPUs (fp32 on
    CPU). No rank ever holds the whole model: a parameter is whole only while it is
    filled, so a rank's peak is its share plus two to three copies of the largest
    parameter (``benchmarks/memory.py --only loading``). Returns the model and the
    integration's config object, which must stay alive until :class:`DeepSpeedLearner`
    has wrapped the model (transformers holds it by weak reference). At ZeRO stages
    below 3 the model loads whole.

    Must run after :func:`init_distributed` (``zero.Init`` partitions over the group).
    """
    from transformers import AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig

    if bf16 is None:
        bf16 = torch.cuda.is_available()
    _no_shm_comm_on_cpu()  # zero.Init starts DeepSpeed's communication layer
    config = deepspeed_config(lr=lr, zero_stage=zero_stage, bf16=bf16)
    keep = HfDeepSpeedConfig(config) if zero_stage == 3 else None
    dtype = torch.bfloat16 if bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    return model, keep


WHOLE_UNDER_ZERO3 = ("GatedDeltaNet",)
"""Class-name endings of modules whose forward reads a child module's weight directly."""


def gather_whole_modules(model: nn.Module) -> list[str]:
    """Under ZeRO-3 a parameter is gathered only while its own module runs, but a Gated
    DeltaNet layer (Qwen3.5) reads ``conv1d.weight`` without calling ``conv1d``, which
    then sees an empty partition. Their children's parameters are registered as the
    module's external parameters (DeepSpeed's ``register_external_parameter``), so
    they are gathered while it runs, backward included. (Making the module a DeepSpeed
    leaf module instead left ``out_proj``'s weight empty in the backward.) Returns the
    class names it found."""
    from deepspeed.runtime.zero.partition_parameters import register_external_parameter

    names = set()
    for module in model.modules():
        if type(module).__name__.endswith(WHOLE_UNDER_ZERO3):
            for child in module.children():
                for parameter in child.parameters(recurse=False):
                    register_external_parameter(module, parameter)
            names.add(type(module).__name__)
    return sorted(names)


class DeepSpeedLearner:
    """One process per GPU, DeepSpeed ZeRO (stage 3 in the paper), AdamW at a constant lr.

    Joins the process group first (:func:`init_distributed`) if nobody has. ``model`` becomes
    the DeepSpeed engine: call it like the model (attributes pass through to the wrapped
    module); under ZeRO-3 each rank holds 1/world_size of every parameter between forwards.
    For models too large for one process's memory, build them partitioned: create
    ``transformers.integrations.HfDeepSpeedConfig(deepspeed_config(...))`` and keep it alive
    before ``from_pretrained``.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float,
        zero_stage: int = 3,
        bf16: bool | None = None,
        gradient_accumulation_steps: int = 1,
        max_grad_norm: float | None = 1.0,
        offload: bool = False,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 0.0,
        eps: float = 1e-8,
    ) -> None:
        import deepspeed
        import torch.distributed as dist

        if bf16 is None:
            bf16 = torch.cuda.is_available()
        _no_shm_comm_on_cpu()
        self.config = deepspeed_config(
            lr=lr,
            zero_stage=zero_stage,
            bf16=bf16,
            gradient_accumulation_steps=gradient_accumulation_steps,
            max_grad_norm=max_grad_norm,
            offload=offload,
            betas=betas,
            weight_decay=weight_decay,
            eps=eps,
        )
        if not dist.is_initialized():
            init_distributed()
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.zero_stage = zero_stage
        if zero_stage == 3:
            gather_whole_modules(model)
        engine, *_ = deepspeed.initialize(
            model=model,
            model_parameters=[p for p in model.parameters() if p.requires_grad],
            config=self.config,
        )
        self.engine: DeepSpeedEngine = engine
        self.model: nn.Module = engine
        self.global_step = 0

    def backward(self, loss: Tensor) -> None:
        # DeepSpeed averages gradients over data-parallel ranks; the trainer's losses are
        # already divided by the step's global token count, so scale back up to a sum.
        # scale_wrt_gas=False: the trainer's normalisation, not DeepSpeed's, divides.
        self.engine.backward(loss * self.engine.dp_world_size, scale_wrt_gas=False)

    def step(self) -> dict[str, float]:
        self.engine.step()
        self.global_step += 1
        grad_norm = self.engine.get_global_grad_norm()
        return {
            "grad_norm": float(grad_norm) if grad_norm is not None else math.nan,
            "lr": float(self.engine.get_lr()[0]),
        }

    def full_state_dict(self) -> dict[str, Tensor]:
        return _gather_whole(self)

    def weight_tensors(self) -> list[tuple[str, Tensor]]:
        return _weight_tensors(self.engine.module)

    def gathered(self, tensor: Tensor) -> AbstractContextManager[Any]:
        if self.zero_stage != 3 or not isinstance(tensor, nn.Parameter):
            return nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters([tensor], modifier_rank=None)

    def _barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def save(self, directory: Path) -> None:
        """Each rank writes its ZeRO shard into one folder (a file system all ranks share)."""
        import torch.distributed as dist

        directory = Path(directory)
        # Rank 0 names the temporary folder and tells the others.
        names: list[str | None] = [None]
        if self.rank == 0:
            directory.parent.mkdir(parents=True, exist_ok=True)
            names[0] = tempfile.mkdtemp(
                prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent
            )
        dist.broadcast_object_list(names, src=0)
        tmp = Path(str(names[0]))
        try:
            self.engine.save_checkpoint(
                str(tmp),
                tag=DEEPSPEED_TAG,
                client_state={"global_step": self.global_step},
                save_latest=False,
            )
            self._barrier()
        except BaseException:
            if self.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self.rank == 0:
            swap_in_directory(tmp, directory)
        self._barrier()

    def load(self, directory: Path) -> None:
        directory = Path(directory)
        if not (directory / DEEPSPEED_TAG).is_dir():
            raise FileNotFoundError(
                f"no DeepSpeedLearner checkpoint at {directory / DEEPSPEED_TAG}"
            )
        path, client_state = self.engine.load_checkpoint(
            str(directory),
            tag=DEEPSPEED_TAG,
            load_optimizer_states=True,
            load_lr_scheduler_states=True,
        )
        if path is None:
            raise FileNotFoundError(f"DeepSpeed could not load a checkpoint from {directory}")
        self.global_step = int((client_state or {}).get("global_step", 0))


# --------------------------------------------------------------------------------------------


def make_learner(kind: LearnerKind | str, model: nn.Module, **kwargs: Any) -> Learner:
    """A learner by name, as the config selects it: ``local`` or ``deepspeed``."""
    if kind == "local":
        return LocalLearner(model, **kwargs)
    if kind == "deepspeed":
        if "lr" not in kwargs:
            raise ValueError("the deepspeed learner needs lr= (paper: 1e-6)")
        return DeepSpeedLearner(model, **kwargs)
    raise ValueError(f"unknown learner kind {kind!r}; choose one of {', '.join(LEARNER_KINDS)}")


__all__ = [
    "DEEPSPEED_TAG",
    "LEARNER_KINDS",
    "DeepSpeedLearner",
    "DistributedEnv",
    "Learner",
    "LocalLearner",
    "deepspeed_config",
    "distributed_env",
    "enable_gradient_checkpointing",
    "init_distributed",
    "load_partitioned",
    "make_learner",
    "scontrol_hostnames",
]
