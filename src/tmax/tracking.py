"""Experiment tracking: one run per job, in TensorBoard, Weights & Biases or nowhere.

Every job writes its own files whatever the backend (``metrics.jsonl`` of an RL run,
``metrics.json`` of an evaluation); a tracker shows the same numbers in the tool the
user reads (config ``tracking``). A :class:`Tracker` is opened for one job, in the
job's folder: ``log(metrics, step)``, ``log_config(config)``, ``close()``.

A job's entry names its tracking once (:func:`set_job`: the settings, the job's name
and the workflow's config); it travels in the environment, so that the processes the
job starts (training ranks under ``srun``) open the same run (:func:`job_tracker`).
The run's group is the workflow's run id (:func:`workflow_run_id`), so that one
``snakemake`` invocation's jobs are one group in W&B.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

from tmax.config import schema_default
from tmax.settings import Section

RUN_ID_ENV = "TMAX_WORKFLOW_RUN"
"""The workflow's run id: set once per ``snakemake`` invocation by rules/common.smk
(unless already set, e.g. by the user to name a group); its jobs inherit it."""

JOB_ENV = "TMAX_TRACKING"
"""The current job's tracking (:func:`set_job`), as JSON."""

WANDB_INSTALL = "pip install -e '.[model]'"
"""How to install wandb (pyproject.toml's ``model`` extra pins it)."""


def new_run_id() -> str:
    """A run id that sorts by start time and is unique: ``20261207-124620-3f9a1c``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def workflow_run_id() -> str:
    """The workflow's run id (:data:`RUN_ID_ENV`); outside a workflow, a new one."""
    return os.environ.get(RUN_ID_ENV) or new_run_id()


@dataclass(frozen=True)
class TrackingSettings(Section):
    """The config's ``tracking`` section; the defaults are the schema's."""

    backend: str = schema_default("tracking", "backend")
    wandb_project: str = schema_default("tracking", "wandb_project")
    wandb_entity: str | None = schema_default("tracking", "wandb_entity")
    wandb_mode: str = schema_default("tracking", "wandb_mode")

    PATH = ("tracking",)

    @classmethod
    def from_config(cls, tracking: Mapping[str, Any]) -> TrackingSettings:
        """The ``tracking`` section (a key it does not have is an error)."""
        return cls.of(tracking)

    def check(self) -> None:
        """Fail before the job's work starts when the backend cannot open."""
        if self.backend not in BACKENDS:
            raise ValueError(f"tracking.backend is {self.backend!r}; allowed: {sorted(BACKENDS)}")
        if self.backend == "wandb" and find_spec("wandb") is None:
            raise ImportError(_missing_wandb())


def _missing_wandb() -> str:
    return (f"tracking.backend is wandb, but wandb is not installed: {WANDB_INSTALL} (or "
            "pip install wandb), or set tracking.backend to tensorboard or none")  # fmt: skip


@dataclass(frozen=True)
class Job:
    """What a tracker is opened for: one job of the workflow."""

    name: str
    """The run's name: the rule and its wildcards, e.g. ``rl_train-tiny-qwen3``."""
    kind: str
    """The rule (W&B's job type)."""
    group: str = field(default_factory=workflow_run_id)
    config: Mapping[str, Any] = field(default_factory=dict)
    """The workflow's config, logged when the run opens."""


def job_name(rule: str, wildcards: Mapping[str, Any]) -> str:
    """``rule-value-value``: the rule and its wildcards' values, in their order."""
    return "-".join([rule, *(str(value) for value in wildcards.values())])


class Tracker(Protocol):
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """The numbers among ``metrics`` (``step`` itself aside), at ``step`` (None: once,
        as the run's summary)."""
        ...

    def log_config(self, config: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of ``metrics`` but ``step``: what a tracker plots."""
    return {key: value for key, value in metrics.items()
            if isinstance(value, int | float) and key != "step"}  # fmt: skip


class NoTracker:
    """``tracking.backend: none``: the job's own files only."""

    def __init__(self, settings: TrackingSettings, job: Job, folder: Path) -> None:
        pass

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        pass

    def log_config(self, config: Mapping[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker:
    """Event files under ``<folder>/tensorboard/`` when tensorboard is installed (else
    nothing); the writer is made at the first entry, as it always was."""

    def __init__(self, settings: TrackingSettings, job: Job, folder: Path) -> None:
        self.folder = folder
        self._writer: Any = None

    def writer(self) -> Any:
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                self._writer = False
            else:
                self._writer = SummaryWriter(str(self.folder / "tensorboard"))
        return self._writer or None

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        writer = self.writer()
        if writer is None:
            return
        for key, value in scalars(metrics).items():
            writer.add_scalar(key, value, 0 if step is None else step)
        writer.flush()

    def log_config(self, config: Mapping[str, Any]) -> None:
        writer = self.writer()
        if writer is not None:
            text = json.dumps(config, indent=2, sort_keys=True, default=str)
            writer.add_text("config", f"```\n{text}\n```")
            writer.flush()

    def close(self) -> None:
        if self._writer:
            self._writer.close()
        self._writer = None


class WandbTracker:
    """A W&B run in ``<folder>/wandb/`` (offline by default: ``wandb sync`` uploads it),
    named after the job, grouped by the workflow's run id; wandb is imported only here."""

    def __init__(self, settings: TrackingSettings, job: Job, folder: Path) -> None:
        try:
            import wandb
        except ImportError:
            raise ImportError(_missing_wandb()) from None
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=settings.wandb_project, entity=settings.wandb_entity,
            mode=settings.wandb_mode, dir=str(folder), name=job.name, group=job.group,
            job_type=job.kind,
            # the job's log holds its console; W&B would wrap stdout and stderr
            settings=wandb.Settings(console="off", silent=True),
            reinit="create_new",
        )  # fmt: skip

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        numbers = scalars(metrics)
        if step is None:
            self.run.summary.update(numbers)
        else:
            self.run.log(numbers, step=step)

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)

    def close(self) -> None:
        import wandb

        self.run.finish()
        # finish() can return before the service has written the run file's last
        # records; teardown waits for it (a job opens one run).
        wandb.teardown()


BACKENDS: dict[str, Callable[[TrackingSettings, Job, Path], Tracker]] = {
    "tensorboard": TensorBoardTracker,
    "wandb": WandbTracker,
    "none": NoTracker,
}
"""``tracking.backend`` → its tracker."""


def open_tracker(settings: TrackingSettings, job: Job, folder: Path) -> Tracker:
    """``job``'s tracker, writing under ``folder`` (the job's folder), with the job's
    config logged."""
    settings.check()
    tracker = BACKENDS[settings.backend](settings, job, folder)
    if job.config:
        tracker.log_config(job.config)
    return tracker


def set_job(settings: TrackingSettings, job: Job) -> None:
    """Name this job's tracking for this process and those it starts (a job's entry
    calls it first; it fails here if the backend cannot open)."""
    settings.check()
    payload = {"settings": asdict(settings), "job": {**asdict(job), "config": dict(job.config)}}
    os.environ[JOB_ENV] = json.dumps(payload, default=str)


def set_workflow_job(config: Mapping[str, Any], rule: str, wildcards: Mapping[str, Any]) -> None:
    """:func:`set_job` for a Snakemake job: the config's ``tracking``, the run named after
    the rule and its wildcards, the whole config logged."""
    set_job(TrackingSettings.from_config(config["tracking"]),
            Job(job_name(rule, wildcards), rule, config=config))  # fmt: skip


def job_tracker(folder: Path) -> Tracker:
    """The tracker :func:`set_job` named, writing under ``folder``; without one (a
    trainer run outside the workflow), TensorBoard under ``folder``, as before."""
    payload = os.environ.get(JOB_ENV)
    if not payload:
        return open_tracker(TrackingSettings(), Job(folder.name, "job"), folder)
    named = json.loads(payload)
    return open_tracker(TrackingSettings(**named["settings"]), Job(**named["job"]), folder)
