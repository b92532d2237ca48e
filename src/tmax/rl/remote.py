"""Inference engines on other nodes (paper: 2 training nodes and 6 of vLLM engines).

An :class:`EngineServer` hosts one engine (:mod:`tmax.rl.engine`: vLLM on a GPU node,
transformers on CPU) in its own process and answers ``generate`` calls over TCP
(``multiprocessing.connection``: pickled messages after an HMAC handshake on a shared
secret, so a stray process cannot talk to it). A :class:`RemoteEngine` on training rank 0
is the :class:`~tmax.rl.engine.Engine` the trainer and rollouts already use, spread over
every server:

    engine = RemoteEngine(addresses, authkey)          # [("node7", 41234), ...]
    [generation] = engine.generate([prompt_ids], max_tokens=64, temperature=1.0,
                                   stop_token_ids=[im_end], seed=0)
    engine.update_weights(trainer_state_dict, version=step)
    engine.close()                                      # the servers exit

``generate`` goes to the server with the fewest requests in flight; each server merges
the calls that reach it into batches as the in-process engines do. Weights do not travel
over that channel: the trainer and the servers form a *weight group* of their own — a
``torch.distributed`` process group (NCCL between GPUs, gloo on CPU) built from its own
TCP store, beside the trainer ranks' DeepSpeed group — and after each step rank 0
broadcasts every tensor, packed into flat buckets per dtype, to all servers at once.
The servers load them into their engines and report the new policy version.

Servers are started by the training job's launcher (:mod:`tmax.rl.launch`) with one
``srun`` over the inference nodes, one per GPU (``engines_per_node``) or one per node
on CPU: ``python -m tmax.rl.remote <run_dir>/engines/server.json``. Each writes its
address to ``engines/engine-<index>.json`` when it is ready; rank 0 waits for them all
(:func:`wait_for_servers`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmax.io import write_json
from tmax.rl.engine import Engine, Generation, _check_request

if TYPE_CHECKING:
    import torch

log = logging.getLogger("tmax.rl.remote")

Address = tuple[str, int]
BUCKET_BYTES = 512 * 2**20
"""Largest flat buffer of one weight broadcast (bigger models take several)."""
GROUP_TIMEOUT = timedelta(minutes=30)


class EngineServerError(RuntimeError):
    """A server failed a request or went away; the message names it."""


# --------------------------------------------------------------------------------------------
# The weight group


def _process_group(backend: str, store: Any, rank: int, size: int) -> Any:
    import torch.distributed as dist

    store = dist.PrefixStore("tmax-weights", store)
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, size, GROUP_TIMEOUT)
    if backend == "nccl":
        return dist.ProcessGroupNCCL(store, rank, size)
    raise ValueError(f"unknown weight-group backend {backend!r}; choose nccl or gloo")


class WeightGroup:
    """Rank 0 (the trainer) and ranks 1..N (the servers), apart from any other group."""

    def __init__(self, group: Any, backend: str, rank: int) -> None:
        self.group, self.backend, self.rank = group, backend, rank
        self._store: Any = None

    @classmethod
    def host(cls, host: str, size: int, backend: str) -> tuple[int, Callable[[], WeightGroup]]:
        """Open rank 0's store on a free port of ``host``; returns the port (to tell the
        servers) and the call that completes the group once they are joining."""
        import torch.distributed as dist

        store = dist.TCPStore(host, 0, size, True, timeout=GROUP_TIMEOUT, wait_for_workers=False)

        def complete() -> WeightGroup:
            group = cls(_process_group(backend, store, 0, size), backend, 0)
            group._store = store
            return group

        return int(store.port), complete

    @classmethod
    def join(cls, host: str, port: int, rank: int, size: int, backend: str) -> WeightGroup:
        import torch.distributed as dist

        store = dist.TCPStore(host, port, size, False, timeout=GROUP_TIMEOUT)
        group = cls(_process_group(backend, store, rank, size), backend, rank)
        group._store = store
        return group

    @property
    def device(self) -> torch.device:
        import torch

        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def broadcast(self, tensor: torch.Tensor) -> None:
        """Rank 0's ``tensor`` into every rank's ``tensor`` (same shape and dtype)."""
        self.group.broadcast(tensor, 0).wait()


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


def buckets(specs: Sequence[TensorSpec], limit: int = BUCKET_BYTES) -> list[list[int]]:
    """Indices of ``specs`` packed into flat buffers: one dtype per bucket, in order, each
    at most ``limit`` bytes unless one tensor alone is bigger. Sender and receivers call
    it on the same specs, so they agree without saying more."""
    import torch

    packed: list[list[int]] = []
    open_bucket: dict[str, tuple[list[int], int]] = {}
    for index, spec in enumerate(specs):
        size = spec.numel * torch.empty((), dtype=getattr(torch, spec.dtype)).element_size()
        current = open_bucket.get(spec.dtype)
        if current is not None and current[1] + size <= limit:
            current[0].append(index)
            open_bucket[spec.dtype] = (current[0], current[1] + size)
            continue
        bucket = [index]
        packed.append(bucket)
        open_bucket[spec.dtype] = (bucket, size)
    return packed


def weight_specs(state_dict: Mapping[str, torch.Tensor]) -> list[TensorSpec]:
    return [
        TensorSpec(name, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))
        for name, tensor in state_dict.items()
    ]


def broadcast_buckets(
    group: WeightGroup,
    specs: Sequence[TensorSpec],
    state_dict: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """Rank 0 sends ``state_dict`` (described by ``specs``); every other rank receives
    and returns its copy. Tensors travel as one flat buffer per bucket."""
    import torch

    received: dict[str, torch.Tensor] = {}
    device = group.device
    for bucket in buckets(specs):
        dtype = getattr(torch, specs[bucket[0]].dtype)
        if group.rank == 0:
            assert state_dict is not None
            flat = torch.cat(
                [state_dict[specs[i].name].detach().reshape(-1).to(device) for i in bucket]
            )
        else:
            flat = torch.empty(sum(specs[i].numel for i in bucket), dtype=dtype, device=device)
        group.broadcast(flat)
        if group.rank == 0:
            continue
        offset = 0
        for i in bucket:
            spec = specs[i]
            received[spec.name] = flat[offset : offset + spec.numel].view(spec.shape)
            offset += spec.numel
    return received


def weights_digest(state_dict: Mapping[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and bytes: equal digests are equal weights."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# The server


def _reply_error(connection: Connection, error: BaseException) -> None:
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    connection.send(("error", f"{text}\n{traceback.format_exc(limit=8)}"))


class EngineServer:
    """One engine behind a TCP listener; each client connection gets a thread.

    Operations (``(op, payload)`` in, ``("ok", value)`` or ``("error", text)`` out):
    ``generate`` (the :class:`~tmax.rl.engine.Engine` keywords), ``join`` (enter the
    weight group), ``update_weights`` (receive a broadcast, load it), ``status``
    (policy version and, with ``digest``, a digest of the weights), ``shutdown``.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        authkey: bytes,
        bind: str = "0.0.0.0",
        port: int = 0,
        advertise: str | None = None,
        state_dict: Callable[[], Mapping[str, torch.Tensor]] | None = None,
    ) -> None:
        self.engine = engine
        self._authkey = authkey
        self._listener = Listener((bind, port), authkey=authkey)
        self.address: Address = (advertise or socket.gethostname(), self._listener.address[1])
        self._state_dict = state_dict
        self._group: WeightGroup | None = None
        self._stopping = threading.Event()
        self._count_lock = threading.Lock()
        self.requests = 0

    def serve_forever(self) -> None:
        """Answer clients until one sends ``shutdown``."""
        log.info("engine server listening on %s:%d", *self.address)
        while not self._stopping.is_set():
            try:
                connection = self._listener.accept()
            except (OSError, EOFError, AuthenticationError) as error:  # not one of ours
                if not self._stopping.is_set():
                    log.warning("refused a connection: %s", error)
                continue
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()
        self._listener.close()
        # Drop the weight group now, while the process is whole: a process group left to
        # interpreter teardown can abort it (std::terminate in a backend thread).
        self._group = None
        log.info("engine server on %s:%d stopped after %d request(s)", *self.address,
                 self.requests)  # fmt: skip

    def _handle(self, connection: Connection) -> None:
        with connection:
            while not self._stopping.is_set():
                try:
                    op, payload = connection.recv()
                except (EOFError, OSError):
                    return
                try:
                    connection.send(("ok", self._dispatch(op, payload)))
                except Exception as error:
                    log.exception("request %r failed", op)
                    _reply_error(connection, error)
                if op == "shutdown":
                    self._wake_accept()
                    return

    def _dispatch(self, op: str, payload: Mapping[str, Any]) -> Any:
        if op == "generate":
            with self._count_lock:  # connection threads count concurrently
                self.requests += 1
            return self.engine.generate(**payload)
        if op == "join":
            self._group = WeightGroup.join(**payload)
            log.info("joined the weight group as rank %d of %d (%s)", payload["rank"],
                     payload["size"], payload["backend"])  # fmt: skip
            return self._group.rank
        if op == "update_weights":
            if self._group is None:
                raise EngineServerError("update_weights before join: no weight group")
            specs = [
                TensorSpec(name, tuple(shape), dtype) for name, shape, dtype in payload["specs"]
            ]
            weights = broadcast_buckets(self._group, specs)
            self.engine.update_weights(weights, payload["version"])
            return self.engine.policy_version
        if op == "status":
            status: dict[str, Any] = {"policy_version": self.engine.policy_version,
                                      "requests": self.requests}  # fmt: skip
            if payload.get("digest"):
                if self._state_dict is None:
                    raise EngineServerError("this engine cannot report its weights")
                status["digest"] = weights_digest(self._state_dict())
            return status
        if op == "shutdown":
            self._stopping.set()
            return None
        raise EngineServerError(f"unknown operation {op!r}")

    def _wake_accept(self) -> None:
        """``accept`` blocks: one last connection lets the loop see the stop flag."""
        with suppress(OSError):
            Client(self.address, authkey=self._authkey).close()


# --------------------------------------------------------------------------------------------
# The client


class _Server:
    """A pool of connections to one server, and the ``generate`` calls in flight there."""

    def __init__(self, address: Address, authkey: bytes, index: int) -> None:
        self.address, self.index = address, index
        self._authkey = authkey
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self.in_flight = 0

    @property
    def name(self) -> str:
        return f"engine server {self.index} ({self.address[0]}:{self.address[1]})"

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        with self._lock:
            connection = self._idle.pop() if self._idle else None
        broken = False
        try:
            if connection is None:
                try:
                    connection = Client(self.address, authkey=self._authkey)
                except (OSError, AuthenticationError) as error:
                    broken = True
                    raise EngineServerError(f"cannot reach {self.name}: {error!r}") from error
            yield connection
        except (EOFError, OSError) as error:
            broken = True
            raise EngineServerError(f"{self.name} went away: {error!r}") from error
        except BaseException:
            broken = True  # a half-read reply would confuse the next caller
            raise
        finally:
            with self._lock:
                if connection is not None and not broken:
                    self._idle.append(connection)
                elif connection is not None:
                    connection.close()

    def call(self, op: str, payload: Mapping[str, Any]) -> Any:
        with self.connection() as connection:
            connection.send((op, dict(payload)))
            return self.answer(connection, op)

    def answer(self, connection: Connection, op: str) -> Any:
        status, value = connection.recv()
        if status != "ok":
            raise EngineServerError(f"{self.name} failed {op}: {value}")
        return value

    def close(self) -> None:
        with self._lock:
            for connection in self._idle:
                connection.close()
            self._idle.clear()


class RemoteEngine:
    """The :class:`~tmax.rl.engine.Engine` interface over engine servers (see module)."""

    def __init__(
        self,
        addresses: Sequence[Address],
        authkey: bytes,
        *,
        backend: str | None = None,
        host: str | None = None,
    ) -> None:
        """``backend`` of the weight group: NCCL when this process has CUDA, else gloo;
        ``host``: the name the servers reach this process by (default its hostname)."""
        if not addresses:
            raise ValueError("a RemoteEngine needs at least one engine server")
        self._servers = [_Server(tuple(a), authkey, i) for i, a in enumerate(addresses)]  # type: ignore[arg-type]
        self._backend = backend
        self._host = host or socket.gethostname()
        self._group: WeightGroup | None = None
        self._choose = threading.Lock()
        versions = {s.call("status", {})["policy_version"] for s in self._servers}
        if len(versions) != 1:
            raise EngineServerError(f"engine servers hold different policy versions: {versions}")
        self.policy_version = versions.pop()
        log.info("remote engine: %d server(s) at policy version %d", len(self._servers),
                 self.policy_version)  # fmt: skip

    @property
    def servers(self) -> int:
        return len(self._servers)

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        temperature: float,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
    ) -> list[Generation]:
        _check_request(prompts, max_tokens, temperature)
        if not prompts:
            return []
        with self._choose:
            server = min(self._servers, key=lambda s: (s.in_flight, s.index))
            # Count it now, so concurrent callers spread over the servers.
            server.in_flight += 1
        try:
            request = {"prompts": [list(p) for p in prompts], "max_tokens": max_tokens,
                       "temperature": temperature, "stop_token_ids": list(stop_token_ids),
                       "seed": seed}  # fmt: skip
            return server.call("generate", request)  # type: ignore[no-any-return]
        finally:
            with self._choose:
                server.in_flight -= 1

    def _weight_group(self) -> WeightGroup:
        """Form the weight group on first use: tell every server to join, then join."""
        if self._group is not None:
            return self._group
        import torch

        backend = self._backend or ("nccl" if torch.cuda.is_available() else "gloo")
        size = len(self._servers) + 1
        port, complete = WeightGroup.host(self._host, size, backend)
        with self._holding_connections() as connections:
            for rank, (_, connection) in enumerate(connections, start=1):
                payload = {"host": self._host, "port": port, "rank": rank, "size": size,
                           "backend": backend}  # fmt: skip
                connection.send(("join", payload))
            self._group = complete()
            for server, connection in connections:
                server.answer(connection, "join")
        log.info("weight group formed: this process and %d engine server(s), %s",
                 len(self._servers), backend)  # fmt: skip
        return self._group

    @contextmanager
    def _holding_connections(self) -> Iterator[list[tuple[_Server, Connection]]]:
        """One connection to every server at once (for operations all servers take part in)."""
        with ExitStack() as stack:
            yield [(s, stack.enter_context(s.connection())) for s in self._servers]

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Broadcast ``state_dict`` to every server over the weight group; returns once
        all have loaded it. The caller makes sure no ``generate`` is in flight."""
        group = self._weight_group()
        specs = weight_specs(state_dict)
        started = time.monotonic()
        with self._holding_connections() as connections:
            message = {"specs": [(s.name, list(s.shape), s.dtype) for s in specs],
                       "version": version}  # fmt: skip
            for _, connection in connections:
                connection.send(("update_weights", message))
            broadcast_buckets(group, specs, state_dict)
            versions = [server.answer(connection, "update_weights")
                        for server, connection in connections]  # fmt: skip
        if set(versions) != {version}:
            raise EngineServerError(f"engine servers report versions {versions} after pushing "
                                    f"version {version}")  # fmt: skip
        self.policy_version = version
        log.info("pushed policy version %d to %d engine server(s) in %.2f s", version,
                 len(self._servers), time.monotonic() - started)  # fmt: skip

    def status(self, *, digest: bool = False) -> list[dict[str, Any]]:
        return [server.call("status", {"digest": digest}) for server in self._servers]

    def close(self) -> None:
        """Tell every server to exit (servers already gone are skipped)."""
        for server in self._servers:
            try:
                server.call("shutdown", {})
            except EngineServerError as error:
                log.warning("%s", error)
            server.close()
        self._group = None


# --------------------------------------------------------------------------------------------
# Starting servers and finding them

SERVER_FILE = "server.json"
AUTHKEY_FILE = "authkey"
CLOSED_FILE = "closed"
"""Written by rank 0 before it tells the servers to exit: from then on, how a server
process ends no longer matters to the training job."""


def mark_closed(directory: Path) -> None:
    (directory / CLOSED_FILE).touch()


def closed(directory: Path) -> bool:
    return (directory / CLOSED_FILE).exists()


def address_file(directory: Path, index: int) -> Path:
    return directory / f"engine-{index}.json"


def prepare_server_dir(directory: Path, settings: Mapping[str, Any]) -> Path:
    """A fresh ``directory`` with the servers' settings and a new secret (mode 0600);
    addresses left by an earlier attempt are removed. Returns the settings file."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("engine-*.json"):
        stale.unlink()
    (directory / CLOSED_FILE).unlink(missing_ok=True)
    key = directory / AUTHKEY_FILE
    key.unlink(missing_ok=True)
    descriptor = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(os.urandom(32).hex())
    write_json(directory / SERVER_FILE, dict(settings))
    return directory / SERVER_FILE


def read_authkey(directory: Path) -> bytes:
    return bytes.fromhex((directory / AUTHKEY_FILE).read_text().strip())


def wait_for_servers(
    directory: Path,
    count: int,
    *,
    timeout_s: float = 1800.0,
    failed: Callable[[], str | None] | None = None,
) -> list[Address]:
    """The addresses of servers ``0..count-1`` once each has written its file. Raises
    after ``timeout_s`` naming the missing ones, or as soon as ``failed()`` (if given)
    returns a reason."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [i for i in range(count) if not address_file(directory, i).is_file()]
        if not missing:
            break
        reason = failed() if failed is not None else None
        if reason:
            raise EngineServerError(f"engine servers failed before they were ready: {reason}")
        if time.monotonic() > deadline:
            raise EngineServerError(
                f"engine server(s) {missing} did not start within {timeout_s:.0f} s "
                f"(no {address_file(directory, missing[0]).name} in {directory}); "
                "see their logs (engine<N>.log beside the rank logs)"
            )
        time.sleep(0.5)
    addresses = []
    for index in range(count):
        entry = json.loads(address_file(directory, index).read_text())
        addresses.append((str(entry["host"]), int(entry["port"])))
    return addresses


@contextmanager
def local_servers(
    directory: Path, settings: Mapping[str, Any], count: int, *, timeout_s: float = 600.0
) -> Iterator[list[Address]]:
    """``count`` engine servers as child processes on this machine (what ``srun`` starts
    on the inference nodes), their logs ``engine<N>.log`` in ``directory``; yields their
    addresses once all are ready and stops them afterwards."""
    import subprocess

    settings_file = prepare_server_dir(directory, settings)
    from tmax.rl.launch import _rank_env

    env = _rank_env({"threads": settings.get("threads", 1)})
    processes = []
    for index in range(count):
        with (directory / f"engine{index}.log").open("wb") as log_file:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "tmax.rl.remote", str(settings_file), str(index)],
                env=env, stdout=log_file, stderr=subprocess.STDOUT,
            ))  # fmt: skip

    def failed() -> str | None:
        codes = [process.poll() for process in processes]
        if all(code is None for code in codes):
            return None
        return f"exit statuses {codes}; see {directory}/engine<N>.log"

    try:
        yield wait_for_servers(directory, count, timeout_s=timeout_s, failed=failed)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def gpu_slice(local_index: int, per_server: int, environ: Mapping[str, str]) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` for the ``local_index``-th server on a node when each holds
    ``per_server`` GPUs (tensor parallel size), or None when the node has no GPUs listed."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        count = environ.get("SLURM_GPUS_ON_NODE")
        if not (count or "").isdigit():
            return None
        visible = ",".join(str(i) for i in range(int(count or 0)))
    devices = [d for d in visible.split(",") if d]
    chosen = devices[local_index * per_server : (local_index + 1) * per_server]
    if len(chosen) < per_server:
        raise RuntimeError(
            f"engine server {local_index} of this node needs GPUs "
            f"{local_index * per_server}..{(local_index + 1) * per_server - 1} but the node "
            f"gives {len(devices)} ({visible!r}); lower rl.engines_per_node"
        )
    return ",".join(chosen)


def serve(settings_file: Path, index: int, local_index: int = 0) -> None:
    """Build the engine ``settings_file`` describes, write this server's address, serve.

    Settings: ``model_dir``, ``engine`` (transformers | vllm), ``tensor_parallel``,
    ``threads``, and for vLLM ``engine_options`` (more ``vllm.LLM`` keywords, e.g.
    ``gpu_memory_utilization``).
    """
    directory = settings_file.parent
    settings = json.loads(settings_file.read_text())
    kind = settings["engine"]
    if kind == "vllm":
        devices = gpu_slice(local_index, int(settings.get("tensor_parallel", 1)), os.environ)
        if devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = devices  # before CUDA is initialised
    import torch

    torch.set_num_threads(int(settings.get("threads", 1)))
    state_dict: Callable[[], Mapping[str, torch.Tensor]] | None = None
    engine: Engine
    if kind == "vllm":
        from tmax.rl.engine import VLLMEngine

        parallel = int(settings.get("tensor_parallel", 1))
        engine = VLLMEngine(settings["model_dir"], tensor_parallel_size=parallel,
                            **settings.get("engine_options", {}))  # fmt: skip
        if torch.cuda.is_available():
            torch.cuda.set_device(0)  # the weight group's buffers: this server's first GPU
    elif kind == "transformers":
        from transformers import AutoTokenizer

        from tmax.rl.engine import TransformersEngine

        model_dir = Path(settings["model_dir"])
        has_tokenizer = (model_dir / "tokenizer_config.json").is_file()
        tokenizer = AutoTokenizer.from_pretrained(model_dir) if has_tokenizer else None
        local = TransformersEngine(model_dir, tokenizer)
        engine, state_dict = local, local.model.state_dict
    else:
        raise ValueError(f"{settings_file}: unknown engine {kind!r}")
    server = EngineServer(engine, authkey=read_authkey(directory), state_dict=state_dict,
                          advertise=os.environ.get("TMAX_ENGINE_HOST"))  # fmt: skip
    entry = {"host": server.address[0], "port": server.address[1], "pid": os.getpid(),
             "index": index, "engine": kind}  # fmt: skip
    write_json(address_file(directory, index), entry)
    log.info("engine server %d (%s) ready on node %s", index, kind,
             os.environ.get("SLURMD_NODENAME") or socket.gethostname())  # fmt: skip
    server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tmax.rl.remote <engines>/server.json [index]``: one engine server.

    The index defaults to Slurm's task number (``SLURM_PROCID``), the node-local one to
    ``SLURM_LOCALID``."""
    from tmax.logs import setup_logging

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        print("usage: python -m tmax.rl.remote <engines>/server.json [index]", file=sys.stderr)
        return 2
    setup_logging(None)
    index = int(args[1]) if len(args) == 2 else int(os.environ.get("SLURM_PROCID", "0"))
    serve(Path(args[0]), index, int(os.environ.get("SLURM_LOCALID", "0")))
    logging.shutdown()
    # Asked to stop and done: leave without tearing down the engine's and the weight
    # group's native threads (vLLM and NCCL/gloo can abort in their destructors).
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
