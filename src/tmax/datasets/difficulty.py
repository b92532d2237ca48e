"""How hard a dataset's tasks are: pass@1 and pass@8 of a reference model under a
harness, over a sample of the dataset's tasks (the paper: Gemini-3-Flash solves
42% of TMAX-15K at pass@1 and 53% at pass@8, against 92% / 95% for Endless
Terminals).

Nothing here runs a trial itself: the evaluation runner (:mod:`tmax.evaluate.runner`)
plays every (task, run) in its own sandbox, resumably, and the evaluation metrics
(:mod:`tmax.evaluate.metrics`) turn the trials into pass@k with the unbiased estimator
of Chen et al. (2021). As in evaluation, a trial whose sandbox, endpoint or harness
failed is an infrastructure failure: it is left out of every rate and counted apart,
so a task with fewer than k valid attempts drops out of pass@k (the count of tasks
behind pass@8 is written beside it).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from tmax.config import schema_default
from tmax.evaluate.metrics import GroupSummary, summarize
from tmax.evaluate.records import read_trial
from tmax.evaluate.runner import plan_trials, run_trials
from tmax.evaluate.stage import HARNESS_SETTINGS, serve_model, settings_from_config, trials_dir
from tmax.evaluate.trial import SandboxFactory
from tmax.harness import HARNESSES, HarnessSettings
from tmax.models.client import ChatModel
from tmax.sandbox import BackendName, default_backend
from tmax.settings import DifficultySection, EvaluationSection, SandboxSection
from tmax.tasks import TaskFormatError, read_task

log = logging.getLogger("tmax.datasets.difficulty")

MEASURED = "measured"
NO_ENVIRONMENTS = "no environments"
NOT_MEASURED = "not measured"
PASS_AT_K = (1, 8)


class DifficultyConfigError(ValueError):
    """A ``difficulty`` section that names no usable reference model."""


@dataclass(frozen=True)
class DifficultySettings:
    """The resolved ``difficulty`` config section.

    ``model`` is the reference model as a ``models`` entry (``name``, ``path`` and,
    for a served endpoint, ``endpoint``); None leaves difficulty unmeasured with
    ``off_reason``.
    """

    model: dict[str, Any] | None
    harness: str = schema_default("difficulty", "harness")
    runs: int = schema_default("difficulty", "runs")
    sample: int | None = schema_default("difficulty", "sample")
    concurrency: int = schema_default("sandbox", "max_concurrency")
    engine: str = schema_default("evaluation", "engine")
    backend: BackendName = field(default_factory=default_backend)
    budgets: dict[str, Any] = field(default_factory=dict)
    off_reason: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DifficultySettings:
        """Resolve from a validated config; raises :class:`DifficultyConfigError`
        naming the key when the reference model is ambiguous or unknown."""
        section = DifficultySection.of(config.get("difficulty") or {})
        evaluation = EvaluationSection.of(config.get("evaluation") or {})
        sandbox = SandboxSection.of(config.get("sandbox") or {})
        # Episode budgets: difficulty.<key> when set, else evaluation.<key>.
        budgets = {
            key: getattr(evaluation, key) if getattr(section, key, None) is None
            else getattr(section, key)
            for key in HARNESS_SETTINGS
        }  # fmt: skip
        model, off_reason = _reference_model(section, config.get("models") or [])
        return cls(
            model=model,
            harness=str(section.harness),
            runs=int(section.runs),
            sample=section.sample,
            concurrency=int(section.concurrency or sandbox.max_concurrency),
            engine=str(evaluation.engine),
            backend=cast(BackendName, sandbox.backend),
            budgets=budgets,
            off_reason=off_reason,
        )

    def harness_settings(self) -> HarnessSettings:
        return settings_from_config(self.budgets)

    def output_params(self) -> dict[str, Any]:
        """What changes the measurement (a Snakemake parameter)."""
        return {
            "model": self.model,
            "harness": self.harness,
            "runs": self.runs,
            "sample": self.sample,
            "backend": self.backend,
            "budgets": self.budgets,
        }


def _reference_model(
    section: DifficultySection, models: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any] | None, str | None]:
    name, endpoint = section.model, section.endpoint
    if name and endpoint:
        raise DifficultyConfigError(
            "difficulty.model and difficulty.endpoint are both set; give one: the name of "
            "a configured model, or an endpoint (base_url and model)"
        )
    if endpoint:
        if not endpoint.get("base_url") or not endpoint.get("model"):
            raise DifficultyConfigError(
                "difficulty.endpoint needs both base_url and model, got "
                f"{sorted(k for k, v in endpoint.items() if v)}"
            )
        entry = {"name": endpoint["model"], "path": endpoint["model"], "endpoint": dict(endpoint)}
        return entry, None
    if name:
        known = {str(m["name"]): dict(m) for m in models}
        if name not in known:
            raise DifficultyConfigError(
                f"difficulty.model is {name!r}; allowed: one of {sorted(known)} "
                "(the configured models) or null with difficulty.endpoint"
            )
        return known[name], None
    return None, (
        "no reference model: set difficulty.model (a configured model) or "
        "difficulty.endpoint (base_url and model)"
    )


# --- which tasks ----------------------------------------------------------------------------


def sample_tasks(tasks: Sequence[Mapping[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """At most ``limit`` tasks, a stable subset (ordered by a hash of the id, so raising
    the limit only adds tasks), returned in id order."""
    chosen = [dict(t) for t in tasks]
    if limit is not None and len(chosen) > limit:
        chosen.sort(key=lambda t: hashlib.sha256(str(t["id"]).encode()).hexdigest())
        chosen = chosen[:limit]
    return sorted(chosen, key=lambda t: str(t["id"]))


def runnable_tasks(
    tasks: Sequence[Mapping[str, Any]], dataset_dir: Path
) -> tuple[list[tuple[Path, str]], list[dict[str, str]]]:
    """(task directory, id) of each task that reads as a valid task directory, and
    the others with the reason (they are not run, so they cannot count as failures)."""
    runnable: list[tuple[Path, str]] = []
    skipped: list[dict[str, str]] = []
    for task in tasks:
        if not task.get("path"):
            skipped.append({"id": str(task["id"]), "reason": "no environment converted"})
            continue
        task_dir = (dataset_dir / str(task["path"])).resolve()
        try:
            read_task(task_dir)
        except TaskFormatError as error:
            skipped.append({"id": str(task["id"]), "reason": f"not a valid task: {error}"})
            continue
        runnable.append((task_dir, str(task["id"])))
    return runnable, skipped


# --- the measurement ---------------------------------------------------------------------------


def not_measured(dataset: str, status: str, reason: str, **extra: Any) -> dict[str, Any]:
    """A ``difficulty.json`` that says why there are no numbers."""
    return {
        "dataset": dataset,
        "status": status,
        "reason": reason,
        "pass_at_1": None,
        "pass_at_8": None,
        **extra,
    }


def summary_document(
    dataset: str,
    group: GroupSummary | None,
    settings: DifficultySettings,
    n_trials: int,
    n_infra: int,
    root: Path,
    skipped: Sequence[Mapping[str, str]],
) -> dict[str, Any]:
    """``difficulty.json`` of a dataset that was measured (rates in percent)."""
    assert settings.model is not None
    pass_k = group.pass_at_k if group else {}
    tasks_k = group.pass_at_k_tasks if group else {}
    reason = None
    if not pass_k:
        reason = "every trial ended in an infrastructure failure"
    document = {
        "dataset": dataset,
        "status": MEASURED,
        "reason": reason,
        "unit": "percent",
        "model": settings.model["name"],
        "harness": settings.harness,
        "runs": settings.runs,
        "n_tasks": group.n_tasks if group else 0,
        "n_runs": settings.runs,
        "n_trials": n_trials,
        "n_infra": n_infra,
        "pass_at_1": pass_k.get(1),
        "pass_at_1_tasks": tasks_k.get(1),
        "pass_at_8": pass_k.get(8),
        "pass_at_8_tasks": tasks_k.get(8),
        "pass_at_1_run_mean": group.pass_at_1_mean if group else None,
        "pass_at_1_run_std": group.pass_at_1_std if group else None,
        "infra_failures": dict(group.infra_failures) if group else {},
        "per_task": dict(group.per_task) if group else {},
        "skipped": list(skipped),
        "budgets": settings.budgets,
        "trials_dir": str(root),
    }
    if settings.runs < 8:
        document["pass_at_8_reason"] = f"needs 8 runs (ran {settings.runs})"
    elif pass_k and 8 not in pass_k:
        document["pass_at_8_reason"] = "no task has 8 valid attempts (infrastructure failures)"
    return document


@contextlib.contextmanager
def _reference_client(
    settings: DifficultySettings, model_dir: Path | None, server_log: Path
) -> Iterator[ChatModel]:
    assert settings.model is not None
    with serve_model(settings.model, model_dir, settings.engine, server_log) as client:
        yield client


def measure_difficulty(
    manifest: Mapping[str, Any],
    dataset_dir: Path,
    settings: DifficultySettings,
    *,
    model_dir: Path | None = None,
    server_log: Path | None = None,
    client: ChatModel | None = None,
    sandbox_factory: SandboxFactory | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """The ``difficulty.json`` document of one converted dataset.

    Trials go to ``<dataset_dir>/difficulty/trials-<hash>/`` (outside the declared
    output, so a killed job resumes them). ``client`` and ``sandbox_factory`` replace
    the served reference model and the configured sandbox backend (tests).
    """
    dataset = str(manifest["dataset"])
    if not manifest.get("has_environments"):
        return not_measured(
            dataset,
            NO_ENVIRONMENTS,
            "no environments: the dataset ships trajectories or prompts, not runnable tasks",
        )
    if settings.model is None and client is None:
        return not_measured(dataset, NOT_MEASURED, settings.off_reason or "no reference model")
    if settings.harness not in HARNESSES:
        raise ValueError(f"unknown harness {settings.harness!r}; allowed: {sorted(HARNESSES)}")
    chosen = sample_tasks(manifest.get("tasks") or [], settings.sample)
    runnable, skipped = runnable_tasks(chosen, dataset_dir)
    if not runnable:
        return not_measured(
            dataset, NOT_MEASURED, "no runnable task in the sample", skipped=skipped
        )
    model = settings.model or {"name": client.name if client else "reference"}
    settings = replace(settings, model=model)
    harness_settings = settings.harness_settings()
    root = trials_dir(dataset_dir / "difficulty", harness_settings, model, settings.backend,
                      "task")  # fmt: skip
    specs = plan_trials(
        ((task_dir, task_id, None) for task_dir, task_id in runnable),
        model=model["name"],
        benchmark=dataset,
        harness=settings.harness,
        runs=range(settings.runs),
    )
    factory = sandbox_factory or _default_sandbox_factory(settings.backend)
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(
                _reference_client(settings, model_dir, server_log or dataset_dir / "server.log")
            )
        results = run_trials(
            specs,
            client,
            harness_settings,
            root,
            factory,
            concurrency=settings.concurrency,
            progress=progress,
        )
    records = [read_trial(root / result["trial_name"]) for result in results]
    ks = [k for k in PASS_AT_K if k <= settings.runs]
    groups = summarize(records, ks=ks).groups
    group = groups[0] if groups else None
    n_infra = sum(1 for record in records if record.is_infra_failure)
    log.info(
        "%s: %d trial(s) over %d task(s), %d infrastructure failure(s)",
        dataset,
        len(records),
        len(runnable),
        n_infra,
    )
    return summary_document(dataset, group, settings, len(records), n_infra, root, skipped)


def _default_sandbox_factory(backend: BackendName) -> Callable[[Path], Any]:
    from tmax.sandbox.episode import sandbox_for_task

    run_id = os.environ.get("TMAX_RUN_ID") or f"difficulty-{os.getpid()}"
    return lambda task_dir: sandbox_for_task(task_dir, backend, run_id=run_id)
