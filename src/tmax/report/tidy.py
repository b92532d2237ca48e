"""Tidy results for pandas: one row per trial, one row per RL step.

``results/report/evaluations.parquet`` holds every trial the tables are computed
from (:data:`EVALUATIONS`), ``results/report/training.parquet`` every step of every
RL run the training curves plot (:data:`TRAINING`)::

    import pandas as pd
    trials = pd.read_parquet("results/report/evaluations.parquet")
    steps = pd.read_parquet("results/report/training.parquet")

Each file has a fixed, typed schema (an empty table keeps it) and is written
atomically. A value a trial or step did not record is null, never 0.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.progress import track

from tmax.evaluate.records import RESULT_FILE, TrialRecord
from tmax.io import atomic_path
from tmax.report.ingest import UNKNOWN_BENCHMARK, split_variant

log = logging.getLogger("tmax.report")

EVALUATIONS = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),  # the base model (qwen3.5-9b)
        pa.field("variant", pa.string(), nullable=False),  # base, sft, control or tmax
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("harness", pa.string(), nullable=False),
        pa.field("run", pa.int64(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("domain", pa.string()),
        pa.field("reward", pa.float64()),  # null: no verifier result
        pa.field("infra_error", pa.bool_(), nullable=False),
        pa.field("failure", pa.string()),  # what made it an infrastructure error
        pa.field("exit_status", pa.string()),
        pa.field("exception_type", pa.string()),  # the first recorded, agent's or infra
        pa.field("n_input_tokens", pa.int64()),
        pa.field("n_output_tokens", pa.int64()),
        pa.field("turns", pa.int64()),
        pa.field("tool_calls", pa.int64()),
        pa.field("format_errors", pa.int64()),
        pa.field("duration_sec", pa.float64()),
        pa.field("environment_setup_sec", pa.float64()),
        pa.field("agent_setup_sec", pa.float64()),
        pa.field("agent_execution_sec", pa.float64()),
        pa.field("verifier_sec", pa.float64()),
        pa.field("agent_time_sec", pa.float64()),
        pa.field("sandbox_time_sec", pa.float64()),
        pa.field("model_time_sec", pa.float64()),
        pa.field("trial_dir", pa.string(), nullable=False),
    ]
)
"""One row per trial. ``turns`` to ``format_errors`` and the ``*_time_sec`` figures
are our runner's (null for Harbor's own trials); the ``*_sec`` phases are Harbor's
timing records, which both write."""

HARBOR_PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
RUNNER_COUNTS = ("turns", "tool_calls", "format_errors")
RUNNER_TIMES = ("agent_time_sec", "sandbox_time_sec", "model_time_sec")

RL_VARIANT = "tmax"
"""An RL curve is the training of a model's ``tmax`` variant."""

_STEP_INTEGERS = (
    "step",
    "episodes_start_policy",
    "groups_collected",
    "groups_trained",
    "groups_dropped_stale",
    "episodes_failed",
    "staleness_max",
    "response_tokens",
    "sequence_tokens",
    "policy_version",
)
_STEP_NUMBERS = (
    "reward_mean",
    "reward_trained_mean",
    "reward_start_policy_mean",
    "zero_std_fraction",
    "staleness_mean",
    "response_tokens_mean",
    "tool_calls_mean",
    "loss",
    "entropy",
    "masked_fraction",
    "clip_fraction",
    "logp_diff_mean",
    "logp_diff_max",
    "ratio_mean",
    "grad_norm",
    "lr",
    "step_time_sec",
)
TRAINING = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("variant", pa.string(), nullable=False),
        pa.field("rl_loss", pa.string()),  # dppo or grpo (rl.loss)
        pa.field("group_size", pa.int64()),
        *[pa.field(key, pa.int64(), nullable=key != "step") for key in _STEP_INTEGERS],
        *[pa.field(key, pa.float64()) for key in _STEP_NUMBERS],
    ]
)
"""One row per RL step and model: the trainer's per-step figures (``metrics.jsonl``,
as ``results/rl/<model>/curve.json`` holds them; a figure a step did not record, e.g.
``clip_fraction`` under DPPO, is null). A figure the trainer adds later is kept too, as
a float column after these."""


# --- evaluations.parquet ---------------------------------------------------------------


def _integer(value: Any) -> int | None:
    """A count as recorded, or None when it is absent or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _phase_seconds(timing: Any) -> float | None:
    """Length of a Harbor ``{started_at, finished_at}`` timing record."""
    if not isinstance(timing, dict):
        return None
    try:
        started = datetime.fromisoformat(timing["started_at"])
        finished = datetime.fromisoformat(timing["finished_at"])
        return (finished - started).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def trial_details(trial_dir: Path) -> dict[str, Any]:
    """What a trial's ``result.json`` holds beyond its :class:`TrialRecord`: the first
    recorded exception, Harbor's phase timings, our runner's counts and times.

    The record was read and checked from the same file already, so this is lenient:
    a field that is absent or of another type is None.
    """
    try:
        data = json.loads((Path(trial_dir) / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        data = {}
    steps = data.get("step_results") if isinstance(data.get("step_results"), list) else []
    # the trial's own exception first, then each step's (as Harbor lists them)
    infos = [data.get("exception_info")] + [
        s.get("exception_info") for s in steps if isinstance(s, dict)
    ]
    exception = next((i.get("exception_type") for i in infos if isinstance(i, dict)), None)
    agent_result = data.get("agent_result")
    metadata = agent_result.get("metadata") if isinstance(agent_result, dict) else None
    runner = metadata.get("tmax") if isinstance(metadata, dict) else None
    runner = runner if isinstance(runner, dict) else {}
    return {
        "exception_type": exception if isinstance(exception, str) else None,
        **{key: _integer(runner.get(key)) for key in RUNNER_COUNTS},
        **{f"{phase}_sec": _phase_seconds(data.get(phase)) for phase in HARBOR_PHASES},
        **{key: _number(runner.get(key)) for key in RUNNER_TIMES},
    }


def evaluation_rows(records: Sequence[TrialRecord]) -> list[dict[str, Any]]:
    """One :data:`EVALUATIONS` row per trial, in the order of ``records``."""
    rows = []
    # each trial's result.json is read once more, for what its record leaves out
    for record in track(records, description="tidying trials", disable=len(records) < 500):
        model, variant = split_variant(record.model)
        rows.append(
            {
                "model": model,
                "variant": variant,
                "benchmark": record.benchmark or UNKNOWN_BENCHMARK,  # as the tables say
                "harness": record.harness,
                "run": record.run,
                "task": record.task_name,
                "domain": record.domain,
                "reward": record.reward,
                "infra_error": record.is_infra_failure,
                "failure": record.failure,
                "exit_status": record.exit_status,
                "n_input_tokens": record.n_input_tokens,
                "n_output_tokens": record.n_output_tokens,
                "duration_sec": record.duration_sec,
                "trial_dir": str(record.path),
                **trial_details(record.path),
            }
        )
    return rows


# --- training.parquet ------------------------------------------------------------------


def _step_integer(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where} is {value!r}, expected a whole number or null")
    return value


def _step_number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} is {value!r}, expected a number or null")
    return float(value)


def training_rows(
    curves: Mapping[str, Sequence[Mapping[str, Any]]],
    rl_settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One :data:`TRAINING` row per step of each model's curve (``curves``: model ->
    per-step figures), with its ``rl_settings`` (model -> loss, group_size); and the
    names of the figures beyond the schema, each a float column."""
    rl_settings = rl_settings or {}
    known = set(TRAINING.names)
    extra = sorted({key for curve in curves.values() for row in curve for key in row} - known)
    rows = []
    for model, curve in curves.items():
        setting = rl_settings.get(model, {})
        for figures in curve:
            where = f"{model} step {figures.get('step')!r}"
            row: dict[str, Any] = {
                "model": model,
                "variant": RL_VARIANT,
                "rl_loss": setting.get("loss"),
                "group_size": _step_integer(setting.get("group_size"), f"{model} group_size"),
            }
            for key in _STEP_INTEGERS:
                row[key] = _step_integer(figures.get(key), f"{where}: {key}")
            for key in (*_STEP_NUMBERS, *extra):
                row[key] = _step_number(figures.get(key), f"{where}: {key}")
            if row["step"] is None:
                raise ValueError(f"{model}: a step of its curve has no step number")
            rows.append(row)
    return rows, extra


# --- writing ---------------------------------------------------------------------------


def write_parquet(path: Path, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Path:
    """``rows`` as a Parquet file of ``schema``, written atomically (no rows: the
    schema alone)."""
    table = pa.Table.from_pylist(list(rows), schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return Path(path)


def write_evaluations(path: Path, records: Sequence[TrialRecord]) -> Path:
    """``evaluations.parquet``: one row per trial (:data:`EVALUATIONS`)."""
    rows = evaluation_rows(records)
    log.info("%d trial(s) -> %s", len(rows), path)
    return write_parquet(path, rows, EVALUATIONS)


def write_training(
    path: Path,
    curves: Mapping[str, Sequence[Mapping[str, Any]]],
    rl_settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """``training.parquet``: one row per RL step and model (:data:`TRAINING`)."""
    rows, extra = training_rows(curves, rl_settings)
    schema = TRAINING
    for key in extra:
        schema = schema.append(pa.field(key, pa.float64()))
    log.info("%d RL step(s) of %d model(s) -> %s", len(rows), len(curves), path)
    return write_parquet(path, rows, schema)
