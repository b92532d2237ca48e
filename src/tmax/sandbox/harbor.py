"""One sandbox of ours, driven over JSON lines: the tmax side of our Harbor environments.

Harbor runs in its own interpreter (Python >= 3.12, without tmax's dependencies), so
:mod:`tmax.harbor_environment`, the classes Harbor imports, starts this module with
tmax's interpreter and sends it one request per line on stdin; each gets one reply line
on stdout. Logs go to stderr. Requests, in the order a trial sends them:

``{"op": "start", "task_dir": …, "backend": …, "run_id": …, "network": "harbor"}``
    prepare the task's image the backend's way and start the sandbox with the task's
    limits (each phase's network as Harbor would give it, or ``"task"``: ours).
``{"op": "exec", "command": …, "cwd": …, "env": {…}, "timeout": …}``
    one command in a subshell of the session (its ``cd`` and exports do not carry over,
    as with ``docker exec``); stdout and stderr come back together.
``{"op": "upload", "source": host path, "target": …}`` / ``{"op": "download", …}``
    files in and out; a directory's contents land in (come from) the target.
``{"op": "verify", "tests_dir": host path}``
    our verifier (:meth:`tmax.sandbox.base.Sandbox.verify`): the agent's processes
    ended, the tests on a tmpfs of their own; the reward and the files Harbor reads.
``{"op": "stop"}``
    remove the sandbox and exit.

A reply is ``{"ok": true, …}`` or ``{"ok": false, "error": …}``. Once the sandbox has
died (something the agent did made it stop answering), every exec answers exit status
137 with the reason, and verification scores 0 with it: the agent's failure, as in our
own episodes, never an error of the environment.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tmax.sandbox import TOOLBOX, Sandbox, SandboxDied, SandboxError
from tmax.sandbox.episode import sandbox_for_task

log = logging.getLogger("tmax.sandbox.harbor")

DIED_STATUS = 137
"""The exit status an exec reports once the sandbox has died (as a SIGKILL would)."""


def subshell(command: str, cwd: str | None, env: dict[str, str] | None) -> str:
    """``command`` in a subshell of the session, in ``cwd`` with ``env`` exported."""
    lines = ["("]
    if cwd:
        lines.append(f"cd -- {shlex.quote(cwd)} || exit 1")
    for key, value in (env or {}).items():
        if not key.isidentifier():
            raise ValueError(f"environment variable name {key!r} is not a shell name")
        lines.append(f"export {key}={shlex.quote(value)}")
    lines += [command, ")"]
    return "\n".join(lines)


class Server:
    """The requests of one Harbor environment, against one sandbox."""

    def __init__(self) -> None:
        self.sandbox: Sandbox | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="tmax-harbor-"))

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        method = getattr(self, f"op_{op}", None)
        if method is None:
            raise ValueError(f"unknown request {op!r}")
        return {"ok": True, **method(**{k: v for k, v in request.items() if k != "op"})}

    @property
    def box(self) -> Sandbox:
        if self.sandbox is None:
            raise SandboxError("the sandbox is not started")
        return self.sandbox

    def op_start(
        self, task_dir: str, backend: str, run_id: str, network: str = "harbor"
    ) -> dict[str, Any]:
        sandbox = sandbox_for_task(task_dir, backend, run_id=run_id, network_policy=network)  # type: ignore[arg-type]
        self.sandbox = sandbox.start()
        # Harbor's terminal agents (Terminus-2) drive tmux in the sandbox and would
        # install it from the network; an image without one gets the toolbox's
        self.sandbox.run(
            "command -v tmux >/dev/null 2>&1 || "
            f"{{ mkdir -p /usr/local/bin && ln -s {TOOLBOX}/bin/tmux /usr/local/bin/tmux; }}"
        )
        return {
            "sandbox": sandbox.sandbox_id,
            "workdir": sandbox.workdir,
            "network": sandbox.network,
            "degraded": sandbox.degraded,
        }

    def op_exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        box = self.box
        if box.died:
            return {"return_code": DIED_STATUS, "output": f"tmax: {box.died}", "died": box.died}
        try:
            result = box.run(subshell(command, cwd, env), timeout)
        except SandboxDied as error:
            reason = box.agent_death(str(error))
            return {"return_code": DIED_STATUS, "output": f"tmax: {reason}", "died": reason}
        return {
            "return_code": result.exit_code,
            "output": result.output,
            "timed_out": result.timed_out,
            "oom_killed": result.oom_killed,
        }

    def op_upload(self, source: str, target: str) -> dict[str, Any]:
        if self.box.died:  # the agent's doing: nothing more goes in, the reward is 0
            return {"died": self.box.died}
        self.box.upload(source, target)
        return {}

    def op_download(self, source: str, target: str) -> dict[str, Any]:
        """``source``'s contents (a directory) or itself (a file) at ``target``; nothing
        once the sandbox has died (the agent's logs went with it)."""
        if self.box.died:
            return {"died": self.box.died}
        staging = Path(tempfile.mkdtemp(dir=self.scratch))
        try:
            got = self.box.download(source, staging)
            target_path = Path(target)
            if got.is_dir() and not got.is_symlink():
                target_path.mkdir(parents=True, exist_ok=True)
                for child in got.iterdir():
                    _replace(child, target_path / child.name)
            elif got.is_file() and not got.is_symlink():
                target_path.parent.mkdir(parents=True, exist_ok=True)
                _replace(got, target_path)
            else:
                raise SandboxError(f"{source} is not a file or directory in the sandbox")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return {}

    def op_verify(self, tests_dir: str) -> dict[str, Any]:
        box = self.box
        if box.died:
            return {"reward": 0.0, "rewards": {"reward": 0.0}, "reason": box.died, "output": ""}
        result = box.verify(tests_dir)
        return {
            "reward": result.reward,
            "rewards": result.rewards or {"reward": result.reward},
            "reason": result.reason,
            "output": result.output,
        }

    def op_stop(self) -> dict[str, Any]:
        self.close()
        return {}

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        shutil.rmtree(self.scratch, ignore_errors=True)


def _replace(source: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    shutil.move(source, target)


def serve(requests: TextIO, replies: TextIO) -> None:
    """Answer requests until ``stop`` or the end of input; the sandbox goes either way."""
    server = Server()
    try:
        for line in requests:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                reply = server.handle(request)
            except Exception as error:  # every failure is a reply, the loop goes on
                log.exception("request failed")
                request = {}
                reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
            if isinstance(request, dict) and request.get("op") == "stop":
                return
    finally:
        server.close()


ENVIRONMENTS = {"bwrap": "BwrapEnvironment", "podman": "PodmanEnvironment",
                "apptainer": "ApptainerEnvironment"}  # fmt: skip
"""Our Harbor environment class of each backend (in :mod:`tmax.harbor_environment`)."""
QUIET = {"HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""What keeps ``harbor run`` off the network it does not need (usage telemetry, the
model price list)."""


@dataclass(frozen=True)
class HarborTrial:
    """One trial of a Harbor job, as its ``result.json`` says."""

    task: str
    reward: float | None
    exception: str | None
    seconds: float


def harbor_job(
    harbor_python: str,
    tasks: Path,
    agent: str,
    backend: str,
    jobs_dir: Path,
    name: str,
    *,
    concurrent: int = 1,
    extra: Sequence[str] = (),
    python_path: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 86400,
) -> list[HarborTrial]:
    """Run ``harbor run`` (Harbor's own trial loop, with ``harbor_python``'s Harbor) on
    a task or a folder of tasks through our ``backend`` environment; its trials.

    ``python_path`` goes first on Harbor's path (a custom agent's folder); ``src/`` of
    this checkout is always on it, and tmax's interpreter is this one; ``env`` adds to
    Harbor's environment (an API key)."""
    src = Path(__file__).resolve().parents[2]
    paths = [*map(str, python_path), str(src)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env = {**os.environ, **QUIET, **(env or {}), "PYTHONPATH": os.pathsep.join(paths),
           "TMAX_PYTHON": sys.executable}  # fmt: skip
    harbor = Path(harbor_python).parent / "harbor"
    argv = [
        str(harbor), "run", "--yes", "--quiet", "--path", str(tasks), "--agent", agent,
        "--env", f"tmax.harbor_environment:{ENVIRONMENTS[backend]}",
        "--jobs-dir", str(jobs_dir), "--job-name", name, "--n-concurrent", str(concurrent),
        *extra,
    ]  # fmt: skip
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    job = jobs_dir / name
    if run.returncode != 0 or not (job / "result.json").is_file():
        raise RuntimeError(
            f"harbor run failed ({run.returncode}): {(run.stdout + run.stderr)[-3000:]}"
        )
    trials = []
    for result in sorted(job.glob("*/result.json")):
        data = json.loads(result.read_text())
        rewards = (data.get("verifier_result") or {}).get("rewards") or {}
        exception = data.get("exception_info") or {}
        error = exception and f"{exception['exception_type']}: {exception['exception_message']}"
        started, finished = data.get("started_at"), data.get("finished_at")
        seconds = _seconds(started, finished) if started and finished else float("nan")
        trials.append(HarborTrial(
            task=data["task_name"],
            reward=rewards.get("reward"),
            exception=error or None,
            seconds=seconds,
        ))  # fmt: skip
    return trials


def _seconds(started: str, finished: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()


def main() -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # replies get a descriptor of their own; anything else that writes to stdout (a
    # stray print, a child process) goes to the log instead of into the protocol
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
