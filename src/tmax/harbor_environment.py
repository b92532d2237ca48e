"""Our sandboxes as Harbor environments: rootless bubblewrap, podman and Apptainer for
``harbor run``, on machines without Docker.

    harbor run -p TASK_DIR -a oracle --env tmax.harbor_environment:BwrapEnvironment

(``PodmanEnvironment``, ``ApptainerEnvironment`` likewise). This module is imported by
Harbor's interpreter, so it needs Harbor and the standard library only: setup.sh puts
``src/`` on the path of the Harbor environment it builds. Each environment runs one
sandbox of ours in a child process with tmax's interpreter
(:mod:`tmax.sandbox.harbor`): ``--ek python=…`` or ``$TMAX_PYTHON`` names it, else
the checkout's ``.venv/bin/python``. ``--ek network=task`` gives each phase the network
of our own episodes instead of Harbor's reading of the task (the default).

The verifier keeps the guarantee of our own episodes: nothing the agent wrote decides
its reward. The tests Harbor uploads are not put where the agent's processes could
change them; the command that would run ``test.sh`` in the agent's session runs our
verifier instead (the agent's processes ended, the tests and ``/logs/verifier`` on
tmpfs of their own, the toolbox's interpreters), and the reward files Harbor then
downloads are the ones that verifier read. What the agent did that made its sandbox
stop answering scores 0, with the reason in the verifier's output, as in our episodes.

Not supported: Windows tasks, GPUs, per-command users (every command runs as the
sandbox's one user, root in its user namespace), ``docker-compose`` tasks, and
allowlists (a phase with network gets the full outside network, never the host's).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.trial.paths import EnvironmentPaths

ROOT = Path(__file__).resolve().parents[2]
SERVER = "tmax.sandbox.harbor"
REPLY_LIMIT = 256 * 1024 * 1024
"""The longest reply line read from the server (a command's whole output)."""
TEST_COMMAND = re.compile(r"(?<![\w./-])/tests/")


class TmaxEnvironment(BaseEnvironment):
    """A Harbor environment backed by one of our sandboxes (the subclasses pick which)."""

    backend: ClassVar[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._python = str(kwargs.pop("python", "") or _tmax_python())
        self._network = str(kwargs.pop("network", "harbor"))
        if self._network not in ("harbor", "task"):
            raise ValueError(f"network must be 'harbor' or 'task', not {self._network!r}")
        super().__init__(*args, **kwargs)
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._tests: Path | None = None
        self._armed = False
        """Whether the tests are uploaded and not yet run: the next command that names
        them is the verifier's."""
        self._verdict: dict[str, Any] | None = None
        self._paths = EnvironmentPaths()
        rewards = (self._paths.reward_text_path, self._paths.reward_json_path)
        self._remove_rewards = "rm -f -- " + " ".join(shlex.quote(str(p)) for p in rewards)
        """The command Harbor's verifier clears stale reward files with."""

    @staticmethod
    def type() -> str:
        return "tmax"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        task_dir = self.environment_dir.parent
        if not (task_dir / "task.toml").is_file():
            raise FileNotFoundError(f"{task_dir} has no task.toml")
        if (self.environment_dir / "docker-compose.yaml").exists():
            raise ValueError(f"{task_dir}: docker-compose tasks are not supported by tmax")

    # --- the server ------------------------------------------------------------------

    async def _call(self, op: str, **fields: Any) -> dict[str, Any]:
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise RuntimeError(f"tmax {self.backend} environment is not started")
        self.logger.debug("tmax %s %s %s", self.backend, op, _brief(fields))
        async with self._lock:
            process.stdin.write(json.dumps({"op": op, **fields}).encode() + b"\n")
            await process.stdin.drain()
            line = await process.stdout.readline()
        if not line:
            code = await process.wait()
            raise RuntimeError(
                f"the tmax sandbox server exited ({code}) during {op!r}; see {self._log_path}"
            )
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise RuntimeError(f"tmax {self.backend} {op}: {reply.get('error')}")
        return reply

    @property
    def _log_path(self) -> Path:
        return self.trial_paths.trial_dir / f"tmax-{self.backend}.log"

    async def start(self, force_build: bool) -> None:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                self._python, "-m", SERVER,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                limit=REPLY_LIMIT,
            )  # fmt: skip
        run_id = re.sub(r"[^A-Za-z0-9_.-]", "-", f"harbor-{self.session_id}")
        reply = await self._call(
            "start",
            task_dir=str(self.environment_dir.parent),
            backend=self.backend,
            run_id=run_id,
            network=self._network,
        )
        self.logger.debug("tmax %s sandbox %s up", self.backend, reply["sandbox"])
        # Harbor's log folders (a Docker environment mounts them; here they are made)
        folders = (self._paths.agent_dir, self._paths.verifier_dir, self._paths.artifacts_dir)
        made = await self._call("exec", command="mkdir -p " + " ".join(map(str, folders)))
        if made["return_code"] != 0:
            raise RuntimeError(f"tmax {self.backend}: cannot make /logs: {made['output']}")
        for limit in reply.get("degraded", []):
            self.logger.warning("tmax %s: runs without %s", self.backend, limit)

    async def stop(self, delete: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.returncode is None and process.stdin is not None:
                process.stdin.write(b'{"op": "stop"}\n')
                await process.stdin.drain()
                process.stdin.close()
            await asyncio.wait_for(process.wait(), 120)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            process.kill()
            await process.wait()
        if self._tests is not None:
            shutil.rmtree(self._tests, ignore_errors=True)
            self._tests = None

    # --- commands ----------------------------------------------------------------------

    async def empty_dirs(self, dirs: Any, *, chmod: bool = True) -> ExecResult | None:
        """Emptying ``/logs/verifier`` before the tests is moot (our verifier's is a tmpfs
        of its own) and is not left to a session the agent may have broken."""
        if [PurePosixPath(d) for d in dirs] == [self._paths.verifier_dir]:
            return ExecResult(stdout="", stderr="", return_code=0)
        return await super().empty_dirs(dirs, chmod=chmod)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        if self._armed and TEST_COMMAND.search(command):
            return await self._verify(command)
        if command == self._remove_rewards:
            # Harbor clears stale rewards in the agent's session; ours never read any
            # from there, and a session the agent broke must not fail the trial
            self._verdict = None
            return ExecResult(stdout="", stderr="", return_code=0)
        merged = {**self._persistent_env, **(env or {})}
        reply = await self._call(
            "exec", command=command, cwd=cwd or self.task_env_config.workdir, env=merged,
            timeout=timeout_sec,
        )  # fmt: skip
        return ExecResult(stdout=reply["output"], stderr="", return_code=reply["return_code"])

    async def _verify(self, command: str) -> ExecResult:
        """Harbor's verifier asks to run the tests in the agent's session: ours runs them
        where the agent cannot reach (``chmod +x`` of a test is already done there)."""
        if command.lstrip().startswith("chmod "):
            return ExecResult(stdout="", stderr="", return_code=0)
        self._armed = False
        self._verdict = await self._call("verify", tests_dir=str(self._tests))
        passed = self._verdict["reward"] > 0
        output = self._verdict.get("output") or ""
        if self._verdict.get("reason"):
            output += f"\ntmax verifier: {self._verdict['reason']}\n"
        return ExecResult(stdout=output, stderr="", return_code=0 if passed else 1)

    # --- files -----------------------------------------------------------------------

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._call("upload", source=str(Path(source_path).resolve()), target=target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        if PurePosixPath(target_dir) == self._paths.tests_dir:
            # the tests stay on the host until our verifier takes them in
            if self._tests is None:
                self._tests = Path(tempfile.mkdtemp(prefix="tmax-harbor-tests-"))
            shutil.copytree(source_dir, self._tests, dirs_exist_ok=True, symlinks=True)
            self._verdict = None
            self._armed = True
            return
        await self._call("upload", source=str(Path(source_dir).resolve()), target=target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self._call("download", source=source_path, target=str(Path(target_path).resolve()))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        if PurePosixPath(source_dir) == self._paths.verifier_dir and self._verdict is not None:
            self._write_verdict(Path(target_dir))
            return
        await self._call("download", source=source_dir, target=str(Path(target_dir).resolve()))

    def _write_verdict(self, target: Path) -> None:
        """The files Harbor reads its reward from, as our verifier found them."""
        verdict = self._verdict or {}
        target.mkdir(parents=True, exist_ok=True)
        rewards = verdict.get("rewards") or {"reward": verdict.get("reward", 0.0)}
        for name in ("reward.txt", "reward.json"):
            (target / name).unlink(missing_ok=True)
        if set(rewards) == {"reward"}:
            (target / "reward.txt").write_text(f"{float(rewards['reward'])}\n")
        else:
            (target / "reward.json").write_text(json.dumps(rewards))
        (target / "test-stdout.txt").write_text(verdict.get("output") or "")
        if verdict.get("reason"):
            (target / "tmax-reason.txt").write_text(verdict["reason"] + "\n")


class BwrapEnvironment(TmaxEnvironment):
    """Rootless bubblewrap: no daemon, no root, the task's image as a root file system."""

    backend = "bwrap"


class PodmanEnvironment(TmaxEnvironment):
    """Podman (no compose needed), the task's image built from its Dockerfile."""

    backend = "podman"


class ApptainerEnvironment(TmaxEnvironment):
    """Apptainer with the cluster-safe defaults of our Apptainer backend."""

    backend = "apptainer"


def _brief(fields: dict[str, Any]) -> str:
    text = json.dumps(fields)
    return text if len(text) <= 300 else text[:300] + "..."


def _tmax_python() -> str:
    configured = os.environ.get("TMAX_PYTHON")
    if configured:
        return configured
    candidate = ROOT / ".venv" / "bin" / "python"
    if not candidate.exists():
        raise FileNotFoundError(
            f"no tmax interpreter at {candidate}: run ./setup.sh, or pass --ek python=PATH "
            "(or set TMAX_PYTHON) to a Python with tmax installed"
        )
    return str(candidate)
