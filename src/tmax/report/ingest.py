"""Trials in, one measurement per (model, variant, benchmark, harness) out.

Two sources read alike: this workflow's evaluation outputs (``run<r>.json`` naming a
folder of trial directories) and any Harbor job folders, e.g. released evaluation
runs, so published trajectories can be re-tabulated without rerunning them.

The paper's tables score a trial that ended in an infrastructure error as a failure
(reward 0), unlike the per-job metrics of :mod:`tmax.evaluate.metrics`, which leave
such trials out. Here they are turned into 0-reward attempts before the same
:func:`~tmax.evaluate.metrics.summarize` runs, and counted on the side.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tmax.evaluate.metrics import summarize
from tmax.evaluate.records import TrialRecord, read_jobs, read_trial

log = logging.getLogger(__name__)

#: Model label suffixes the workflow gives trained versions (rules/common.smk).
VARIANT_SUFFIXES = (("tmax", "-tmax"), ("sft", "-sft"))
VARIANTS = ("base", "sft", "tmax")
UNKNOWN_BENCHMARK = "unknown"


def split_variant(label: str) -> tuple[str, str]:
    """``qwen3.5-9b-tmax`` -> (``qwen3.5-9b``, ``tmax``); a plain name is ``base``."""
    for variant, suffix in VARIANT_SUFFIXES:
        if label.endswith(suffix) and len(label) > len(suffix):
            return label[: -len(suffix)], variant
    return label, "base"


@dataclass(frozen=True)
class Measurement:
    """pass@1 of one setting, infrastructure errors scored 0 (``pass_at_1``) and,
    for comparison with per-job metrics, left out (``pass_at_1_completed``)."""

    model: str
    variant: str
    benchmark: str
    harness: str
    pass_at_1: float
    pass_at_1_std: float
    n_tasks: int
    n_runs: int
    n_trials: int
    n_infra: int
    pass_at_k: dict[int, float] = field(default_factory=dict)
    pass_at_1_completed: float | None = None
    pass_at_1_completed_std: float | None = None
    sources: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        suffix = dict(VARIANT_SUFFIXES).get(self.variant, "")
        return self.model + suffix


def infra_as_failures(records: Iterable[TrialRecord]) -> list[TrialRecord]:
    """Each infrastructure failure becomes a valid attempt with reward 0."""
    return [replace(r, failure=None, reward=0.0) if r.is_infra_failure else r for r in records]


def measure(records: Iterable[TrialRecord]) -> list[Measurement]:
    """One :class:`Measurement` per (model, benchmark, harness) found in ``records``."""
    records = list(records)
    sources: dict[tuple, set[str]] = defaultdict(set)
    for record in records:
        sources[record.group].add(str(record.path.parent))
    infra = Counter(record.group for record in records if record.is_infra_failure)
    completed = {(g.model, g.benchmark, g.harness): g for g in summarize(records, ks=(1,)).groups}
    measurements = []
    for group in summarize(infra_as_failures(records)).groups:
        key = (group.model, group.benchmark, group.harness)
        model, variant = split_variant(group.model)
        assert group.pass_at_1_mean is not None  # every trial is valid once infra scores 0
        done = completed[key]
        measurements.append(
            Measurement(
                model=model,
                variant=variant,
                benchmark=group.benchmark or UNKNOWN_BENCHMARK,
                harness=group.harness,
                pass_at_1=group.pass_at_1_mean,
                pass_at_1_std=group.pass_at_1_std or 0.0,
                n_tasks=group.n_tasks,
                n_runs=group.n_runs,
                n_trials=group.n_trials,
                n_infra=infra[key],
                pass_at_k=dict(group.pass_at_k),
                pass_at_1_completed=done.pass_at_1_mean,
                pass_at_1_completed_std=done.pass_at_1_std,
                sources=tuple(sorted(sources[key])),
            )
        )
    return measurements


def records_from_runs(run_files: Sequence[Path]) -> list[TrialRecord]:
    """The trials behind the workflow's ``results/eval/.../run<r>.json`` files."""
    records = []
    for run_file in run_files:
        run = json.loads(Path(run_file).read_text(encoding="utf-8"))
        root = Path(run["trials_dir"])
        records += [read_trial(root / trial["trial"]) for trial in run["trials"]]
    log.info("read %d trial(s) from %d evaluation run file(s)", len(records), len(run_files))
    return records


def records_from_jobs(job_dirs: Sequence[Path], *, strict: bool = True) -> list[TrialRecord]:
    """Every trial of Harbor job folders (ours or Harbor's own)."""
    return read_jobs([Path(p) for p in job_dirs], strict=strict)


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
