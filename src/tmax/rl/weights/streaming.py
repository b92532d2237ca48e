"""The weights after a step, gathered and handed on one bucket at a time (paper scale:
27B in bf16 is 50 GiB; rank 0's host must not hold it for every push and snapshot).

Every rank walks the learner's tensors in one order, in buckets of at most
``rl.push_bucket_mb`` (the layout of :func:`tmax.rl.weights.transfer.buckets`, which the
vLLM workers compute from the same specs, so a pushed bucket needs no further framing).
Under ZeRO-3 each tensor is gathered alone (a collective over the training group) and
rank 0 copies it into the bucket it is filling; a complete bucket goes to rank 0's
:class:`WeightSink` (the engines, a snapshot's shard) on a thread of its own while the
next one is gathered. So rank 0 holds at most two buckets plus the tensor being gathered.

The rank protocol, explicit: after each bucket every rank meets on the control group
(``rl.step_timeout_sec``, gloo, no NCCL watchdog). Rank 0 arrives there only once the
previous bucket has been handed on, so while it waits on an engine the other ranks wait
on the control group, never inside a training collective under
``rl.collective_timeout_sec``. A sink that fails mid-stream (an engine died) stops
receiving; the remaining buckets are still gathered, so every rank finishes the walk,
and rank 0 raises the sink's error afterwards. A rank that dies makes the others' next
gather or meeting fail under its timeout.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import torch

from tmax.io import swap_in_directory
from tmax.rl.launch import collective
from tmax.rl.weights.transfer import BUCKET_BYTES, TensorSpec, _layout, buckets, unpack

log = logging.getLogger("tmax.rl.weights.streaming")

MIB = 2**20


class WeightSink(Protocol):
    """Where rank 0's buckets go. :meth:`begin`, then :meth:`put` once per bucket in order
    (from one thread, not the caller's), then :meth:`finish`, or :meth:`abort` after a
    failure (of a ``put`` or of the gather). A sink whose receivers cut the stream by a
    bucket size of their own says so as ``bucket_bytes`` (the engines'); the trainer
    then streams in that size."""

    device: torch.device
    """Where the buckets are filled (a GPU for an NCCL push: no host copy at all)."""

    def begin(self, specs: Sequence[TensorSpec], limit: int) -> None: ...

    def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
        """``flat`` holds the tensors ``specs[i] for i in bucket`` at their aligned offsets
        (:func:`tmax.rl.weights.transfer.unpack` gives named views)."""
        ...

    def finish(self) -> None: ...

    def abort(self) -> None: ...


class StreamedWeights(Protocol):
    """What a learner offers the stream (both of ours do)."""

    def weight_tensors(self) -> list[tuple[str, torch.Tensor]]:
        """Every weight pushed and saved, in order (parameters, a shared one once, then
        persistent buffers, module by module), as this rank holds it."""
        ...

    def gathered(self, tensor: torch.Tensor) -> AbstractContextManager[Any]:
        """A context in which ``tensor`` is whole on every rank (a collective under ZeRO-3)."""
        ...


def shape_of(tensor: torch.Tensor) -> tuple[int, ...]:
    """The whole tensor's shape (a ZeRO-3 partition keeps it as ``ds_shape``)."""
    return tuple(getattr(tensor, "ds_shape", None) or tensor.shape)


def specs_of(pairs: Sequence[tuple[str, torch.Tensor]]) -> list[TensorSpec]:
    return [
        TensorSpec(name, shape_of(tensor), str(tensor.dtype).removeprefix("torch."))
        for name, tensor in pairs
    ]


def bucket_bytes(push_bucket_mb: float | None) -> int:
    """``rl.push_bucket_mb`` in bytes (None: the transfer's default)."""
    return int(push_bucket_mb) * MIB if push_bucket_mb is not None else BUCKET_BYTES


def _fill(flat: torch.Tensor, offset: int, tensor: torch.Tensor) -> None:
    data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    flat[offset : offset + data.numel()].copy_(data)


def gather_buckets(
    source: StreamedWeights,
    specs: Sequence[TensorSpec],
    tensors: Sequence[torch.Tensor],
    limit: int,
    device: torch.device | None,
) -> Iterator[tuple[list[int], torch.Tensor | None]]:
    """Each bucket of ``specs`` filled on ``device`` (``None``: this rank only takes part
    in the gathers, and gets ``None`` for the buffer). Collective under ZeRO-3."""
    with torch.no_grad():
        for bucket in buckets(specs, limit):
            offsets, total = _layout(specs, bucket)
            flat = torch.empty(total, dtype=torch.uint8, device=device) if device else None
            for index, offset in zip(bucket, offsets, strict=True):
                tensor = tensors[index]
                with source.gathered(tensor):
                    if flat is not None:
                        got = tuple(tensor.shape)
                        if got != specs[index].shape:
                            raise RuntimeError(f"{specs[index].name} gathered as {got}, "
                                               f"expected {specs[index].shape}")  # fmt: skip
                        _fill(flat, offset, tensor)
            yield bucket, flat


def stream_weights(
    source: StreamedWeights,
    sink: WeightSink | None,
    *,
    limit: int = BUCKET_BYTES,
    control: Any = None,
) -> int:
    """Hand every weight of ``source`` to ``sink`` bucket by bucket (see the module).
    Collective: every rank calls it; rank 0 passes its sink, the others ``None``.
    Returns the bytes handed on (0 on other ranks)."""
    pairs = source.weight_tensors()
    specs = specs_of(pairs)
    tensors = [tensor for _, tensor in pairs]
    failure: BaseException | None = None
    if sink is not None:
        try:
            sink.begin(specs, limit)
        except Exception as error:  # the others still walk: fail after the walk
            failure = error
    sent = 0
    pending: Future[None] | None = None

    def settle() -> None:
        nonlocal failure, pending
        if pending is not None:
            error = pending.exception()
            failure = failure or error
            pending = None

    with ThreadPoolExecutor(1, thread_name_prefix="weight-stream") as pool:
        try:
            device = sink.device if sink is not None else None
            for bucket, flat in gather_buckets(source, specs, tensors, limit, device):
                settle()  # the previous bucket is handed on before the ranks meet
                collective.barrier(control)
                if sink is not None and failure is None and flat is not None:
                    pending = pool.submit(sink.put, bucket, flat)
                    sent += flat.numel()
                del flat
            settle()
        except BaseException:
            settle()
            if sink is not None:
                _abort(sink)
            raise
    if sink is not None:
        if failure is not None:
            _abort(sink)
            raise failure
        sink.finish()
    return sent


def _abort(sink: WeightSink) -> None:
    try:
        sink.abort()
    except Exception as error:  # the first failure is the one to report
        log.warning("aborting the weight stream failed too: %s", error)


def stream_state_dict(
    weights: Mapping[str, torch.Tensor], sink: WeightSink, *, limit: int = BUCKET_BYTES
) -> int:
    """A whole state dict (already on this process) through ``sink`` the same way."""
    return stream_weights(_Whole(weights), sink, limit=limit)


class _Whole:
    def __init__(self, weights: Mapping[str, torch.Tensor]) -> None:
        self.weights = weights

    def weight_tensors(self) -> list[tuple[str, torch.Tensor]]:
        return list(self.weights.items())

    def gathered(self, tensor: torch.Tensor) -> AbstractContextManager[Any]:
        return nullcontext()


class StateDictSink:
    """Every bucket's tensors copied into one dict (tests, and ``full_state_dict``)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.weights: dict[str, torch.Tensor] = {}
        self.specs: Sequence[TensorSpec] = ()

    def begin(self, specs: Sequence[TensorSpec], limit: int) -> None:
        self.specs, self._limit = specs, limit

    def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
        offsets, _ = _layout(self.specs, bucket)
        for name, tensor in unpack(flat, self.specs, bucket, offsets):
            self.weights[name] = tensor.clone()

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        self.weights = {}


class LoadingSink:
    """Every bucket copied into ``model``'s own tensors as it arrives (the in-process
    transformers engine); at the end every tensor of the model must have been given,
    except one tied to a given one."""

    def __init__(self, model: torch.nn.Module, on_finish: Callable[[], None],
                 lock: AbstractContextManager[Any] | None = None) -> None:  # fmt: skip
        self.model, self.on_finish = model, on_finish
        self.lock = lock if lock is not None else nullcontext()
        self.device = next(model.parameters()).device
        self.own = model.state_dict(keep_vars=True)
        self.given: set[str] = set()
        self.specs: Sequence[TensorSpec] = ()

    def begin(self, specs: Sequence[TensorSpec], limit: int) -> None:
        unknown = [s.name for s in specs if s.name not in self.own]
        if unknown:
            raise ValueError(f"the state dict does not match the model: unexpected "
                             f"{sorted(unknown)[:5]}")  # fmt: skip
        self.specs = specs
        self.lock.__enter__()  # no generation while the weights are half replaced

    def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
        offsets, _ = _layout(self.specs, bucket)
        with torch.no_grad():
            for name, tensor in unpack(flat, self.specs, bucket, offsets):
                self.own[name].data.copy_(tensor)
                self.given.add(name)

    def finish(self) -> None:
        pointers = {self.own[name].data_ptr() for name in self.given}
        missing = [n for n, t in self.own.items() if n not in self.given
                   and t.data_ptr() not in pointers]  # fmt: skip
        try:
            if missing:
                raise ValueError(f"the state dict does not match the model: missing {missing[:5]}")
            self.on_finish()
        finally:
            self.lock.__exit__(None, None, None)

    def abort(self) -> None:
        if self.specs:
            self.lock.__exit__(None, None, None)


# --------------------------------------------------------------------------------------------
# Snapshots: sharded safetensors, one shard per bucket


INDEX_FILE = "model.safetensors.index.json"


SINGLE_FILE = "model.safetensors"


def shard_name(index: int, count: int) -> str:
    """transformers' naming, which vLLM and ``from_pretrained`` read: one file is
    ``model.safetensors`` (with no index), several are numbered shards."""
    return SINGLE_FILE if count == 1 else f"model-{index + 1:05d}-of-{count:05d}.safetensors"


class SnapshotSink:
    """A servable folder of the streamed weights at ``output``: ``model_dir``'s other
    files (config, tokenizer), and the weights as safetensors shards, one per bucket, cast
    to the checkpoint's dtype, with transformers' index (a model of one bucket is one
    ``model.safetensors``, as ``save_pretrained`` writes it). Written beside ``output`` and
    renamed into place when complete: a crash mid-snapshot leaves the previous one. At
    the end the names are checked against the architecture (built on the meta device, no
    memory), as transformers would when loading."""

    def __init__(self, model_dir: Path, output: Path, tokenizer: Any = None) -> None:
        self.model_dir, self.output, self.tokenizer = Path(model_dir), Path(output), tokenizer
        self.device = torch.device("cpu")
        self.tmp = self.output.with_name(f".{self.output.name}.tmp")
        self.specs: Sequence[TensorSpec] = ()
        self.weight_map: dict[str, str] = {}
        self.count = 0
        self.written = 0
        self.total_size = 0
        self.dtype = _checkpoint_dtype(self.model_dir)

    def begin(self, specs: Sequence[TensorSpec], limit: int) -> None:
        self.specs = specs
        self._check_names({spec.name for spec in specs})
        self.count = len(buckets(specs, limit))
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.copytree(self.model_dir, self.tmp, ignore=shutil.ignore_patterns(
            "*.safetensors", INDEX_FILE, "*.bin", "tmax_build.json"))  # fmt: skip
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(self.tmp)

    def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
        offsets, _ = _layout(self.specs, bucket)
        name = shard_name(self.written, self.count)
        tensors = unpack(flat, self.specs, bucket, offsets)
        self.total_size += write_safetensors(self.tmp / name, tensors, self.dtype)
        self.weight_map.update(dict.fromkeys((key for key, _ in tensors), name))
        self.written += 1

    def finish(self) -> None:
        if self.written != self.count:
            raise RuntimeError(f"snapshot {self.output}: {self.written} of {self.count} shards")
        if self.count > 1:
            weight_map = dict(sorted(self.weight_map.items()))
            index = {"metadata": {"total_size": self.total_size}, "weight_map": weight_map}
            (self.tmp / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
        swap_in_directory(self.tmp, self.output)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _check_names(self, given: set[str]) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(self.model_dir)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        own = model.state_dict()
        unexpected = sorted(given - set(own))
        # a tensor tied to a given one (the LM head of tied embeddings) is saved once
        pointers: dict[int, str] = {}
        for name, tensor in model.named_parameters(remove_duplicate=False):
            pointers.setdefault(id(tensor), name)
        tied = {name for name, t in model.named_parameters(remove_duplicate=False)
                if pointers[id(t)] in given}  # fmt: skip
        missing = sorted(set(own) - given - tied)
        if unexpected or missing:
            raise ValueError(f"the weights do not match {self.model_dir}'s architecture: "
                             f"unexpected {unexpected[:5]}, missing {missing[:5]}")  # fmt: skip


SAFETENSORS_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}  # fmt: skip


def write_safetensors(
    path: Path, tensors: Sequence[tuple[str, torch.Tensor]], dtype: torch.dtype
) -> int:
    """One safetensors file of ``tensors`` (floating ones cast to ``dtype``), written
    tensor by tensor from the bucket's own memory: beside the bucket, at most one cast
    tensor exists at a time (``safetensors.torch.save_file`` would first copy the whole
    shard into bytes). Returns the data bytes written."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    start = 0
    for name, tensor in tensors:
        kind = dtype if tensor.is_floating_point() else tensor.dtype
        size = tensor.numel() * torch.empty((), dtype=kind).element_size()
        header[name] = {"dtype": SAFETENSORS_DTYPES[kind], "shape": list(tensor.shape),
                        "data_offsets": [start, start + size]}  # fmt: skip
        start += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as handle:
        handle.write(len(encoded).to_bytes(8, "little"))
        handle.write(encoded)
        for _, tensor in tensors:
            if tensor.is_floating_point() and tensor.dtype != dtype:
                tensor = tensor.to(dtype)
            handle.write(tensor.contiguous().reshape(-1).view(torch.uint8).numpy().data)
    return start


def _checkpoint_dtype(model_dir: Path) -> torch.dtype:
    from transformers import AutoConfig

    dtype = getattr(AutoConfig.from_pretrained(model_dir), "dtype", None) or torch.float32
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype
