"""One evaluation trial: a task, a model, a harness, a run — in a fresh sandbox.

The trial directory is Harbor's, and its JSON files load with Harbor's own models
(harbor 0.26.0; ``tmax.evaluate.harbor_check`` checks it), so Harbor's tooling and
ours read it alike:

    <trial>/config.json            TrialConfig: what was run
    <trial>/result.json            TrialResult: task_name, task_id, verifier_result.rewards,
                                   exception_info, agent_result (our ``tmax`` block in
                                   its metadata), per-phase timing
    <trial>/agent/trajectory.json  the episode in ATIF
    <trial>/verifier/              test-stdout.txt and the reward file

``result.json`` is written last and atomically: a trial directory without it is
unfinished and is redone on resume (``task_checksum``, Harbor's own field, tells a
finished trial of a since-changed task). Verification follows Harbor: the verifier
runs on whatever the agent left, also after the agent ran out of time
(``AgentTimeoutError``) or exhausted its memory (``AgentOutOfMemoryError``); both are
recorded in ``exception_info`` and are the agent's failures (scored, counted).
Infrastructure failures (the sandbox would not start, the model endpoint kept
failing, a bug in a harness) are recorded in ``exception_info`` with ``failure_kind:
infra`` and a ``policy_override`` marking the reward invalid, so the metrics (ours
and Harbor's) keep them apart from wrong answers; whatever else the agent did wrong
(running out of turns or tokens, malformed replies) is a reward of 0. An agent that
breaks its own sandbox (exhausts its memory or process slots until the control shell
dies) scores 0 without verification, with ``exception_info`` and ``failure_kind:
agent``: an attempt, not infra.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import traceback
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tmax.harness import HarnessSettings, make_harness, run_agent
from tmax.harness.base import AgentRun
from tmax.harness.trajectory import now_iso
from tmax.io import write_json, write_text
from tmax.models.client import ChatModel, ModelError, SeededModel
from tmax.sandbox.base import NodeError, Sandbox, SandboxDied, SandboxError, VerifyResult
from tmax.tasks import read_task

log = logging.getLogger("tmax.evaluate")

HARBOR_POLICY = {
    "agent": {"should_retry": False, "should_grade": True, "has_valid_reward": True},
    "infra": {"should_retry": True, "should_grade": False, "has_valid_reward": False},
}
"""Harbor's ``ErrorPolicyOverride`` for each failure kind: how Harbor's own job
statistics and retries should treat the exception (its table does not know ours)."""


class AgentTimeoutError(TimeoutError):
    """Harbor's name for an agent that ran past ``[agent] timeout_sec``."""


class AgentOutOfMemoryError(MemoryError):
    """A command of the agent was killed by the OOM killer at the task's memory limit
    (Harbor has no agent-side name for it; its ``MemoryLimitExceededError`` is the
    backend's failure)."""


AGENT_EXCEPTIONS: dict[str, type[Exception]] = {
    "agent_timeout": AgentTimeoutError,
    "out_of_memory": AgentOutOfMemoryError,
}
"""Agent exit statuses Harbor records as an exception although the trial is verified."""

SandboxFactory = Callable[[Path], Sandbox]
"""Makes a (not yet started) sandbox for a task directory."""


@dataclass(frozen=True)
class TrialSpec:
    """Which trial: (model × benchmark × harness × run) on one task."""

    task_dir: Path
    task_name: str
    model: str
    benchmark: str
    harness: str
    run: int
    domain: str | None = None
    seed: int | None = None
    """The trial's sampling seed (:class:`~tmax.models.client.SeededModel`): one per
    (run, task), recorded in the result; None leaves sampling unseeded."""

    @property
    def trial_name(self) -> str:
        """Stable across restarts (resume finds finished trials by it)."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", self.task_name)[:80]
        return f"{safe}__r{self.run}"


class _Phase:
    """Harbor's ``{started_at, finished_at}`` timing record of one phase."""

    def __init__(self, timing: dict[str, Any], name: str) -> None:
        self.record: dict[str, Any] = {"started_at": now_iso(), "finished_at": None}
        timing[name] = self.record

    def __enter__(self) -> _Phase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.record["finished_at"] = now_iso()


def _exception_info(error: BaseException, kind: str) -> dict[str, Any]:
    """Harbor's ``ExceptionInfo``, plus our ``failure_kind`` (which Harbor ignores)."""
    return {
        "exception_type": type(error).__name__,
        "exception_message": str(error)[:4000],
        "exception_traceback": "".join(traceback.format_exception(error))[-8000:],
        "occurred_at": now_iso(),
        "policy_override": HARBOR_POLICY[kind],
        "failure_kind": kind,
    }


def task_checksum(task_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(task_dir)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def finished_result(trial_dir: Path, checksum: str) -> dict[str, Any] | None:
    """The trial's stored result when it finished on this very task (``checksum``),
    else None: not run, killed mid-way (no or a torn ``result.json``), or the task
    changed since."""
    path = trial_dir / "result.json"
    if not path.is_file():
        return None
    try:
        done = dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None  # torn or corrupt: redo the trial
    return done if done.get("task_checksum") == checksum else None


def trial_config(
    spec: TrialSpec,
    model: ChatModel,
    settings: HarnessSettings,
    trial_dir: Path,
    sandbox: Sandbox | None = None,
    job_id: str | None = None,
) -> dict[str, Any]:
    """The trial's ``config.json``, a Harbor ``TrialConfig``: a local task (``path``;
    Harbor forbids ``name`` beside it) from the benchmark (``source``), the harness
    and its budgets, and the sandbox backend once known (``environment.kwargs``)."""
    environment: dict[str, Any] = {}
    if sandbox is not None:
        backend = type(sandbox)
        environment = {
            "import_path": f"{backend.__module__}:{backend.__qualname__}",
            "kwargs": {"backend": sandbox.backend, "image": sandbox.image},
        }
    return {
        "task": {"path": str(spec.task_dir), "source": spec.benchmark},
        "trial_name": spec.trial_name,
        "trials_dir": str(trial_dir.parent),
        "agent": {"name": spec.harness, "model_name": model.name, "kwargs": asdict(settings)},
        "environment": environment,
        "job_id": job_id,
    }


def run_trial(
    spec: TrialSpec,
    model: ChatModel,
    settings: HarnessSettings,
    trial_dir: Path,
    sandbox_factory: SandboxFactory,
    *,
    job_id: str | None = None,
) -> dict[str, Any]:
    """Run one trial into ``trial_dir`` and return its result; a finished trial is
    not run again (its stored result is returned) unless the task has changed since.
    ``job_id`` is the job folder's ``result.json`` id, when there is one."""
    checksum = task_checksum(spec.task_dir)
    done = finished_result(trial_dir, checksum)
    if done is not None:
        return done
    if trial_dir.exists():  # a killed earlier attempt: start over
        shutil.rmtree(trial_dir)
    (trial_dir / "agent").mkdir(parents=True)
    (trial_dir / "verifier").mkdir()
    config = trial_config(spec, model, settings, trial_dir, job_id=job_id)
    write_json(trial_dir / "config.json", config)

    timing: dict[str, Any] = {}
    started_at = now_iso()
    exception: dict[str, Any] | None = None
    agent_run: AgentRun | None = None
    verification: VerifyResult | None = None
    harness = None
    sandbox: Sandbox | None = None
    try:
        harness = make_harness(spec.harness, settings)
        task = read_task(spec.task_dir)
        with _Phase(timing, "environment_setup"):
            sandbox = sandbox_factory(spec.task_dir)
            config = trial_config(spec, model, settings, trial_dir, sandbox, job_id)
            write_json(trial_dir / "config.json", config)
            sandbox.start()
        try:
            timeout_sec = task.config.get("agent", "timeout_sec")
            with _Phase(timing, "agent_execution"):
                episode_model = model if spec.seed is None else SeededModel(model, spec.seed)
                agent_run = run_agent(
                    harness,
                    episode_model,
                    sandbox,
                    task.instruction,
                    timeout_sec=timeout_sec,
                    cut_model_calls=True,
                )
            if agent_run.exit_status == "sandbox_died":
                # The agent cannot reach the control shell, so its sandbox dies of the
                # agent only by exhaustion; without that evidence it is the host's.
                reason = sandbox.agent_death(agent_run.detail)
                verification = VerifyResult(0.0, {"reward": 0.0}, reason=reason)
                exception = _exception_info(SandboxDied(reason), "agent")
            else:
                if agent_run.exit_status in AGENT_EXCEPTIONS:
                    # As Harbor: the exception is recorded and what the agent left is
                    # verified all the same (verify ends the agent's processes first).
                    error = AGENT_EXCEPTIONS[agent_run.exit_status](
                        f"Agent execution ended: {agent_run.detail}"
                    )
                    exception = _exception_info(error, "agent")
                with _Phase(timing, "verifier"):
                    try:
                        verification = sandbox.verify(spec.task_dir / "tests")
                    except SandboxDied as error:
                        # e.g. still out of memory after the agent: the agent's doing
                        # when it exhausted the sandbox, else raised again as infra
                        reason = sandbox.agent_death(f"verifier: {error}")
                        verification = VerifyResult(0.0, {"reward": 0.0}, reason=reason)
                        exception = exception or _exception_info(SandboxDied(reason), "agent")
        finally:
            sandbox.close()
    except NodeError:
        raise  # this machine cannot run sandboxes: stop, do not record every trial as infra
    except (SandboxError, ModelError) as error:
        exception = _exception_info(error, "infra")
    except Exception as error:  # a harness or task bug must not stop the whole evaluation
        log.exception("trial %s failed", spec.trial_name)
        exception = _exception_info(error, "infra")

    if agent_run is not None:
        agent_run.trajectory.write(
            trial_dir / "agent" / "trajectory.json",
            {"exit_status": agent_run.exit_status, "turns": agent_run.turns},
        )
    if verification is not None:
        write_text(trial_dir / "verifier" / "test-stdout.txt", verification.output)
        write_text(trial_dir / "verifier" / "reward.txt", f"{verification.reward}\n")
    usage = agent_run.usage if agent_run else None
    metadata = {
        "tmax": {
            "model": spec.model,
            "benchmark": spec.benchmark,
            "harness": spec.harness,
            "run": spec.run,
            "seed": spec.seed,
            "domain": spec.domain,
            "exit_status": agent_run.exit_status if agent_run else None,
            "exit_detail": agent_run.detail if agent_run else None,
            "failure_kind": exception["failure_kind"] if exception else None,
            "turns": agent_run.turns if agent_run else 0,
            "tool_calls": agent_run.tool_calls if agent_run else 0,
            "format_errors": agent_run.format_errors if agent_run else 0,
            "agent_time_sec": agent_run.agent_time_sec if agent_run else None,
            "sandbox_time_sec": agent_run.sandbox_time_sec if agent_run else None,
            "model_time_sec": usage.model_time_sec if usage else None,
            "verifier_reason": verification.reason if verification else None,
            "sandbox_degraded": list(sandbox.degraded) if sandbox is not None else [],
            "sandbox_network": sandbox.network if sandbox is not None else None,
        }
    }
    result = {
        "id": str(uuid.uuid4()),
        "task_name": spec.task_name,
        "trial_name": spec.trial_name,
        "trial_uri": trial_dir.resolve().as_uri(),
        "task_id": {"path": str(spec.task_dir)},
        "source": spec.benchmark,
        "task_checksum": checksum,
        "config": config,
        "agent_info": {
            "name": spec.harness,
            "version": harness.version if harness else "unknown",
            "model_info": {"name": model.name, "provider": "openai-compatible"},
        },
        "agent_result": {
            "n_input_tokens": usage.prompt_tokens if usage else None,
            "n_cache_tokens": None,
            "n_output_tokens": usage.completion_tokens if usage else None,
            "cost_usd": None,
            "rollout_details": None,
            "metadata": metadata,
        },
        "verifier_result": (
            {"rewards": verification.rewards or {"reward": verification.reward}}
            if verification is not None
            else None
        ),
        # The tests run in the agent's sandbox, in namespaces of their own.
        "verifier_environment_mode": "shared" if verification is not None else None,
        "exception_info": exception,
        "started_at": started_at,
        "finished_at": now_iso(),
        "environment_setup": timing.get("environment_setup"),
        "agent_setup": None,
        "agent_execution": timing.get("agent_execution"),
        "verifier": timing.get("verifier"),
    }
    write_json(trial_dir / "result.json", result)
    return result
