"""vLLM engines for RL rollouts: vLLM's own server, reached over HTTP (paper §4: vLLM
rollouts on 6 inference nodes, the new weights pushed after every step).

Each engine is vLLM's OpenAI-compatible server with its RL routes on
(``VLLM_SERVER_DEV_MODE=1``), run from the vLLM environment (:func:`tmax.models.serve.
vllm_python`) with our plugin loaded (:mod:`tmax.rl.engines.vllm_plugin`). What we add is small:

- :class:`VLLMEngine`, the :class:`~tmax.rl.engines.local.Engine` that rollouts and the trainer
  use: every episode turn is one ``/v1/completions`` request with the prompt as token ids,
  answered with the sampled ids and their log-probs μ (vLLM's ``processed_logprobs``:
  after temperature, pure sampling — no top-k, top-p or the checkpoint's generation
  config), sent to the least busy engine, where vLLM's continuous batching schedules it
  with everything else in flight; weights go through :mod:`tmax.rl.weights.transfer`
  (vLLM's weight-transfer API) to every engine at once, and every engine must report the
  pushed version afterwards;
- :func:`supervise`, what ``srun`` starts on each inference node (``python -m
  tmax.rl.engines.remote <engines>/server.json``): it starts the server, checks it samples, writes
  its address for rank 0, and stops it — process group and shared memory — when rank 0
  marks the run closed, when told to stop, or when the server dies;
- a secret per launch, required on every route (vLLM's own ``--api-key`` leaves the RL
  routes open): no process on the network, sandboxed agent code included, can push
  weights or reach the engines.

``rl.inference_nodes: 0`` runs the same servers beside rank 0 (:func:`local_servers`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmax.config import schema_default
from tmax.io import write_json
from tmax.models.serve import checkout_path
from tmax.rl.engines.local import Generation, _check_request

if TYPE_CHECKING:
    import torch

    from tmax.models.serve import ModelServer
    from tmax.rl.weights.transfer import TorchSender
    from tmax.settings import RLSection

log = logging.getLogger("tmax.rl.engines.remote")
logging.getLogger("httpx2").setLevel(logging.WARNING)  # not a line per rollout turn

Address = tuple[str, int]
SERVER_FILE = "server.json"
AUTHKEY_FILE = "authkey"
CLOSED_FILE = "closed"
"""Written by rank 0 when training is over: the servers exit, and from then on how a
server process ends no longer matters to the training job."""
KEY_ENV = "TMAX_ENGINE_KEY"
"""The launch's secret, in the server's environment for the plugin's guard."""
GUARD = "tmax.rl.engines.vllm_plugin.require_engine_key"
REQUEST_TIMEOUT = 3600.0
"""Seconds one HTTP call may take (a 16k-token turn on a busy engine; a weight push)."""


NONFINITE_ANSWER = "Out of range float values are not JSON compliant"
"""What vLLM's server answers (400) when a sampled token's log-prob is -inf or NaN."""
NONFINITE_RETRIES = 2
NONFINITE_SEED_STEP = 1_000_003


class EngineServerError(RuntimeError):
    """A server failed a request, went away or never came up; the message names it."""


# --------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class EngineSettings:
    """What every engine server of a run is started with (the launcher writes it to
    ``<run>/engines/server.json``; :meth:`from_config` maps the ``rl`` keys, whose
    schema defaults are the fields' defaults)."""

    model_dir: str
    tensor_parallel: int = schema_default("rl", "engine_tensor_parallel")
    dtype: str = schema_default("rl", "engine_dtype")
    fp32_lm_head: bool = schema_default("rl", "fp32_lm_head")
    """vLLM's head_dtype float32, like the learner's head."""
    max_model_len: int | None = None
    """rl.max_total_tokens (from_config); None: the model's own context length."""
    weight_transfer: str = schema_default("rl", "weight_transfer")
    """auto: tmax_nccl on GPUs, tmax_gloo on CPU."""
    threads: int = 1
    """CPU threads per server (the job's, not a setting)."""
    cpu_kv_cache_gib: float = 1.0
    """KV cache on CPU machines (not a setting)."""
    options: dict[str, Any] = field(
        default_factory=lambda: dict(schema_default("rl", "engine_options"))
    )
    ready_timeout: float = float(schema_default("rl", "engine_start_timeout_sec"))
    seed: int = 0
    untrained: tuple[str, ...] = tuple(schema_default("rl", "engine_untrained_weights"))
    """Checkpoint tensors not sent (rl.engine_untrained_weights)."""
    push_bucket_mb: int | None = schema_default("rl", "push_bucket_mb")
    """None: the transfer's default bucket."""

    @classmethod
    def from_config(cls, rl: RLSection, model_dir: str | Path, *, threads: int = 1,
                    seed: int = 0) -> EngineSettings:  # fmt: skip
        return cls(
            model_dir=str(model_dir),
            tensor_parallel=rl.engine_tensor_parallel,
            dtype=rl.engine_dtype,
            fp32_lm_head=rl.fp32_lm_head,
            max_model_len=rl.max_total_tokens,
            weight_transfer=rl.weight_transfer,
            threads=threads,
            options=dict(rl.engine_options),
            ready_timeout=float(rl.engine_start_timeout_sec),
            seed=seed,
            untrained=rl.engine_untrained_weights,
            push_bucket_mb=rl.push_bucket_mb,
        )

    @property
    def bucket_bytes(self) -> int:
        from tmax.rl.weights.streaming import bucket_bytes

        return bucket_bytes(self.push_bucket_mb)

    def backend(self) -> str:
        from tmax.rl.weights.transfer import default_backend

        if self.weight_transfer != "auto":
            return self.weight_transfer
        return default_backend()

    def arguments(self) -> list[str]:
        """vLLM server flags beyond model, name, host and port."""
        argv = ["--dtype", self.dtype, "--seed", str(self.seed)]
        # μ is the probability of the distribution sampled from: after temperature, with no
        # top-k/top-p from the checkpoint's generation_config.json.
        argv += ["--logprobs-mode", "processed_logprobs", "--generation-config", "vllm"]
        argv += ["--weight-transfer-config", json.dumps({"backend": self.backend()})]
        argv += ["--middleware", GUARD]
        if self.fp32_lm_head:
            argv += ["--hf-overrides", json.dumps({"head_dtype": "float32"})]
        for key, value in self.options.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is False:
                argv.append("--no-" + key.replace("_", "-"))
            elif value is not None:
                argv += [flag, value if isinstance(value, str) else json.dumps(value)]
        return argv

    def environment(self, key: str) -> dict[str, str]:
        """What the vLLM server's environment adds: its RL routes, no Hub, the secret, this
        checkout's tmax (the plugin) first on the path; on CPU machines its memory and
        threads (the cores are shared, so no pinning)."""
        env = {"VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1", KEY_ENV: key,
               "PYTHONPATH": checkout_path()}  # fmt: skip
        if self.backend() == "tmax_gloo":
            kv_cache = os.environ.get("VLLM_CPU_KVCACHE_SPACE", f"{self.cpu_kv_cache_gib:g}")
            env["VLLM_CPU_KVCACHE_SPACE"] = kv_cache
            env["VLLM_CPU_OMP_THREADS_BIND"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind")
            env["OMP_NUM_THREADS"] = str(self.threads)
        return env


def engine_server(
    settings: EngineSettings,
    *,
    key: str,
    log_path: Path,
    bind: str = "127.0.0.1",
    advertise: str | None = None,
    python: str | None = None,
) -> ModelServer:
    """The :class:`~tmax.models.serve.ModelServer` of one engine (not started)."""
    from tmax.models.serve import ModelServer

    return ModelServer.vllm(
        settings.model_dir, served_name="policy", tensor_parallel_size=settings.tensor_parallel,
        max_model_len=settings.max_model_len, tool_call_parser=None,
        extra_args=settings.arguments(), log_path=log_path, ready_timeout=settings.ready_timeout,
        python=python, bind=bind, advertise=advertise, api_key=key,
        env=settings.environment(key),
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# One server, over HTTP


class EngineClient:
    """HTTP calls to one engine server."""

    def __init__(self, base_url: str, key: str, index: int = 0) -> None:
        import httpx2 as httpx  # the HTTP client openai uses

        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.index = index
        self.in_flight = 0
        self.alive = True
        """False once the server stopped answering (:meth:`VLLMEngine.forget_dead`)."""
        self._http = httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(REQUEST_TIMEOUT, connect=30.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
        )  # fmt: skip

    @property
    def name(self) -> str:
        return f"engine server {self.index} ({self.base_url})"

    def call(self, method: str, route: str, body: Mapping[str, Any] | None = None) -> Any:
        import httpx2 as httpx  # the HTTP client openai uses

        try:
            response = self._http.request(method, route, json=body)
        except httpx.HTTPError as error:
            raise EngineServerError(f"{self.name}: {method} {route} failed: {error!r}") from error
        if response.status_code != 200:
            raise EngineServerError(
                f"{self.name}: {method} {route} answered {response.status_code}: "
                f"{response.text[:2000]}"
            )
        return response.json() if response.content else None

    def complete(self, prompt: Sequence[int], *, max_tokens: int, temperature: float,
                 stop_token_ids: Sequence[int], seed: int | None) -> Generation:  # fmt: skip
        """One continuation of ``prompt`` (token ids in and out)."""
        body = {
            "model": "policy", "prompt": list(prompt), "max_tokens": max_tokens,
            "temperature": temperature, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
            "logprobs": 0, "seed": seed, "stop_token_ids": list(stop_token_ids),
            # Only the caller's stop tokens end a turn (like TransformersEngine), and the
            # one that did is kept as the last sampled token.
            "ignore_eos": True, "skip_special_tokens": False, "return_token_ids": True,
            "include_stop_str_in_output": True,
        }  # fmt: skip
        for attempt in range(NONFINITE_RETRIES + 1):
            try:
                answer = self.call("POST", "/v1/completions", body)
            except EngineServerError as error:
                if NONFINITE_ANSWER not in str(error):
                    raise
                # A sampled token whose log-prob is -inf/NaN (the server cannot write it
                # as JSON): a numerical accident of that draw, so draw again.
                log.warning("%s: non-finite log-prob in a sample (attempt %d); drawing again",
                            self.name, attempt + 1)  # fmt: skip
                body["seed"] = None if seed is None else seed + NONFINITE_SEED_STEP * (attempt + 1)
                continue
            return generation_from_completion(answer, self.name)
        raise EngineServerError(
            f"{self.name}: {NONFINITE_RETRIES + 1} samples in a row had a non-finite "
            "log-prob for a sampled token; the policy's logits hold inf/NaN"
        )

    def weight_version(self) -> str:
        return str(self.call("GET", "/weight_info")["weight_version"])

    def healthy(self) -> bool:
        """Whether the server answers ``/health`` (within 10 s)."""
        import httpx2 as httpx

        try:
            return self._http.get("/health", timeout=10.0).status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._http.close()


def generation_from_completion(answer: Mapping[str, Any], server: str = "engine") -> Generation:
    """A :class:`Generation` from vLLM's ``/v1/completions`` answer for one prompt."""
    try:
        [choice] = answer["choices"]
        token_ids = [int(t) for t in choice["token_ids"]]
        logprobs = [float(lp) for lp in choice["logprobs"]["token_logprobs"]]
        finish = choice["finish_reason"]
    except (KeyError, TypeError, ValueError) as error:
        raise EngineServerError(f"{server} answered without token ids and log-probs "
                                f"({error!r}): {str(answer)[:500]}") from error  # fmt: skip
    if len(logprobs) != len(token_ids):
        raise EngineServerError(f"{server} returned {len(token_ids)} tokens but "
                                f"{len(logprobs)} log-probs")  # fmt: skip
    if finish not in ("stop", "length"):
        raise EngineServerError(f"{server}: request ended with {finish!r}")
    return Generation(token_ids, logprobs, finish)


class ServerGroup:
    """vLLM's weight-sync client over every engine at once (what a weight-transfer
    sender drives): each call goes to all servers concurrently and returns when all have
    answered. Server ``i``'s workers take ranks after the sender's and the earlier
    servers' (``rank_offset``)."""

    def __init__(self, servers: Sequence[EngineClient], workers_per_server: int) -> None:
        self.servers = list(servers)
        self.workers_per_server = workers_per_server
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.servers)),
                                        thread_name_prefix="engine-sync")  # fmt: skip

    @property
    def workers(self) -> int:
        return len(self.servers) * self.workers_per_server

    def _all(self, call: Callable[[int, EngineClient], Any]) -> list[Any]:
        futures = [self._pool.submit(call, i, s) for i, s in enumerate(self.servers)]
        errors, results = [], []
        for future in futures:
            try:
                results.append(future.result())
            except BaseException as error:
                errors.append(error)
        if errors:
            raise errors[0]
        return results

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        def init(index: int, server: EngineClient) -> None:
            offset = int(init_info["rank_offset"]) + index * self.workers_per_server
            server.call("POST", "/init_weight_transfer_engine",
                        {"init_info": {**init_info, "rank_offset": offset}})  # fmt: skip

        self._all(init)

    def start_weight_update(self) -> None:
        self._all(lambda _, s: s.call("POST", "/start_weight_update"))

    def update_weights(self, update_info: dict[str, Any]) -> None:
        self._all(lambda _, s: s.call("POST", "/update_weights", {"update_info": update_info}))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        body = {"weight_version": weight_version} if weight_version is not None else None
        self._all(lambda _, s: s.call("POST", "/finish_weight_update", body))

    def close(self) -> None:
        self._pool.shutdown(wait=False)


# --------------------------------------------------------------------------------------------
# The engine rollouts and the trainer use


class VLLMEngine:
    """The :class:`~tmax.rl.engines.local.Engine` over vLLM engine servers (see the module)."""

    def __init__(
        self,
        base_urls: Sequence[str],
        key: str,
        *,
        settings: EngineSettings,
        host: str | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """``host``: the address the engines reach this process by for the weight group
        (default: this machine's name); ``on_close`` runs after :meth:`close` (stopping
        local servers)."""
        if not base_urls:
            raise ValueError("a VLLMEngine needs at least one engine server")
        self.settings, self.key = settings, key
        self.clients = [EngineClient(url, key, i) for i, url in enumerate(base_urls)]
        self._group = ServerGroup(self.clients, settings.tensor_parallel)
        self._host = host or socket.gethostname()
        self._sender: TorchSender | None = None
        self._retired: list[Any] = []
        """Weight groups left behind by a dead server, never torn down (destroying a
        group whose peer died can block)."""
        self._choose = threading.Lock()
        self._on_close = on_close
        self.policy_version = 0
        self.pushed_bytes = 0
        self.push_seconds = 0.0
        versions = {client.weight_version() for client in self.clients}
        log.info("vLLM engine: %d server(s) (%s)", len(self.clients),
                 ", ".join(c.base_url for c in self.clients))  # fmt: skip
        if len(versions) != 1:
            raise EngineServerError(f"engine servers hold different weights: versions {versions}")

    @property
    def servers(self) -> int:
        return len(self.clients)

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        temperature: float,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
    ) -> list[Generation]:
        """One request per prompt (prompt ``i`` seeded ``seed + i``), each to the server
        with the fewest requests in flight; vLLM batches them continuously."""
        _check_request(prompts, max_tokens, temperature)
        if len(prompts) == 1:
            return [self._one(prompts[0], max_tokens, temperature, stop_token_ids, seed)]
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            futures = [
                pool.submit(self._one, p, max_tokens, temperature, stop_token_ids,
                            None if seed is None else seed + i)
                for i, p in enumerate(prompts)
            ]  # fmt: skip
            return [future.result() for future in futures]

    def _one(self, prompt: Sequence[int], max_tokens: int, temperature: float,
             stop: Sequence[int], seed: int | None) -> Generation:  # fmt: skip
        """One request to the least busy live server. A server that fails a request and
        no longer answers /health is forgotten and the request goes to another (same
        seed: the same distribution); a live server's error is the request's own."""
        while True:
            with self._choose:
                client = min(self.live(), key=lambda c: (c.in_flight, c.index))
                client.in_flight += 1  # counted now, so concurrent callers spread out
            try:
                return client.complete(prompt, max_tokens=max_tokens, temperature=temperature,
                                       stop_token_ids=stop, seed=seed)  # fmt: skip
            except EngineServerError:
                if client.healthy():
                    raise
                self._forget(client)
            finally:
                with self._choose:
                    client.in_flight -= 1

    def live(self) -> list[EngineClient]:
        """The servers still answering; an error when none is left."""
        live = [c for c in self.clients if c.alive]
        if not live:
            raise EngineServerError(f"every engine server is gone ({len(self.clients)} started; "
                                    "see their logs)")  # fmt: skip
        return live

    def _forget(self, client: EngineClient) -> None:
        with self._choose:
            if not client.alive:
                return
            client.alive = False
            left = sum(c.alive for c in self.clients)
        log.error("%s stopped answering; its share goes to the other %d server(s)",
                  client.name, left)  # fmt: skip

    def forget_dead(self) -> None:
        """Ask every live server for /health; forget those that do not answer."""
        for client in [c for c in self.clients if c.alive and not c.healthy()]:
            self._forget(client)

    def _weight_sender(self) -> TorchSender:
        live = self.live()
        if live != self._group.servers:
            # A server died: the weight group is formed over those still answering; they
            # leave the old one behind when they join it (tmax.rl.engines.vllm_plugin).
            left_out = [c.name for c in self._group.servers if c not in live]
            log.warning("weight group over %d live server(s), without %s", len(live),
                        ", ".join(left_out))  # fmt: skip
            if self._sender is not None:
                self._retired.append(self._sender)
                self._sender = None
            self._group.close()
            self._group = ServerGroup(live, self.settings.tensor_parallel)
        if self._sender is None:
            from tmax.rl.weights.transfer import TorchSender

            self._sender = TorchSender.trainer_init(self._group, host=self._host,
                                                    workers=self._group.workers,
                                                    backend=self.settings.backend(),
                                                    bucket_bytes=self.settings.bucket_bytes,
                                                    untrained=self.settings.untrained)  # fmt: skip
        return self._sender

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Push ``state_dict`` into every engine (see :meth:`weight_sink`)."""
        from tmax.rl.weights.streaming import stream_state_dict

        stream_state_dict(state_dict, self.weight_sink(version), limit=self.settings.bucket_bytes)

    def weight_sink(self, version: int) -> EnginePush:
        """A streamed push into every engine (the caller makes sure nothing is being
        generated); it finishes once each serves ``version``.

        A server that stopped answering (between pushes) is left out: the weight group
        is formed again over the others, which take its share of the requests, and
        training goes on. A server that dies during a push fails it (a broadcast with a
        dead peer errors or times out); the trainer then checkpoints and the job's
        retry resumes with fresh servers."""
        return EnginePush(self, version)

    def close(self) -> None:
        if self._sender is not None:
            with suppress(Exception):
                self._sender.close()
            self._sender = None
        self._group.close()
        for client in self.clients:
            client.close()
        if self._on_close is not None:
            self._on_close()
            self._on_close = None


class EnginePush:
    """:class:`~tmax.rl.weights.streaming.WeightSink` of a push into the engine servers: each
    bucket broadcast to every worker as it comes (vLLM's ``update_weights`` loads it on
    arrival); the engines' completeness check runs when it finishes."""

    def __init__(self, engine: VLLMEngine, version: int) -> None:
        from tmax.rl.weights.transfer import transfer_device

        self.engine, self.version = engine, version
        self.push: Any = None
        self.started = time.monotonic()
        self.sent = 0
        self.sender: Any = None
        self.device = transfer_device(engine.settings.backend())
        self.bucket_bytes = engine.settings.bucket_bytes
        """The engines cut the stream by this (told when the weight group formed)."""

    def begin(self, specs: Sequence[Any], limit: int) -> None:
        self.engine.forget_dead()
        self.sender = self.engine._weight_sender()
        if limit != self.sender.bucket_bytes:
            raise ValueError(f"buckets of {limit} bytes, but the engines were told "
                             f"{self.sender.bucket_bytes} (rl.push_bucket_mb)")  # fmt: skip
        self.push = self.sender.start(specs)

    def put(self, bucket: Sequence[int], flat: torch.Tensor) -> None:
        self.push.send(flat)
        self.sent += flat.numel()

    def finish(self) -> None:
        engine, version = self.engine, self.version
        self.push.finish(version)
        live = engine.live()
        reported = [client.weight_version() for client in live]
        if set(reported) != {str(version)}:
            raise EngineServerError(f"after pushing version {version} the engine servers "
                                    f"report versions {reported}")  # fmt: skip
        engine.policy_version = version
        engine.pushed_bytes = self.sent
        engine.push_seconds = time.monotonic() - self.started
        log.info("pushed policy version %d to %d engine server(s): %.1f MB in %.2f s", version,
                 len(live), self.sent / 1e6, engine.push_seconds)  # fmt: skip

    def abort(self) -> None:
        """A broken broadcast leaves the weight group unusable: the next push forms a
        new one (the old is never torn down: destroying it can block)."""
        engine = self.engine
        if self.sender is not None and engine._sender is self.sender:
            engine._retired.append(self.sender)
            engine._sender = None


# --------------------------------------------------------------------------------------------
# Starting servers and finding them


def mark_closed(directory: Path) -> None:
    (directory / CLOSED_FILE).touch()


def closed(directory: Path) -> bool:
    return (directory / CLOSED_FILE).exists()


def address_file(directory: Path, index: int) -> Path:
    return directory / f"engine-{index}.json"


def prepare_server_dir(directory: Path, settings: EngineSettings) -> Path:
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
    write_json(directory / SERVER_FILE, asdict(settings))
    return directory / SERVER_FILE


def read_settings(settings_file: Path) -> EngineSettings:
    fields = json.loads(settings_file.read_text())
    fields["untrained"] = tuple(fields.get("untrained") or ())
    return EngineSettings(**fields)


def read_key(directory: Path) -> str:
    return (directory / AUTHKEY_FILE).read_text().strip()


def wait_for_servers(
    directory: Path,
    count: int,
    *,
    timeout_s: float = 1800.0,
    failed: Callable[[], str | None] | None = None,
) -> list[str]:
    """The base URLs of servers ``0..count-1`` once each has written its address. Raises
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
    return [json.loads(address_file(directory, i).read_text())["base_url"] for i in range(count)]


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


WARMUP_PROMPT = (1, 2, 3)


def supervise(settings_file: Path, index: int, local_index: int = 0,
              *, poll_s: float = 1.0) -> int:  # fmt: skip
    """One engine server for its whole life: start it (on this node's GPU slice), check it
    samples, publish its address, then wait until rank 0 marks the run closed, a signal
    asks to stop, or the server dies; stop it (process group, shared memory). Returns the
    exit status: 0 when closed or stopped, 1 when the server failed."""
    from tmax.models.serve import ModelServerError

    directory = settings_file.parent
    settings = read_settings(settings_file)
    env_gpus = gpu_slice(local_index, settings.tensor_parallel, os.environ)
    if env_gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = env_gpus
    node = os.environ.get("TMAX_ENGINE_HOST") or socket.gethostname()
    bind = "127.0.0.1" if node in ("127.0.0.1", "localhost") else "0.0.0.0"
    server = engine_server(settings, key=read_key(directory), bind=bind, advertise=node,
                           log_path=directory / f"vllm{index}.log")  # fmt: skip
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server.start()
        client = EngineClient(server.base_url, read_key(directory), index)
        started = time.monotonic()
        client.complete(WARMUP_PROMPT, max_tokens=2, temperature=1.0, stop_token_ids=[], seed=0)
        client.close()
        log.info("engine server %d ready at %s on node %s (first request %.1f s)", index,
                 server.base_url, os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                 time.monotonic() - started)  # fmt: skip
        write_json(address_file(directory, index), {"base_url": server.base_url,
                   "pid": os.getpid(), "node": node, "index": index})  # fmt: skip
        parent = os.getppid()
        while not stop.is_set() and not closed(directory):
            if os.getppid() != parent:  # whoever started us is gone (rank 0 or srun)
                log.warning("engine server %d: its parent process is gone; stopping", index)
                return 1
            process = server.process
            if process is not None and process.poll() is not None:
                log.error("engine server %d: vLLM exited with status %s; see %s", index,
                          process.returncode, server.log_path)  # fmt: skip
                return 1
            stop.wait(poll_s)
        return 0
    except (ModelServerError, EngineServerError) as error:
        log.error("engine server %d failed: %s", index, error)
        return 1
    finally:
        server.stop()


@contextmanager
def local_servers(
    directory: Path, settings: EngineSettings, count: int, *, timeout_s: float | None = None
) -> Iterator[list[str]]:
    """``count`` engine servers started from this process on this machine (what ``srun``
    starts on the inference nodes), their logs ``engine<N>.log`` in ``directory``; yields
    their base URLs once all are ready, closes them afterwards."""
    settings_file = prepare_server_dir(directory, settings)
    env = {**os.environ, "TMAX_ENGINE_HOST": "127.0.0.1", "PYTHONPATH": checkout_path()}
    processes = []
    with ExitStack() as stack:
        for index in range(count):
            log_file = stack.enter_context((directory / f"engine{index}.log").open("wb"))
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "tmax.rl.engines.remote", str(settings_file), str(index)],
                env=env, stdout=log_file, stderr=subprocess.STDOUT,
            ))  # fmt: skip

    def failed() -> str | None:
        from tmax.models.serve import log_tail

        codes = [process.poll() for process in processes]
        if all(code is None for code in codes):
            return None
        logs = [directory / f"engine{index}.log" for index, code in enumerate(codes) if code]
        tails = "".join(f"\n--- {path} ends:\n{log_tail(path)}" for path in logs)
        return f"exit statuses {codes}; see {directory}/engine<N>.log and vllm<N>.log{tails}"

    try:
        yield wait_for_servers(directory, count, failed=failed,
                               timeout_s=timeout_s or settings.ready_timeout)  # fmt: skip
    finally:
        mark_closed(directory)
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tmax.rl.engines.remote <engines>/server.json [index]``: one engine server.

    The index defaults to Slurm's task number (``SLURM_PROCID``), the node-local one to
    ``SLURM_LOCALID``."""
    from tmax.logs import setup_logging

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        print(
            "usage: python -m tmax.rl.engines.remote <engines>/server.json [index]", file=sys.stderr
        )
        return 2
    setup_logging(None)
    index = int(args[1]) if len(args) == 2 else int(os.environ.get("SLURM_PROCID", "0"))
    return supervise(Path(args[0]), index, int(os.environ.get("SLURM_LOCALID", "0")))


if __name__ == "__main__":
    raise SystemExit(main())
