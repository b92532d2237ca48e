"""Validation in a sandbox: the reference solution scores 1, doing nothing scores 0.

A task that fails either check is quarantined with the reason, never dropped
silently: the shard's JSON lists every task with its verdict, the report counts
quarantines by reason, and the export keeps only tasks that passed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.progress import track

from tmax.io import write_json
from tmax.sandbox import BackendName
from tmax.sandbox.base import NodeError, SandboxError
from tmax.sandbox.episode import run_episode, sandbox_for_task
from tmax.sandbox.images import ImageError
from tmax.tasks import TaskFormatError, read_task

log = logging.getLogger("tmax.generate.validate")


@dataclass(frozen=True)
class TaskCheck:
    """The verdict on one task."""

    task: str
    ok: bool
    reason: str | None
    noop_reward: float | None
    oracle_reward: float | None
    seconds: float


def _reward(
    task_dir: Path, backend: BackendName, commands: list[str], run_id: str
) -> tuple[float, str]:
    with sandbox_for_task(task_dir, backend, run_id=run_id) as box:
        if commands:
            box.upload(task_dir / "solution", "/solution")
        episode = run_episode(box, commands, task_dir / "tests")
    return episode.reward, episode.reason or ""


def check_task(task_dir: str | Path, backend: BackendName, run_id: str = "validate") -> TaskCheck:
    """Run the no-op and the oracle for one task; the reason names what failed."""
    task_dir = Path(task_dir)
    started = time.monotonic()
    noop = oracle = None

    def verdict(reason: str | None) -> TaskCheck:
        elapsed = round(time.monotonic() - started, 3)
        return TaskCheck(task_dir.name, reason is None, reason, noop, oracle, elapsed)

    try:
        task = read_task(task_dir)
        if task.solution is None:
            return verdict("no reference solution (solution/solve.sh)")
        noop, _ = _reward(task_dir, backend, [], run_id)
        if noop != 0.0:
            return verdict(f"no-op scored {noop:g} (the tests accept an untouched sandbox)")
        oracle, oracle_why = _reward(task_dir, backend, ["bash /solution/solve.sh"], run_id)
        if oracle != 1.0:
            detail = f": {oracle_why}" if oracle_why else ""
            return verdict(f"oracle scored {oracle:g}{detail}")
    except TaskFormatError as error:
        return verdict(f"malformed task: {error}")
    except NodeError:
        raise  # the machine's, not the task's: quarantining every task would hide it
    except ImageError as error:  # the task's own Dockerfile does not build
        return verdict(f"image build failed: {str(error).splitlines()[0][:300]}")
    except SandboxError as error:
        return verdict(f"sandbox error: {str(error).splitlines()[0][:300]}")
    return verdict(None)


def validate_tasks(
    task_dirs: Sequence[Path],
    backend: BackendName,
    output: str | Path,
    run_id: str = "validate",
    generation_failures: Mapping[str, str] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Check every task of a shard, ``workers`` sandboxes at a time, and write the
    verdicts as JSON in task order; specs that could not be generated at all are listed
    as quarantined too.

    Several at a time pays off even on few cores: much of a check is waiting (a no-op
    run of a service task waits for a port that never opens until the test's timeout).
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running = pool.map(lambda task_dir: check_task(task_dir, backend, run_id), task_dirs)
        checks = list(
            track(running, total=len(task_dirs), description="validating tasks",
                  disable=len(task_dirs) < 5)
        )  # fmt: skip
    checks += [
        TaskCheck(spec_id, False, f"generation failed: {reason}", None, None, 0.0)
        for spec_id, reason in (generation_failures or {}).items()
    ]
    passed = sum(c.ok for c in checks)
    summary = {
        "backend": backend,
        "workers": workers,
        "tasks": len(checks),
        "passed": passed,
        "quarantined": len(checks) - passed,
        "checks": [asdict(c) for c in checks],
    }
    write_json(output, summary)
    log.info("validated %d task(s) on %s: %d passed, %d quarantined", len(checks), backend,
             passed, len(checks) - passed)  # fmt: skip
    for check in checks:
        if not check.ok:
            log.warning("quarantined %s: %s", check.task, check.reason)
    return summary
