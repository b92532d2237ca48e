"""Harbor's own agents beside ours: an evaluation run played by Harbor's agent code
(``harbor run``, Harbor 0.26.0 in ``.venv-harbor``) through our sandboxes as Harbor
environments (:mod:`tmax.harbor_environment`), against the same served model, tasks and
budgets as our harnesses.

``evaluation.harnesses`` names them ``harbor-<agent>``: ``harbor-terminus-2`` is
Harbor's Terminus-2 (``harbor/agents/terminus_2``), to set beside our ``terminus-2``.
The run is one Harbor job; its folder is the run's trials folder, in Harbor's own
format, which the report reads as it reads ours (labelled with the run's model,
benchmark and harness). Harbor's exceptions are sorted as for any Harbor trial we read
(``data/exception_kinds.yaml``): the agent's doing (its time limit, its context) is a
failed attempt, the rest an infrastructure failure.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.harness import HarnessSettings

log = logging.getLogger("tmax.evaluate.harbor_agents")

HARBOR_AGENTS = {"harbor-terminus-2": "terminus-2"}
"""Our harness name for each Harbor agent the evaluation can run."""


def harbor_run_seed(seed: int, run: int) -> int:
    """The sampling seed of every request in run ``run`` of a Harbor agent."""
    from tmax.models.client import derive_seed

    return derive_seed(seed, "eval", run, "harbor")


def agent_arguments(
    agent: str, base_url: str, model: str, settings: HarnessSettings, seed: int | None = None
) -> list[str]:
    """``harbor run`` arguments that point ``agent`` at the served model with our
    budgets: the sampling temperature, top_p and seed, and where set the turn cap.

    Harbor takes the extra request fields (``llm_call_kwargs``) once per job, so every
    request of a run carries the run's ``seed``: a rerun of the run asks for the same
    samples, and the runs differ (our harnesses go further, a seed per task and turn)."""
    arguments = [
        "--model", f"openai/{model}", "--agent-kwarg", f"api_base={base_url}",
        "--agent-kwarg", "record_terminal_session=false",
    ]  # fmt: skip
    if settings.temperature is not None:
        arguments += ["--agent-kwarg", f"temperature={settings.temperature}"]
    if agent == "terminus-2" and settings.max_turns is not None:
        arguments += ["--agent-kwarg", f"max_turns={settings.max_turns}"]
    fields = {"top_p": settings.top_p, "seed": seed}
    fields = {key: value for key, value in fields.items() if value is not None}
    if fields:
        arguments += ["--agent-kwarg", f"llm_call_kwargs={json.dumps(fields)}"]
    return arguments


def run_harbor_agent(
    harness: str,
    tasks: Sequence[Mapping[str, Any]],
    client: Any,
    settings: HarnessSettings,
    root: Path,
    backend: str,
    network: str,
    *,
    concurrency: int = 1,
    api_key: str | None = None,
    seed: int | None = None,
) -> list[dict[str, Any]]:
    """Every task once under Harbor's agent, as one Harbor job at ``root``; the trials'
    ``result.json`` contents, named by our task names. ``seed``: every request's
    (:func:`agent_arguments`).

    A finished job (every task has its trial) is read back, not rerun; an unfinished
    one is run again whole (Harbor resumes a job as a whole, not by trial)."""
    from tmax.harness.upstream import harbor_python
    from tmax.sandbox.harbor import harbor_job

    agent = HARBOR_AGENTS[harness]
    results = _finished(root, len(tasks))
    if results is None:
        python = harbor_python()
        if python is None:
            raise FileNotFoundError(
                f"{harness} runs Harbor's own agent and needs the Harbor environment: run "
                "./setup.sh (it builds .venv-harbor) or set TMAX_HARBOR_PYTHON"
            )
        dataset = root.parent / f"{root.name}.tasks"
        shutil.rmtree(dataset, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
        dataset.mkdir(parents=True)
        for task in tasks:
            (dataset / Path(task["path"]).name).symlink_to(Path(task["path"]).resolve())
        extra = [*agent_arguments(agent, client.base_url, client.name, settings, seed),
                 "--environment-kwarg", f"network={network}"]  # fmt: skip
        key = {"OPENAI_API_KEY": api_key or os.environ.get("OPENAI_API_KEY") or "none"}
        trials = harbor_job(
            python, dataset, agent, backend, root.parent, root.name,
            concurrent=concurrency, extra=extra, env=key,
        )  # fmt: skip
        log.info("%s: %d trial(s) in %s", harness, len(trials), root)
        results = _finished(root, len(tasks)) or _results(root)
    return [_named(result) for result in results]


def _results(root: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(root.glob("*/result.json"))]


def _finished(root: Path, expected: int) -> list[dict[str, Any]] | None:
    if not (root / "result.json").is_file():
        return None
    results = _results(root)
    return results if len(results) == expected else None


def _named(result: dict[str, Any]) -> dict[str, Any]:
    """The trial with our task name: its folder's (Harbor's is task.toml's)."""
    task = Path(((result.get("config") or {}).get("task") or {}).get("path") or "").name
    return {**result, "task_name": task or result.get("task_name")}
