"""``tmax sandbox preflight``: can this node run our sandboxes, as the backend will?

A probe task on the base domain's image goes through the real backend (the same
flags, image lookup and limits as every episode) and is checked for what an episode
needs: root inside, writable ``/tests`` and ``/logs``, 200 MB of writable space, the
agent's own PID namespace, no network, limits applied (or how they degrade) and a
verifier that scores. Each failure says what to change or ask the admins for.

The Apptainer backend runs it once per node before its first sandbox
(:func:`ensure_preflight`; the result is kept in ``$TMAX_SANDBOX_DIR``, which is
node-local), so a site that cannot work stops the job with the table instead of
scoring every task 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tmax.io import write_json
from tmax.sandbox import backend_class
from tmax.sandbox.base import Limits, NodeError, Sandbox, SandboxError
from tmax.sandbox.images import domain_definition
from tmax.sandbox.storage import sandbox_root
from tmax.sandbox.task_image import cached_toolbox
from tmax.tasks import read_task

PROBE_MB = 200

TASK_TOML = """\
schema_version = "1.1"

[task]
name = "tmax/preflight"
description = "Sandbox preflight probe"

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 512
storage_mb = 1024
network_mode = "no-network"
"""


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "degraded" (runs, with less isolation) or "FAIL"
    detail: str


def _probe_task(root: Path) -> Path:
    task = root / "preflight"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text("Nothing to do: this task probes the sandbox.\n")
    (task / "environment" / "Dockerfile").write_text(domain_definition("base").read_text())
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return task


def _in_sandbox(box: Sandbox, name: str, command: str, expect: str, advice: str) -> Check:
    """``command``'s last line must be ``expect`` (or start with it)."""
    result = box.run(command, timeout=120)
    output = result.output.strip()
    last = output.splitlines()[-1] if output else ""
    if result.exit_code == 0 and last.startswith(expect):
        return Check(name, "ok", last)
    return Check(name, "FAIL", f"{output[-300:] or f'exit {result.exit_code}'} -> {advice}")


def _probe_sandbox(task_dir: Path, backend: str, **limit_overrides: Any) -> Sandbox:
    """The probe task's sandbox, made as any task's is
    (tmax.sandbox.episode.sandbox_for_task), without checking the node first."""
    task = read_task(task_dir)
    return backend_class(backend).for_task(
        task_dir, task, Limits.from_task(task, **limit_overrides),
        toolbox=cached_toolbox(), run_id="preflight", name=task.name,
    )  # fmt: skip


def preflight(backend: str) -> list[Check]:
    """Start a probe sandbox on ``backend`` and check what episodes rely on."""
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="tmax-preflight-") as scratch:
        task = _probe_task(Path(scratch))
        try:
            box = _probe_sandbox(task, backend)
        except Exception as error:
            advice = "build the images first (snakemake images, on a node with network)"
            return [Check("image", "FAIL", f"{type(error).__name__}: {error} -> {advice}")]
        checks.append(Check("image", "ok", str(box.image)))
        try:
            box.start()
        except SandboxError as error:
            return [*checks, Check("start", "FAIL", str(error))]
        try:
            checks.append(Check("start", "ok", f"{backend} sandbox up"))
            checks += _checks(box, task)
        finally:
            box.close()
        checks.append(_network_check(backend, task))
    return checks


def _network_check(backend: str, task: Path) -> Check:
    """A sandbox with network must not reach a server on the host (bound to every
    address, the loopback included). Where it does, or cannot start, episodes of tasks
    without network still run: "degraded", with what a phase with network can reach."""
    from tmax.sandbox.base import host_addresses
    from tmax.sandbox.host_server import HostServer

    try:
        with HostServer() as server:
            targets = ["127.0.0.1", *(a for a in host_addresses() if ":" not in a)]
            probe = "; ".join(
                f"(exec 3<>/dev/tcp/{a}/{server.port}) 2>/dev/null && echo reached {a}"
                for a in targets
            )
            with _probe_sandbox(task, backend, network=True) as box:
                reached = box.run(f"{probe}; echo done", timeout=60).output.split()
                how = box.host_reach
    except SandboxError as error:
        return Check("network phases", "degraded", f"a sandbox with network cannot start: {error}")
    hits = [reached[i + 1] for i, word in enumerate(reached[:-1]) if word == "reached"]
    if hits or server.connections:
        where = ", ".join(hits) or f"the host's server ({server.connections} connections)"
        return Check("network phases", "degraded", f"a phase with network reaches {where} ({how})")
    return Check("network phases", "ok", f"host {how}")


def _checks(box: Sandbox, task: Path) -> list[Check]:
    checks = [
        _in_sandbox(box, "root inside", "id -u", "0",
                    "the sandbox user must be root inside (Apptainer: --fakeroot)"),
        _in_sandbox(box, "writable /tests and /logs",
                    "mkdir -p /tests /logs/verifier && touch /logs/verifier/probe && "
                    "rm -rf /tests /logs/verifier/probe && echo writable", "writable",
                    "the image's root file system must be writable through the overlay"),
        _in_sandbox(box, f"{PROBE_MB} MB writable",
                    f"dd if=/dev/zero of=.tmax-probe bs=1M count={PROBE_MB} 2>&1 | tail -1; "
                    f"rm -f .tmax-probe", f"{PROBE_MB * 1024 * 1024} bytes",
                    "give the writable layer room (TMAX_SANDBOX_DIR on a larger local disk)"),
        _in_sandbox(box, "own PID namespace",
                    "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; "
                    "[ $n -lt 50 ] && echo \"$n processes visible\"", "",
                    "the agent must not see the node's processes (unshare --pid, user "
                    "namespaces)"),
        _in_sandbox(box, "network off",
                    "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -v '^lo$' "
                    "|| echo 'loopback only'", "loopback only",
                    "the sandbox must have no network (--network none)"),
    ]  # fmt: skip
    degraded = [d.partition(": ") for d in box.degraded]
    limits = [why for what, _, why in degraded if what != "storage"]
    storage = [why for what, _, why in degraded if what == "storage"]
    checks.append(Check("memory/CPU/PID limits", "degraded" if limits else "ok",
                        "; ".join(limits) or "applied"))  # fmt: skip
    checks.append(Check("storage limit", "degraded" if storage else "ok",
                        "; ".join(storage) or "applied"))  # fmt: skip
    verdict = box.verify(task / "tests")
    checks.append(Check("verifier", "ok" if verdict.reward == 1.0 else "FAIL",
                        f"reward {verdict.reward:g}" + (f" ({verdict.reason})"
                                                        if verdict.reason else "")))  # fmt: skip
    return checks


def table(checks: list[Check]) -> str:
    lines = ["| check | status | detail |", "|---|---|---|"]
    lines += [f"| {c.name} | {c.status} | {c.detail.replace('|', '/')} |" for c in checks]
    return "\n".join(lines)


def passed(checks: list[Check]) -> bool:
    return all(check.status != "FAIL" for check in checks)


_lock = threading.Lock()
_done: set[str] = set()


def ensure_preflight(backend: str) -> None:
    """Run the preflight once per node and setting (kept in ``$TMAX_SANDBOX_DIR``);
    raise NodeError with the table when this node cannot run episodes."""
    key = hashlib.sha256(
        json.dumps([socket.gethostname(), backend, os.environ.get("TMAX_SANDBOX_LIMITS"),
                    os.environ.get("TMAX_APPTAINER_BIN"), os.geteuid()]).encode()
    ).hexdigest()[:16]  # fmt: skip
    with _lock:
        if key in _done:
            return
        marker = sandbox_root() / f"preflight-{backend}-{key}.json"
        if not marker.is_file():
            checks = preflight(backend)
            if not passed(checks):
                raise NodeError(
                    f"this node cannot run {backend} sandboxes (tmax sandbox preflight "
                    f"--backend {backend}):\n{table(checks)}"
                )
            write_json(
                marker, {"host": socket.gethostname(), "checks": [asdict(c) for c in checks]}
            )
        _done.add(key)
