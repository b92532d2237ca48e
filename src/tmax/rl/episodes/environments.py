"""Where the trainer's groups come from.

``TaskEnvironment``: generated tasks in sandboxes, played through the tmax harness
token in / token out (tmax.rl.episodes.rollout) and scored by each task's verifier — the
paper's setting. ``TargetTokenEnvironment``: a one-token synthetic environment with
a known answer, so a test can watch the reward climb from chance to 1.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.harness import HarnessSettings
from tmax.rl.engines.local import Engine
from tmax.rl.episodes.rollout import Sample, rollout_group
from tmax.sandbox import BackendName

log = logging.getLogger("tmax.rl.episodes.environments")


class TaskEnvironment:
    """Sandboxed tasks (Harbor directories) under the tmax harness."""

    def __init__(
        self,
        task_dirs: Mapping[str, Path],
        tokenizer: Any,
        settings: HarnessSettings,
        *,
        backend: BackendName,
        workers: int = 1,
        run_id: str | None = None,
    ) -> None:
        self.task_dirs = dict(task_dirs)
        self.tokenizer = tokenizer
        self.settings = settings
        self.backend = backend
        self.workers = workers
        self.run_id = run_id
        self.stopping = threading.Event()

    def tasks(self) -> Sequence[str]:
        return sorted(self.task_dirs)

    def cancel(self, stop: bool = True) -> None:
        """Abandon the episodes being played, at their next turn (the run is stopping);
        ``stop=False`` lets episodes run again (a new run on this environment)."""
        if stop:
            self.stopping.set()
        else:
            self.stopping.clear()

    def close(self) -> None:
        """Abandon the episodes still being played and remove every sandbox of this run
        (``run_id``) on this machine: generation threads are daemons, so a group
        fetched ahead of the last step, or cut short by SIGTERM, never closes its own."""
        self.cancel()
        if self.run_id is not None:
            from tmax.sandbox import cleanup

            removed = cleanup(self.run_id, (self.backend,))[self.backend]
            if removed:
                log.info("removed %d sandbox(es) of abandoned episodes", len(removed))

    def sample_group(self, task: str, engine: Engine, group_size: int, seed: int) -> list[Sample]:
        return rollout_group(
            self.task_dirs[task],
            engine,
            self.tokenizer,
            self.settings,
            group_size,
            workers=self.workers,
            backend=self.backend,
            run_id=self.run_id,
            seed=seed,
            cancel=self.stopping,
        )


class TargetTokenEnvironment:
    """Each task is a fixed prompt (token ids) and a target token: one sampled token,
    reward 1 when it is the target. A random policy scores 1/|choices| on average."""

    def __init__(self, prompts: Mapping[str, tuple[Sequence[int], int]], temperature: float = 1.0):
        self.prompts = {name: (list(ids), target) for name, (ids, target) in prompts.items()}
        self.temperature = temperature

    def tasks(self) -> Sequence[str]:
        return sorted(self.prompts)

    def sample_group(self, task: str, engine: Engine, group_size: int, seed: int) -> list[Sample]:
        prompt, target = self.prompts[task]
        generations = engine.generate(
            [prompt] * group_size,
            max_tokens=1,
            temperature=self.temperature,
            stop_token_ids=[],
            seed=seed,
        )
        version = engine.policy_version
        samples = []
        for generation in generations:
            tokens = prompt + list(generation.token_ids)
            reward = 1.0 if generation.token_ids[:1] == [target] else 0.0
            samples.append(
                Sample(
                    task_id=task,
                    tokens=tokens,
                    loss_mask=[0] * len(prompt) + [1] * len(generation.token_ids),
                    behaviour_logprobs=[0.0] * len(prompt) + list(generation.logprobs),
                    reward=reward,
                    policy_version=version,
                    exit_status="finished",
                    tool_calls=0,
                    turns=1,
                    response_tokens=len(generation.token_ids),
                )
            )
        return samples
