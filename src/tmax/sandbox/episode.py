"""A task's whole life in a sandbox: build its image, start, act, verify.

``sandbox_for_task`` turns a Harbor task directory into a ready sandbox on any
backend; ``run_episode`` plays a fixed list of commands (an oracle, a no-op, a
test's attack) and scores it. The agent harnesses (tmax.harness) drive the same
sandbox turn by turn and end episodes by the same rules.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmax.sandbox import BackendName, backend_class
from tmax.sandbox.base import ExecResult, Limits, Sandbox, SandboxDied, VerifyResult
from tmax.sandbox.preflight import ensure_preflight
from tmax.sandbox.task_image import (
    LayeredImage,
    cached_toolbox,
    dockerfile_instructions,
    layered_image,
    task_image,
)
from tmax.tasks import read_task

__all__ = [
    "EpisodeResult",
    "LayeredImage",
    "dockerfile_instructions",
    "layered_image",
    "run_episode",
    "sandbox_for_task",
    "task_image",
]

log = logging.getLogger("tmax.sandbox.episode")


def sandbox_for_task(
    task_dir: str | Path,
    backend: BackendName,
    *,
    toolbox: Path | None = None,
    run_id: str | None = None,
    preflight: bool = True,
    **limit_overrides: Any,
) -> Sandbox:
    """A (not yet started) sandbox for a task directory, with the task's limits, its
    image prepared by the backend's class (:meth:`~tmax.sandbox.base.Sandbox.for_task`).

    Where the backend asks for it (Apptainer), the node is checked first, once
    (``preflight``: see preflight.py)."""
    task_dir = Path(task_dir)
    task = read_task(task_dir)
    limits = Limits.from_task(task, **limit_overrides)
    common = {"toolbox": toolbox or cached_toolbox(), "run_id": run_id, "name": task.name}
    cls = backend_class(backend)
    if preflight and cls.checks_node_first:
        ensure_preflight(backend)
    return cls.for_task(task_dir, task, limits, **common)


@dataclass
class EpisodeResult:
    """How an episode ended: the reward, and why it is 0 when something broke."""

    reward: float
    reason: str | None = None
    steps: list[ExecResult] = field(default_factory=list)
    verification: VerifyResult | None = None


def run_episode(sandbox: Sandbox, commands: Sequence[str], tests_dir: str | Path) -> EpisodeResult:
    """Run ``commands`` in order, then the verifier.

    An out-of-memory kill or a dead sandbox ends the episode at once with reward 0
    and the reason, as in the paper's RL environment (a sandbox OOM scores 0).
    """
    steps: list[ExecResult] = []
    for index, command in enumerate(commands):
        try:
            result = sandbox.run(command)
        except SandboxDied as error:
            return EpisodeResult(0.0, f"sandbox died during command {index + 1}: {error}", steps)
        steps.append(result)
        if result.oom_killed:
            reason = (
                f"out of memory: command {index + 1} was killed by the OOM killer "
                f"(limit {sandbox.limits.memory_mb} MB)"
            )
            log.info("%s: %s", sandbox.sandbox_id, reason)
            return EpisodeResult(0.0, reason, steps)
    verification = sandbox.verify(tests_dir)
    return EpisodeResult(verification.reward, verification.reason, steps, verification)
