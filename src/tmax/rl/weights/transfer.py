"""The trainer's weights into vLLM's workers after every step (paper §4), through vLLM's
own weight-transfer API.

vLLM serves RL through four calls on every engine (``vllm serve`` routes them over HTTP:
``/init_weight_transfer_engine``, ``/start_weight_update``, ``/update_weights``,
``/finish_weight_update``) and a *weight-transfer engine* in each of its workers that
receives the tensors and loads them with the model's own ``load_weights`` as they arrive
(vLLM's layerwise reload: fused and sharded, repacked for the kernels). The trainer (rank
0) and every worker of every engine (ranks 1..N) form one ``torch.distributed`` process
group of their own from a TCP store the trainer opens, and the trainer broadcasts byte
buckets of at most ``bucket_bytes``, each loaded by the workers on arrival: no engine host
ever holds a second copy of the model.

Two backends of ours, registered in vLLM's processes by our plugin
(:mod:`tmax.rl.engines.vllm_plugin`): ``tmax_nccl`` (GPUs) and ``tmax_gloo`` (CPU, and every test
here). vLLM's own ``nccl`` backend would need vLLM in the trainer's environment, which
cannot be: vLLM pins its own torch and transformers (0.33: torch 2.14, transformers < 5.21),
so it runs from an environment of its own; the sender here needs only torch. Because the
two environments may carry different NCCL builds, the workers refuse a trainer whose NCCL
version differs from theirs, naming both, instead of hanging in the first broadcast.

The workers check, when an update finishes, that it replaced the whole model, and fail
naming what was not loaded (vLLM itself only logs ``Failed to load weights`` and keeps the
old tensors). This module needs only torch: the worker side imports it inside vLLM's
environment, the trainer side in ours.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

log = logging.getLogger("tmax.rl.weights.transfer")

BACKENDS = {"tmax_gloo": "gloo", "tmax_nccl": "nccl"}
"""Our backends' names in vLLM's ``WeightTransferEngineFactory`` → torch.distributed's."""
BUCKET_BYTES = 256 * 2**20
"""Largest byte bucket of one broadcast (bigger tensors travel alone)."""
ALIGN = 16
"""Each tensor starts at a multiple of this many bytes in its bucket (so a slice can be
viewed as any dtype)."""
GROUP_TIMEOUT = timedelta(minutes=30)
STORE_PREFIX = "tmax-weights"


class WeightSyncClient(Protocol):
    """vLLM's ``VLLMWeightSyncClient``: the engine side of a weight update (one engine or
    many at once, see :class:`tmax.rl.vllm_server.VLLMServers`)."""

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None: ...

    def start_weight_update(self) -> None: ...

    def update_weights(self, update_info: dict[str, Any]) -> None: ...

    def finish_weight_update(self, weight_version: str | None = None) -> None: ...


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    """torch's name without the ``torch.`` prefix (``bfloat16``)."""

    @property
    def nbytes(self) -> int:
        import torch

        count = 1
        for size in self.shape:
            count *= size
        return count * torch.empty((), dtype=getattr(torch, self.dtype)).element_size()


def tensor_specs(weights: Mapping[str, torch.Tensor]) -> list[TensorSpec]:
    return [
        TensorSpec(name, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))
        for name, tensor in weights.items()
    ]


def update_info(specs: Sequence[TensorSpec]) -> dict[str, Any]:
    """What every worker is told before a broadcast (vLLM's NCCL update-info fields)."""
    return {
        "names": [s.name for s in specs],
        "dtype_names": [s.dtype for s in specs],
        "shapes": [list(s.shape) for s in specs],
    }


def specs_from_update_info(info: Mapping[str, Any]) -> list[TensorSpec]:
    names, dtypes, shapes = info["names"], info["dtype_names"], info["shapes"]
    if not len(names) == len(dtypes) == len(shapes):
        raise ValueError(
            f"update info lists differ in length: {len(names)} names, {len(dtypes)} dtypes, "
            f"{len(shapes)} shapes"
        )
    return [TensorSpec(n, tuple(s), d) for n, d, s in zip(names, dtypes, shapes, strict=True)]


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def buckets(specs: Sequence[TensorSpec], limit: int = BUCKET_BYTES) -> list[list[int]]:
    """Indices of ``specs`` in order, packed into buckets of at most ``limit`` bytes (each
    tensor aligned to :data:`ALIGN`); a tensor bigger than ``limit`` travels alone. The
    sender and every receiver compute this from the same specs, so they agree without
    saying more."""
    if limit < 1:
        raise ValueError(f"bucket limit must be positive, got {limit}")
    packed: list[list[int]] = []
    used = 0
    for index, spec in enumerate(specs):
        size = _aligned(spec.nbytes)
        if packed and used + size <= limit:
            packed[-1].append(index)
            used += size
        else:
            packed.append([index])
            used = size
    return packed


def _layout(specs: Sequence[TensorSpec], bucket: Sequence[int]) -> tuple[list[int], int]:
    offsets, total = [], 0
    for index in bucket:
        offsets.append(total)
        total += _aligned(specs[index].nbytes)
    return offsets, total


def pack(tensors: Sequence[torch.Tensor], offsets: Sequence[int], total: int,
         device: Any) -> torch.Tensor:  # fmt: skip
    """One uint8 buffer holding every tensor's bytes at its offset."""
    import torch

    flat = torch.zeros(total, dtype=torch.uint8, device=device)
    for tensor, offset in zip(tensors, offsets, strict=True):
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        flat[offset : offset + data.numel()].copy_(data)
    return flat


def unpack(
    flat: torch.Tensor, specs: Sequence[TensorSpec], bucket: Sequence[int], offsets: Sequence[int]
) -> list[tuple[str, torch.Tensor]]:
    """Views of ``flat`` as the bucket's named tensors (no copy)."""
    import torch

    pairs = []
    for index, offset in zip(bucket, offsets, strict=True):
        spec = specs[index]
        data = flat[offset : offset + spec.nbytes]
        pairs.append((spec.name, data.view(getattr(torch, spec.dtype)).view(spec.shape)))
    return pairs


# --------------------------------------------------------------------------------------------
# The group


class Broadcaster(Protocol):
    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> None: ...


class TorchGroup:
    """A ``torch.distributed`` process group of its own (gloo or NCCL), apart from any
    default group the process has (vLLM's workers and DeepSpeed ranks have one)."""

    def __init__(self, group: Any, store: Any, rank: int, size: int) -> None:
        self.group, self.rank, self.size = group, rank, size
        self._store = store  # the group needs its store alive

    @classmethod
    def open(
        cls, host: str, size: int, backend: str = "gloo"
    ) -> tuple[int, Callable[[], TorchGroup]]:
        """Rank 0's side: a store on a free port of ``host``. Returns the port (to tell
        the others) and the call that completes the group once they are joining."""
        import torch.distributed as dist

        store = dist.TCPStore(host, 0, size, True, timeout=GROUP_TIMEOUT, wait_for_workers=False)
        return int(store.port), lambda: cls(_process_group(backend, store, 0, size), store, 0, size)

    @classmethod
    def join(cls, host: str, port: int, rank: int, size: int, backend: str = "gloo") -> TorchGroup:
        import torch.distributed as dist

        store = dist.TCPStore(host, port, size, False, timeout=GROUP_TIMEOUT)
        return cls(_process_group(backend, store, rank, size), store, rank, size)

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> None:
        self.group.broadcast(tensor, src).wait()

    def close(self) -> None:
        self.group = None
        self._store = None


def _process_group(backend: str, store: Any, rank: int, size: int) -> Any:
    import torch.distributed as dist

    store = dist.PrefixStore(STORE_PREFIX, store)
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, size, GROUP_TIMEOUT)
    if backend == "nccl":
        return dist.ProcessGroupNCCL(store, rank, size)
    raise ValueError(f"unknown process-group backend {backend!r}; choose gloo or nccl")


def send_buckets(
    group: Broadcaster,
    specs: Sequence[TensorSpec],
    tensors: Iterable[tuple[str, torch.Tensor]],
    *,
    limit: int = BUCKET_BYTES,
    device: Any = "cpu",
) -> int:
    """Broadcast ``tensors`` (in ``specs`` order) from rank 0, one bucket at a time.
    Returns the bytes sent. A tensor that does not match its spec is an error naming it
    (the receivers would otherwise cut the stream elsewhere)."""
    stream = iter(tensors)
    sent = 0
    for bucket in buckets(specs, limit):
        offsets, total = _layout(specs, bucket)
        chunk = []
        for index in bucket:
            spec = specs[index]
            try:
                name, tensor = next(stream)
            except StopIteration:
                raise ValueError(f"the weights ended before {spec.name!r}") from None
            got = (name, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))
            if got != (spec.name, spec.shape, spec.dtype):
                raise ValueError(f"weight {index} is {got}, but the receivers expect "
                                 f"{(spec.name, spec.shape, spec.dtype)}")  # fmt: skip
            chunk.append(tensor)
        group.broadcast(pack(chunk, offsets, total, device), 0)
        sent += total
    if next(stream, None) is not None:
        raise ValueError(f"more weights than the {len(specs)} announced")
    return sent


def receive_buckets(
    group: Broadcaster,
    specs: Sequence[TensorSpec],
    *,
    limit: int = BUCKET_BYTES,
    device: Any = "cpu",
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """A receiver's side of :func:`send_buckets`: each bucket's named tensors as it
    arrives (views of one buffer, valid until the next bucket)."""
    import torch

    for bucket in buckets(specs, limit):
        offsets, total = _layout(specs, bucket)
        flat = torch.empty(total, dtype=torch.uint8, device=device)
        group.broadcast(flat, 0)
        yield unpack(flat, specs, bucket, offsets)


# --------------------------------------------------------------------------------------------
# Trainer side


class TorchSender:
    """The trainer side of ``tmax_gloo`` and ``tmax_nccl`` (see the module docstring)."""

    def __init__(self, client: WeightSyncClient, group: TorchGroup, backend: str,
                 bucket_bytes: int) -> None:  # fmt: skip
        self.client, self.group, self.backend = client, group, backend
        self.bucket_bytes = bucket_bytes

    @property
    def device(self) -> Any:
        return transfer_device(self.backend)

    @classmethod
    def trainer_init(
        cls,
        client: WeightSyncClient,
        *,
        host: str,
        workers: int,
        backend: str = "tmax_gloo",
        bucket_bytes: int = BUCKET_BYTES,
        untrained: Sequence[str] = (),
    ) -> TorchSender:
        """Open the group for this process and ``workers`` vLLM workers, have the engines
        join it (the client gives each engine its ranks), and return the sender.
        ``untrained``: patterns (fnmatch) of checkpoint tensors the trainer never sends
        (a frozen vision tower), which the workers' completeness check leaves out."""
        import threading

        if backend not in BACKENDS:
            raise ValueError(f"unknown weight-transfer backend {backend!r}; "
                             f"choose one of {sorted(BACKENDS)}")  # fmt: skip
        size = workers + 1
        port, complete = TorchGroup.open(host, size, BACKENDS[backend])
        nccl = nccl_version() if BACKENDS[backend] == "nccl" else None
        init = {"master_address": host, "master_port": port, "rank_offset": 1,
                "world_size": size, "bucket_bytes": bucket_bytes, "backend": backend,
                "nccl_version": nccl, "untrained": list(untrained)}  # fmt: skip
        failure: list[BaseException] = []

        def join() -> None:
            try:
                client.init_weight_transfer_engine(init)
            except BaseException as error:  # reported below, after the group forms or not
                failure.append(error)

        joining = threading.Thread(target=join, name="weight-transfer-init", daemon=True)
        joining.start()
        group = complete()
        joining.join()
        if failure:
            raise failure[0]
        log.info("weight-transfer group formed: this process and %d vLLM worker(s), %s",
                 workers, backend)  # fmt: skip
        return cls(client, group, backend, bucket_bytes)

    def send_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> int:
        """A whole state dict, bucket by bucket (the trainer streams instead:
        :meth:`start` and :class:`Push`)."""
        push = self.start(tensor_specs(weights))
        sent = send_buckets(self.group, push.specs, weights.items(), limit=self.bucket_bytes,
                            device=self.device)  # fmt: skip
        push.finish(version)
        return sent

    def start(self, specs: Sequence[TensorSpec]) -> Push:
        """Tell the engines an update of ``specs`` begins; send its buckets with
        :meth:`Push.send`, in :func:`buckets` order."""
        return Push(self, specs)

    def close(self) -> None:
        self.group.close()


class Push:
    """One weight update under way: the workers receive inside the engines'
    ``update_weights`` call, which runs on a thread beside the broadcasts."""

    def __init__(self, sender: TorchSender, specs: Sequence[TensorSpec]) -> None:
        import threading

        self.sender, self.specs = sender, list(specs)
        self.failure: list[BaseException] = []
        sender.client.start_weight_update()
        info = update_info(self.specs)

        def receive() -> None:
            try:
                sender.client.update_weights(info)
            except BaseException as error:
                self.failure.append(error)

        self.receiving = threading.Thread(target=receive, name="weight-transfer-update",
                                          daemon=True)  # fmt: skip
        self.receiving.start()

    def send(self, flat: torch.Tensor) -> None:
        """One bucket, packed (:func:`pack`'s layout), on the sender's device."""
        if self.failure:  # the engines will not take part: do not wait in the broadcast
            raise self.failure[0]
        self.sender.group.broadcast(flat, 0)

    def finish(self, version: int) -> None:
        self.receiving.join()
        if self.failure:
            raise self.failure[0]
        self.sender.client.finish_weight_update(str(version))


def transfer_device(backend: str) -> Any:
    """Where a backend's buckets live: the GPU for NCCL, the host for gloo."""
    import torch

    if BACKENDS[backend] == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def nccl_version() -> str:
    import torch

    return ".".join(str(part) for part in torch.cuda.nccl.version())


def default_backend() -> str:
    """NCCL where this process has a GPU, gloo elsewhere."""
    import torch

    return "tmax_nccl" if torch.cuda.is_available() else "tmax_gloo"
