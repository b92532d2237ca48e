"""Trials in, one measurement per (model, variant, benchmark, harness) out.

Two sources read alike: this workflow's evaluation outputs (``run<r>.json`` naming a
folder of trial directories) and any Harbor job folders, e.g. released evaluation
runs, so published trajectories can be re-tabulated without rerunning them.

Every measurement is computed by :func:`~tmax.evaluate.metrics.summarize` under one
statistics convention, the same as ``tmax eval metrics`` for the same trials: by
default the paper's (an infrastructure error scores 0, run i = each task's i-th
attempt, population std), or ``exclude_infra`` (such trials left out, sample std).
Infrastructure errors are counted on the side under both.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tmax.evaluate.metrics import (
    DEFAULT_STATISTICS,
    read_job_records,
    records_from_run_files,
    summarize,
)
from tmax.evaluate.records import TrialRecord

log = logging.getLogger(__name__)

#: Model label suffixes the workflow gives trained versions (rules/common.smk).
VARIANT_SUFFIXES = (("tmax", "-tmax"), ("sft", "-sft"), ("control", "-control"))
VARIANTS = ("base", "sft", "control", "tmax")
UNKNOWN_BENCHMARK = "unknown"


def split_variant(label: str) -> tuple[str, str]:
    """``qwen3.5-9b-tmax`` -> (``qwen3.5-9b``, ``tmax``); a plain name is ``base``."""
    for variant, suffix in VARIANT_SUFFIXES:
        if label.endswith(suffix) and len(label) > len(suffix):
            return label[: -len(suffix)], variant
    return label, "base"


@dataclass(frozen=True)
class Measurement:
    """pass@1 (mean ± std over runs) and pass@k of one setting, under the statistics
    convention ``statistics`` (``paper`` or ``exclude_infra``). ``pass_at_1`` is None
    when nothing could be scored (every trial an infrastructure error, with such
    trials left out)."""

    model: str
    variant: str
    benchmark: str
    harness: str
    pass_at_1: float | None
    pass_at_1_std: float | None
    n_tasks: int
    n_runs: int
    n_trials: int
    n_infra: int
    pass_at_k: dict[int, float] = field(default_factory=dict)
    statistics: str = DEFAULT_STATISTICS
    sources: tuple[str, ...] = ()
    per_task: dict[str, tuple[int, int]] = field(default_factory=dict)
    """task → (successes, scored attempts) under ``statistics``: what a paired
    comparison of two models on the same tasks needs
    (:func:`~tmax.evaluate.metrics.paired_difference`)."""

    @property
    def label(self) -> str:
        suffix = dict(VARIANT_SUFFIXES).get(self.variant, "")
        return self.model + suffix


def measure(
    records: Iterable[TrialRecord], *, statistics: str = DEFAULT_STATISTICS
) -> list[Measurement]:
    """One :class:`Measurement` per (model, benchmark, harness) found in ``records``,
    under the ``statistics`` convention."""
    records = list(records)
    sources: dict[tuple, set[str]] = defaultdict(set)
    for record in records:
        sources[record.group].add(str(record.path.parent))
    infra = Counter(record.group for record in records if record.is_infra_failure)
    measurements = []
    for group in summarize(records, statistics=statistics).groups:
        key = (group.model, group.benchmark, group.harness)
        model, variant = split_variant(group.model)
        measurements.append(
            Measurement(
                model=model,
                variant=variant,
                benchmark=group.benchmark or UNKNOWN_BENCHMARK,
                harness=group.harness,
                pass_at_1=group.pass_at_1_mean,
                pass_at_1_std=group.pass_at_1_std,
                n_tasks=group.n_tasks,
                n_runs=group.n_runs,
                n_trials=group.n_trials,
                n_infra=infra[key],
                pass_at_k=dict(group.pass_at_k),
                statistics=statistics,
                sources=tuple(sorted(sources[key])),
                per_task={
                    task: (counts["successes"], counts["attempts"])
                    for task, counts in group.per_task.items()
                },
            )
        )
    return measurements


def records_from_runs(run_files: Sequence[Path]) -> list[TrialRecord]:
    """The trials behind the workflow's ``results/eval/.../run<r>.json`` files."""
    records = records_from_run_files(run_files)
    log.info("read %d trial(s) from %d evaluation run file(s)", len(records), len(run_files))
    return records


def records_from_jobs(
    job_dirs: Sequence[Path], *, strict: bool = True, statistics: str = DEFAULT_STATISTICS
) -> list[TrialRecord]:
    """Every trial of Harbor job folders (ours or Harbor's own), runs numbered as
    ``statistics`` numbers them (:func:`~tmax.evaluate.metrics.read_job_records`)."""
    return read_job_records(job_dirs, statistics=statistics, strict=strict)


# --- prior datasets ----------------------------------------------------------------------

DATASET_FILES = ("manifest", "labels", "difficulty", "decontam")
"""Per prior dataset, under ``results/datasets/<name>/``: the adapter's manifest,
the labeller's balance, the reference model's difficulty and (when checked) the
13-gram report; any of them may be absent."""


@dataclass(frozen=True)
class DatasetReport:
    """What the workflow measured of one prior dataset (None: file not written)."""

    name: str
    manifest: dict | None = None
    labels: dict | None = None
    difficulty: dict | None = None
    decontam: dict | None = None


def read_dataset_reports(root: Path, names: Sequence[str]) -> list[DatasetReport]:
    """The measurements of each named dataset under ``root`` (``results/datasets``)."""
    reports = []
    for name in names:
        found = {}
        for kind in DATASET_FILES:
            path = Path(root) / name / f"{kind}.json"
            found[kind] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        reports.append(DatasetReport(name, **found))
    log.info("read the measurements of %d prior dataset(s) under %s", len(reports), root)
    return reports
