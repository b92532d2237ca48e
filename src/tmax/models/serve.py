"""OpenAI-compatible model servers as context managers.

Harnesses, evaluation and RL rollouts only ever talk to an OpenAI-compatible endpoint
(``base_url`` + ``model``). :class:`ModelServer` gives them one, whichever engine is behind it:

- :meth:`ModelServer.transformers`: ``transformers serve`` on a local folder (CPU; the tiny
  offline Qwen3 of :mod:`tmax.models.tiny`), used by tests and demos;
- :meth:`ModelServer.vllm`: ``vllm serve`` on GPUs, as in the paper's experiments;
- :meth:`ModelServer.external`: an endpoint someone else runs.

The server runs in its own process group with its output in a log file; leaving the ``with``
block always stops it, and every failure raises :class:`ModelServerError` with the reason and
the tail of that log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

log = logging.getLogger("tmax.models")

LOCALHOST = "127.0.0.1"
DEFAULT_READY_TIMEOUT = 180.0
POLL_INTERVAL = 0.5
STOP_GRACE = 10.0
LOG_TAIL_LINES = 40


class ModelServerError(RuntimeError):
    """A model server could not be started, did not become ready, or died."""


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that is free right now (the kernel picks it; a small race is accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def port_is_free(port: int, host: str = LOCALHOST) -> bool:
    """Whether nothing listens on ``host:port`` (checked by binding it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def _venv_executable(name: str) -> str | None:
    """``name`` from the running interpreter's bin folder, else from ``PATH``.

    The current venv comes first so that the server runs with the same package versions as
    the code that talks to it, even when the venv is not activated.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(kept) if kept else "(log is empty)"


class ModelServer:
    """An OpenAI-compatible endpoint whose lifetime is a ``with`` block.

    Use a constructor (:meth:`transformers`, :meth:`vllm`, :meth:`external`); then::

        with ModelServer.transformers(model_dir) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="none")
            client.chat.completions.create(model=server.model, messages=...)

    Entering starts the process (if any) and waits until ``GET /v1/models`` answers 200 and
    lists :attr:`model`; leaving kills the whole process group, also when the block raised.
    """

    def __init__(
        self,
        *,
        model: str,
        port: int,
        argv: Sequence[str] | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        base_url: str | None = None,
        missing_hint: str = "",
    ) -> None:
        """Prefer the named constructors; this one takes the raw ingredients.

        ``argv`` is ``None`` for an external server. ``missing_hint`` is appended to the
        error when ``argv[0]`` is not installed.
        """
        self._model = model
        self._port = port
        self._argv = list(argv) if argv is not None else None
        self._cwd = cwd
        self._env = dict(env) if env is not None else None
        self._log_path = Path(log_path) if log_path is not None else None
        self._ready_timeout = ready_timeout
        self._base_url = (base_url or f"http://{LOCALHOST}:{port}/v1").rstrip("/")
        self._missing_hint = missing_hint
        self._process: subprocess.Popen[bytes] | None = None

    # ---------------------------------------------------------------------------------------
    # Constructors

    @classmethod
    def transformers(
        cls,
        model_dir: Path,
        *,
        port: int | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        continuous_batching: bool = False,
        log_path: Path | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
    ) -> ModelServer:
        """``transformers serve`` pinned to the local model folder ``model_dir``.

        transformers serve only accepts requests whose ``model`` equals the string it was
        started with, so it runs from the folder's parent with the bare folder name: the
        served id is ``model_dir.name``. ``HF_HUB_OFFLINE=1`` keeps it off the network.
        """
        model_dir = Path(model_dir).absolute()
        if not model_dir.is_dir():
            raise ModelServerError(f"model folder {model_dir} does not exist")
        if not (model_dir / "config.json").is_file():
            raise ModelServerError(
                f"model folder {model_dir} has no config.json; it must be a save_pretrained "
                "folder (build one with tmax.models.tiny.ensure_tiny_model)"
            )
        port = free_port() if port is None else port
        argv = ["transformers", "serve", model_dir.name, "--host", LOCALHOST, "--port", str(port)]
        argv += ["--device", device, "--dtype", dtype]
        if continuous_batching:
            argv.append("--continuous-batching")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        return cls(
            model=model_dir.name,
            port=port,
            argv=argv,
            cwd=model_dir.parent,
            env=env,
            log_path=log_path,
            ready_timeout=ready_timeout,
            missing_hint='install the model extra: pip install -e ".[model]"',
        )

    @classmethod
    def vllm(
        cls,
        model: str,
        *,
        served_name: str | None = None,
        port: int | None = None,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
        tool_call_parser: str = "hermes",
        reasoning_parser: str | None = None,
        extra_args: Sequence[str] = (),
        log_path: Path | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
    ) -> ModelServer:
        """``vllm serve`` with native tool calling, for the GPU runs.

        ``tool_call_parser`` is ``hermes`` for Qwen3's JSON ``<tool_call>`` blocks and
        ``qwen3_xml`` for Qwen3.5's XML ones; ``reasoning_parser`` (e.g. ``qwen3``) splits
        ``<think>`` blocks into ``reasoning_content``. ``served_name`` defaults to ``model``.
        """
        if tensor_parallel_size < 1:
            raise ModelServerError(f"tensor_parallel_size must be ≥ 1, got {tensor_parallel_size}")
        name = served_name or model
        port = free_port() if port is None else port
        argv = ["vllm", "serve", model, "--served-model-name", name]
        argv += ["--host", LOCALHOST, "--port", str(port)]
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
        if reasoning_parser is not None:
            argv += ["--reasoning-parser", reasoning_parser]
        argv += ["--tensor-parallel-size", str(tensor_parallel_size)]
        if max_model_len is not None:
            argv += ["--max-model-len", str(max_model_len)]
        argv += list(extra_args)
        return cls(
            model=name,
            port=port,
            argv=argv,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            log_path=log_path,
            ready_timeout=ready_timeout,
            missing_hint=(
                'vLLM runs on GPU machines only; install the gpu extra: pip install -e ".[gpu]"'
            ),
        )

    @classmethod
    def external(
        cls, base_url: str, model: str, *, ready_timeout: float = DEFAULT_READY_TIMEOUT
    ) -> ModelServer:
        """An endpoint that is already running (``base_url`` ends in ``/v1``).

        Nothing is started or stopped, but entering still checks that it answers and serves
        ``model``, so a wrong URL or model id fails here rather than mid-evaluation.
        """
        return cls(model=model, port=0, base_url=base_url, ready_timeout=ready_timeout)

    # ---------------------------------------------------------------------------------------
    # Properties

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return self._base_url

    @property
    def model(self) -> str:
        """The model id to put in requests (the served name)."""
        return self._model

    @property
    def port(self) -> int:
        return self._port

    @property
    def log_path(self) -> Path | None:
        """Where the server's output goes (kept after the server stops, for post-mortems)."""
        return self._log_path

    @property
    def running(self) -> bool:
        """Whether this object's server process is alive (``False`` for external servers)."""
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """The argv that starts the server (empty for an external endpoint)."""
        return list(self._argv or [])

    def __repr__(self) -> str:
        return f"ModelServer(model={self._model!r}, base_url={self._base_url!r})"

    # ---------------------------------------------------------------------------------------
    # Lifecycle

    def start(self) -> None:
        """Start the process (if any) and wait until the endpoint serves :attr:`model`."""
        if self._argv is not None:
            self._launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        assert self._argv is not None
        if self._process is not None:
            raise ModelServerError(f"{self!r} is already started")
        executable = _venv_executable(self._argv[0])
        if executable is None:
            raise ModelServerError(
                f"cannot start {self._argv[0]!r}: the executable is not installed in "
                f"{Path(sys.executable).parent} nor on PATH; {self._missing_hint}"
            )
        if not port_is_free(self._port):
            raise ModelServerError(
                f"port {self._port} on {LOCALHOST} is already in use; pass another port "
                "(or port=None for a free one)"
            )
        if self._log_path is None:
            handle, name = tempfile.mkstemp(prefix=f"tmax-serve-{self._model}-", suffix=".log")
            os.close(handle)
            self._log_path = Path(name)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [executable, *self._argv[1:]]
        log.info("starting %s (log: %s)", " ".join(self._argv), self._log_path)
        with self._log_path.open("ab") as log_file:
            # A new session makes the server the leader of its own process group, so stop()
            # can kill it together with any workers it spawned (vLLM starts several).
            self._process = subprocess.Popen(
                argv,
                cwd=self._cwd,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _served_models(self) -> list[str] | None:
        """The ids listed by ``GET /v1/models``, or ``None`` while it does not answer 200."""
        try:
            with urllib.request.urlopen(f"{self._base_url}/models", timeout=5) as response:
                if response.status != 200:
                    return None
                body = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError):
            return None
        return [str(entry.get("id")) for entry in body.get("data", []) if isinstance(entry, dict)]

    def wait_ready(self) -> None:
        """Poll ``GET {base_url}/models`` until it answers 200 and lists :attr:`model`.

        Fails early, with the log tail, if the server process exits while we wait.
        """
        started = time.monotonic()
        deadline = started + self._ready_timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise ModelServerError(
                    f"{self._argv_text()} exited with code {self._process.returncode} before "
                    f"it was ready; last lines of {self._log_path}:\n{self._log_tail()}"
                )
            served = self._served_models()
            if served is not None:
                if self._model in served:
                    log.info(
                        "model server %s ready in %.1f s",
                        self._base_url,
                        time.monotonic() - started,
                    )
                    return
                raise ModelServerError(
                    f"{self._base_url} answers but does not serve model {self._model!r}; "
                    f"it serves {served}"
                )
            if time.monotonic() >= deadline:
                detail = f"; last lines of {self._log_path}:\n{self._log_tail()}"
                raise ModelServerError(
                    f"{self._base_url} was not ready after {self._ready_timeout:.0f} s"
                    + (detail if self._argv is not None else "")
                )
            time.sleep(POLL_INTERVAL)

    def stop(self) -> None:
        """Terminate the server's process group (SIGTERM, then SIGKILL after a grace period)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            self._signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                log.warning("model server did not stop within %.0f s; killing it", STOP_GRACE)
        # Workers may outlive a leader that exited: always sweep the group.
        self._signal_group(process, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE)
        log.info("model server %s stopped", self._base_url)

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)

    def _argv_text(self) -> str:
        return " ".join(self._argv or [])

    def _log_tail(self) -> str:
        return _tail(self._log_path) if self._log_path is not None else "(no log)"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
