"""Our vLLM plugin: what vLLM's processes load so that RL weight updates are complete.

Registered as a ``vllm.general_plugins`` entry point (``pyproject.toml``), so vLLM calls
:func:`register` in its API server, its engine core and every worker. It adds our two
weight-transfer backends to vLLM's ``WeightTransferEngineFactory`` (see
:mod:`tmax.rl.weights.transfer`), and :func:`require_engine_key`, the servers' guard.

``tmax_nccl`` (GPUs) and ``tmax_gloo`` (CPU machines, where vLLM's own backends need
CUDA): the trainer's broadcast, received bucket by bucket and loaded as it arrives. Both
load through vLLM's layerwise reload (every layer is fused, sharded and repacked for
its kernels once its weights are in) and then check that every parameter of the model
was loaded, raising with the names of those that were not: vLLM alone logs
``Failed to load weights`` and silently keeps the old tensors. A tied LM head (the tiny
Qwen3, Qwen3.5 2B/4B) is re-tied to the embedding after a reload, which is what the
trainer sends once.

Only this module and :mod:`tmax.rl.weights.transfer` (torch only) run inside vLLM's
environment.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from tmax.rl.weights import transfer as wt

log = logging.getLogger("vllm.tmax_plugin")  # under "vllm": printed by vLLM's log handler

_REGISTERED = False


def register() -> None:
    """vLLM's plugin hook (may run several times per process)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

    for backend in wt.BACKENDS:
        if backend not in WeightTransferEngineFactory._registry:
            WeightTransferEngineFactory.register_engine(backend, __name__,
                                                        "TorchWeightTransferEngine")  # fmt: skip
    _REGISTERED = True


class IncompleteWeightUpdate(RuntimeError):
    """A weight update that left parameters of the model unloaded."""


class _CheckedLoads:
    """Checks, when an update finishes, that it replaced the whole model. Mixed into a
    vLLM weight-transfer engine, whose ``self.model`` and ``self.model_config`` it uses.

    Two checks, because each misses what the other sees: every tensor of the checkpoint
    the engine was started from must have been received (by name; a tied LM head may be
    sent as the embedding alone) — a fused parameter such as ``qkv_proj`` counts as
    loaded when any of its parts arrived — and every parameter of vLLM's model must have
    been loaded (vLLM skips names it does not know, or a tied head, and logs only)."""

    model: torch.nn.Module
    model_config: Any
    _loaded: set[str]
    _received: set[str]
    _expected: set[str]
    _tied: list[Tie]
    _checkpoint_names: set[str] | None = None
    _untrained: list[str] = []  # noqa: RUF012 (patterns set per engine at init)

    def _start_checked(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        self._loaded, self._received = set(), set()
        self._tied = _tied_parameters(self.model)
        # Before the reload, which unties a shared head into a parameter of its own.
        self._expected = {name for name, _ in self.model.named_parameters()}
        if self._checkpoint_names is None:
            self._checkpoint_names = checkpoint_names(self.model_config)
        initialize_layerwise_reload(self.model)

    def _load(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        self._received.update(name for name, _ in weights)
        loaded = self.model.load_weights(weights)  # type: ignore[operator]
        self._loaded.update(loaded or ())

    def _finalize(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)
        for owner, name, source, source_name in self._tied:
            # A tied head gets no weights of its own: the reload puts back its tensor, now
            # the embedding's new one, but what its kernel uses (CPU: a prepacked copy)
            # was made from the old one. Tie it again and prepare it afresh.
            if getattr(owner, name) is not getattr(source, source_name):
                setattr(owner, name, getattr(source, source_name))
            method = getattr(owner, "quant_method", None)
            if method is not None:
                method.process_weights_after_loading(owner)

    def _problems(self) -> list[str]:
        problems = []
        if self._checkpoint_names:
            tied_head = bool(getattr(self.model_config.hf_config, "tie_word_embeddings", False))
            unsent = {n for n in self._checkpoint_names - self._received
                      if not (tied_head and n.endswith("lm_head.weight"))
                      and not any(fnmatch.fnmatchcase(n, p) for p in self._untrained)}  # fmt: skip
            if unsent:
                problems.append(f"{len(unsent)} tensor(s) of the checkpoint were not sent (a "
                                "weight the trainer does not train belongs in "
                                f"rl.engine_untrained_weights): {_names(unsent)}")  # fmt: skip
        unloaded = self._expected - self._loaded
        if unloaded:
            problems.append(f"{len(unloaded)} of {len(self._expected)} parameter(s) of "
                            f"vLLM's model were not loaded: {_names(unloaded)}")  # fmt: skip
        return problems

    def _check_received(self) -> None:
        """After the last bucket: an incomplete update is finalised (every layer whole
        again, old tensors where nothing came) and fails here, in ``update_weights``,
        which vLLM's worker unwinds (a failure in ``finish_weight_update`` would leave
        it in an update that can never start again)."""
        problems = self._problems()
        if problems:
            self._finalize()
            raise IncompleteWeightUpdate("incomplete weight update; the engine keeps old "
                                         "values for these: " + "; ".join(problems))  # fmt: skip

    def _finish_checked(self) -> None:
        self._finalize()
        log.info("weight update complete: %d tensor(s) received, %d parameter(s) loaded",
                 len(self._received), len(self._loaded))  # fmt: skip


def _names(names: set[str], shown: int = 12) -> str:
    ordered = sorted(names)
    return ", ".join(ordered[:shown]) + (" ..." if len(ordered) > shown else "")


def checkpoint_names(model_config: Any) -> set[str] | None:
    """The tensor names in the safetensors checkpoint the engine loaded at start (a local
    folder, or the Hub cache); None (the name check is skipped, logged) if not found."""
    import glob
    import os

    from safetensors import safe_open

    folder = str(model_config.model)
    if not os.path.isdir(folder):
        try:
            from huggingface_hub import snapshot_download

            revision = getattr(model_config, "revision", None)
            folder = snapshot_download(folder, revision=revision, local_files_only=True,
                                       allow_patterns=["*.safetensors"])  # fmt: skip
        except Exception as error:
            log.warning("no local checkpoint for %s (%s): weight updates are checked against "
                        "vLLM's parameters only", model_config.model, error)  # fmt: skip
            return None
    names: set[str] = set()
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        with safe_open(path, framework="pt") as handle:
            names.update(handle.keys())
    return names or None


Tie = tuple[torch.nn.Module, str, torch.nn.Module, str]


def _tied_parameters(model: torch.nn.Module) -> list[Tie]:
    """(module, name, owner, owner's name) for each parameter that is the same tensor as
    one registered earlier in the model (a tied LM head)."""
    first: dict[int, tuple[torch.nn.Module, str]] = {}
    tied = []
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            owner = first.setdefault(id(parameter), (module, name))
            if owner[0] is not module:
                tied.append((module, name, owner[0], owner[1]))
    return tied


# --------------------------------------------------------------------------------------------
# tmax_gloo and tmax_nccl


@dataclass
class TorchInitInfo:
    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    bucket_bytes: int = wt.BUCKET_BYTES
    backend: str = "tmax_gloo"
    nccl_version: str | None = None
    untrained: list[str] = field(default_factory=list)


@dataclass
class TorchUpdateInfo:
    names: list[str] = field(default_factory=list)
    dtype_names: list[str] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)


def _engine_base() -> type:
    from vllm.distributed.weight_transfer.base import WeightTransferEngine

    return WeightTransferEngine


class TorchWeightTransferEngine(_CheckedLoads, _engine_base()):  # type: ignore[misc]
    """The worker side of ``tmax_gloo`` and ``tmax_nccl``: joins the trainer's group as
    rank ``rank_offset`` + this worker's rank across the engine's data-parallel replicas,
    receives bucket by bucket (into this worker's device) and loads each as it arrives."""

    init_info_cls = TorchInitInfo
    update_info_cls = TorchUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, config: Any, vllm_config: Any, device: torch.device,
                 model: torch.nn.Module) -> None:  # fmt: skip
        super().__init__(config, vllm_config, device, model)
        self.group: wt.TorchGroup | None = None
        self._retired: list[wt.TorchGroup] = []
        """Groups this worker was in before the trainer formed a new one (an engine
        server died): kept, never torn down, since destroying a group whose peer died
        can block."""
        self.bucket_bytes = wt.BUCKET_BYTES
        self.kind = "gloo"

    def init_transfer_engine(self, init_info: TorchInitInfo) -> None:
        parallel = self.parallel_config
        rank = init_info.rank_offset + parallel.data_parallel_index * parallel.world_size
        rank += parallel.rank
        kind = wt.BACKENDS[init_info.backend]
        if kind == "nccl" and init_info.nccl_version != wt.nccl_version():
            raise RuntimeError(
                f"the trainer uses NCCL {init_info.nccl_version}, this vLLM worker NCCL "
                f"{wt.nccl_version()}: a broadcast between them may hang; give both "
                "environments the same NCCL (or torch) build"
            )
        self.bucket_bytes, self.kind = init_info.bucket_bytes, kind
        self._untrained = list(init_info.untrained)
        if self.group is not None:
            self._retired.append(self.group)
        self.group = wt.TorchGroup.join(init_info.master_address, init_info.master_port, rank,
                                        init_info.world_size, kind)  # fmt: skip
        log.info("joined the trainer's weight group as rank %d of %d (%s)", rank,
                 init_info.world_size, init_info.backend)  # fmt: skip

    def start_weight_update(self) -> None:
        self._start_checked()

    def receive_weights(self, update_info: TorchUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError("weight update before init_weight_transfer_engine")
        specs = wt.specs_from_update_info(vars(update_info))
        # gloo receives on the host (vLLM's loaders copy each tensor to the device); NCCL
        # straight into this worker's GPU.
        device = self.device if self.kind == "nccl" else torch.device("cpu")
        for pairs in wt.receive_buckets(self.group, specs, limit=self.bucket_bytes,
                                        device=device):  # fmt: skip
            self._load(pairs)
        self._check_received()

    def finish_weight_update(self) -> None:
        self._finish_checked()

    def shutdown(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None


# --------------------------------------------------------------------------------------------
# The engines' guard


async def require_engine_key(request: Any, call_next: Any) -> Any:
    """HTTP middleware of our engine servers (``--middleware``): every route but
    ``/health`` needs ``Authorization: Bearer <the launch's secret>`` (``TMAX_ENGINE_KEY``).
    vLLM's ``--api-key`` guards ``/v1`` only, not the weight-update and RPC routes that
    ``VLLM_SERVER_DEV_MODE`` opens."""
    import hashlib
    import hmac
    import os

    from fastapi.responses import JSONResponse

    key = os.environ.get("TMAX_ENGINE_KEY", "")
    if request.url.path == "/health" or request.method == "OPTIONS":
        return await call_next(request)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    expected = hashlib.sha256(key.encode()).digest()
    given = hashlib.sha256(token.encode()).digest()
    if not key or scheme.lower() != "bearer" or not hmac.compare_digest(given, expected):
        return JSONResponse({"error": "unauthorized"}, status_code=401)
    return await call_next(request)
