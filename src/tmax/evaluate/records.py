"""Trial results as flat records: Harbor job folders and our own runs read alike.

A trial directory holds ``result.json``, Harbor's ``TrialResult`` (harbor 0.25.0 and
0.26.0, ``harbor/models/trial/result.py``). The fields read here:

- ``task_name``, ``trial_name``, ``source`` (the dataset a task came from);
- ``agent_info.name`` (the harness) and ``agent_info.model_info.name`` (the model,
  without its provider prefix);
- ``agent_result``: ``n_input_tokens`` (cache included), ``n_output_tokens`` and
  ``metadata``, where our runner writes a ``tmax`` block (model, benchmark, harness,
  run, domain, exit_status, failure_kind);
- ``verifier_result.rewards``: ``{"reward": x}`` from ``reward.txt``, or any keys
  from ``reward.json``;
- ``exception_info.exception_type``: the exception class name, and its
  ``policy_override.has_valid_reward`` where set (whether the reward still counts);
- ``started_at`` / ``finished_at`` (per-phase timings, ``environment_setup``,
  ``agent_setup``, ``agent_execution``, ``verifier``, are not needed here);
- ``step_results`` (multi-step trials): per-step ``agent_result`` and
  ``exception_info``, used when the trial-level ones are empty, as Harbor does.

A Harbor job folder is ``<job>/config.json`` (the ``JobConfig``), ``<job>/result.json``
(the ``JobResult`` summary: ``n_total_trials``, ``stats``; no trial results) and one
``<job>/<trial>/`` per trial.

Infrastructure failures (section "Evaluation" of the paper reports accuracy over
completed trials) are told apart from wrong answers by ``failure_kind`` in our own
records and by ``data/exception_kinds.yaml`` for Harbor's.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

RESULT_FILE = "result.json"
CONFIG_FILE = "config.json"
EXCEPTION_KINDS_RESOURCE = "evaluate/data/exception_kinds.yaml"

#: ``failure`` of a Harbor trial that recorded no exception and yet has no verifier
#: result (a job run with verification disabled): the agent cannot be blamed.
MISSING_VERIFIER_RESULT = "MissingVerifierResult"

#: ``exit_status`` of a Harbor trial that recorded no exception (Harbor has no exit
#: status of its own; the first recorded exception type stands in for one).
COMPLETED = "completed"

FAILURE_KINDS = ("infra", "agent", None)
"""``failure_kind`` of our runner's trials: ``infra`` (left out of every metric and
retried), ``agent`` (the agent broke its own sandbox: an attempt with reward 0, its
reason in ``exception_info``), or None (the trial ran to its verdict)."""


class RecordError(ValueError):
    """A trial result that cannot be read; the message names the file."""


@dataclass(frozen=True)
class TrialRecord:
    """One attempt of one task by one (model, harness) on one benchmark.

    ``reward`` is None when the trial has no verifier result; ``failure`` is set only
    for an infrastructure failure (the exception type, or our runner's exit status),
    and such a trial is left out of every metric. An agent-caused ending (time,
    turn or token budget, refusal) leaves ``failure`` None and, without a reward,
    scores 0.
    """

    task_name: str
    run: int
    reward: float | None
    failure: str | None
    exit_status: str | None
    model: str
    harness: str
    benchmark: str | None
    domain: str | None
    n_input_tokens: int | None
    n_output_tokens: int | None
    duration_sec: float | None
    path: Path

    @property
    def is_infra_failure(self) -> bool:
        return self.failure is not None

    @property
    def group(self) -> tuple[str, str | None, str]:
        """The (model, benchmark, harness) this trial is a measurement of."""
        return (self.model, self.benchmark, self.harness)


# --- exception kinds -------------------------------------------------------------------


@dataclass(frozen=True)
class ExceptionKinds:
    """Harbor exception class names sorted into ``agent`` and ``infra``."""

    agent: frozenset[str]
    infra: frozenset[str]
    default: str

    def kind(self, exception_type: str) -> str:
        if exception_type in self.agent:
            return "agent"
        if exception_type in self.infra:
            return "infra"
        return self.default


def parse_exception_kinds(data: Any, source: str = EXCEPTION_KINDS_RESOURCE) -> ExceptionKinds:
    """Validate the mapping loaded from ``exception_kinds.yaml``."""
    allowed = {"default", "agent", "infra"}
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a mapping with keys {sorted(allowed)}")
    unknown = set(data) - allowed
    if unknown:
        raise ValueError(f"{source}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    default = data.get("default")
    if default not in ("agent", "infra"):
        raise ValueError(f"{source}: default is {default!r}; allowed: 'agent' or 'infra'")
    names: dict[str, frozenset[str]] = {}
    for key in ("agent", "infra"):
        values = data.get(key) or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{source}: {key} must be a list of exception class names")
        names[key] = frozenset(values)
    both = names["agent"] & names["infra"]
    if both:
        raise ValueError(f"{source}: listed as both agent and infra: {sorted(both)}")
    return ExceptionKinds(agent=names["agent"], infra=names["infra"], default=default)


@cache
def load_exception_kinds() -> ExceptionKinds:
    """The packaged ``data/exception_kinds.yaml``."""
    text = resources.files("tmax").joinpath(EXCEPTION_KINDS_RESOURCE).read_text(encoding="utf-8")
    return parse_exception_kinds(yaml.safe_load(text))


# --- reading one trial -----------------------------------------------------------------


@dataclass(frozen=True)
class _Parsed:
    """A trial as read, before a Harbor attempt is numbered (``record.run`` is then
    a placeholder and ``numbered`` is False)."""

    record: TrialRecord
    numbered: bool
    started_at: datetime | None
    trial_name: str


def _fail(path: Path, problem: str) -> RecordError:
    return RecordError(f"{path}: {problem}")


def _result_path(path: Path) -> Path:
    path = Path(path)
    return path / RESULT_FILE if path.is_dir() else path


def _load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(path, "no such file (the trial did not finish?)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(path, f"cannot be read: {err}") from err
    if not text.strip():
        raise _fail(path, "is empty (the trial did not finish?)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise _fail(path, f"is not valid JSON: {err.msg} at line {err.lineno}") from err


def _is_job_summary(data: Mapping[str, Any]) -> bool:
    """Harbor's JobResult has ``n_total_trials``/``stats`` and no ``trial_name``."""
    return "trial_name" not in data and ("n_total_trials" in data or "stats" in data)


def _mapping(path: Path, data: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, dict):
        raise _fail(path, f"{key} is {type(value).__name__}, expected an object or null")
    return value


def _string(path: Path, data: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(path, f"{key} is {value!r}, expected a non-empty string")
    return value


def _count(path: Path, data: Mapping[str, Any] | None, key: str) -> int | None:
    if data is None or data.get(key) is None:
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(path, f"{key} is {value!r}, expected a non-negative integer or null")
    return value


def _timestamp(path: Path, data: Mapping[str, Any], key: str) -> datetime | None:
    value = data.get(key)
    if value is None:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise _fail(path, f"{key} is {value!r}, expected an ISO 8601 time") from None
    # Harbor writes UTC-aware trial times; treat a naive one as UTC so they compare.
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _reward(path: Path, verifier_result: Mapping[str, Any] | None) -> float | None:
    """``rewards["reward"]``, or the only reward when ``reward.json`` named it otherwise."""
    if verifier_result is None:
        return None
    rewards = _mapping(path, verifier_result, "rewards")
    if not rewards:
        return None
    if "reward" in rewards:
        value = rewards["reward"]
    elif len(rewards) == 1:
        (value,) = rewards.values()
    else:
        raise _fail(
            path, f"verifier_result.rewards has several keys {sorted(rewards)}, none 'reward'"
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(path, f"verifier_result.rewards value {value!r} is not a finite number")
    return float(value)


def _exception_kinds(path: Path, data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(exception type, ``agent`` or ``infra``) of each recorded exception: by its
    ``policy_override.has_valid_reward`` when set (Harbor's ``override_error_policy``;
    our runner writes one too), else by ``data/exception_kinds.yaml``."""
    kinds = load_exception_kinds()
    found = []
    for name, valid in _exceptions(path, data):
        found.append((name, kinds.kind(name) if valid is None else ("agent" if valid else "infra")))
    return found


def _exception_types(path: Path, data: Mapping[str, Any]) -> list[str]:
    return [name for name, _ in _exceptions(path, data)]


def _exceptions(path: Path, data: Mapping[str, Any]) -> list[tuple[str, bool | None]]:
    """(exception type, ``policy_override.has_valid_reward`` or None) of the trial-level
    exception first, then each step's, in order (as Harbor's
    ``TrialResult.recorded_exceptions`` reads them)."""
    infos = [data.get("exception_info")]
    steps = data.get("step_results") or []
    if not isinstance(steps, list):
        raise _fail(path, "step_results is not a list")
    infos += [step.get("exception_info") for step in steps if isinstance(step, dict)]
    found = []
    for info in infos:
        if info is None:
            continue
        if not isinstance(info, dict):
            raise _fail(path, "exception_info is not an object")
        name = _string(path, info, "exception_type", required=True)
        override = info.get("policy_override")
        valid = override.get("has_valid_reward") if isinstance(override, dict) else None
        found.append((name, valid if isinstance(valid, bool) else None))
    return found


def _agent_contexts(path: Path, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trial's ``agent_result``, or each step's when it has none (multi-step)."""
    agent_result = _mapping(path, data, "agent_result")
    if agent_result is not None:
        return [agent_result]
    steps = data.get("step_results") or []
    return [s["agent_result"] for s in steps if isinstance(s, dict) and s.get("agent_result")]


def _token_total(path: Path, contexts: list[dict[str, Any]], key: str) -> int | None:
    counts = [c for c in (_count(path, ctx, key) for ctx in contexts) if c is not None]
    return sum(counts) if counts else None


def _tmax_metadata(path: Path, contexts: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not contexts:
        return None
    metadata = _mapping(path, contexts[0], "metadata")
    if metadata is None or "tmax" not in metadata:
        return None
    tmax = metadata["tmax"]
    if not isinstance(tmax, dict):
        raise _fail(path, "agent_result.metadata.tmax is not an object")
    for key in ("model", "benchmark", "harness"):
        _string(path, tmax, key, required=True)
    run = tmax.get("run")
    if isinstance(run, bool) or not isinstance(run, int) or run < 0:
        raise _fail(path, f"agent_result.metadata.tmax.run is {run!r}, expected an integer ≥ 0")
    if tmax.get("failure_kind") not in FAILURE_KINDS:
        raise _fail(
            path,
            f"agent_result.metadata.tmax.failure_kind is {tmax.get('failure_kind')!r}; "
            "allowed: 'infra', 'agent' or null",
        )
    _string(path, tmax, "domain", required=False)
    _string(path, tmax, "exit_status", required=False)
    return tmax


def _parse_trial(
    path: Path,
    *,
    model: str | None = None,
    harness: str | None = None,
    benchmark: str | None = None,
    job_benchmark: str | None = None,
) -> _Parsed:
    result_path = _result_path(path)
    data = _load_json(result_path)
    if not isinstance(data, dict):
        raise _fail(result_path, f"holds a JSON {type(data).__name__}, expected an object")
    if _is_job_summary(data):
        raise _fail(result_path, "is a Harbor job summary, not a trial result")

    task_name = _string(result_path, data, "task_name", required=True)
    trial_name = _string(result_path, data, "trial_name", required=False) or task_name
    agent_info = _mapping(result_path, data, "agent_info")
    if agent_info is None:
        raise _fail(result_path, "agent_info is missing")
    agent_name = _string(result_path, agent_info, "name", required=True)
    model_info = _mapping(result_path, agent_info, "model_info")
    contexts = _agent_contexts(result_path, data)
    reward = _reward(result_path, _mapping(result_path, data, "verifier_result"))
    exception_types = _exception_types(result_path, data)
    started_at = _timestamp(result_path, data, "started_at")
    finished_at = _timestamp(result_path, data, "finished_at")
    duration = (finished_at - started_at).total_seconds() if started_at and finished_at else None

    tmax = _tmax_metadata(result_path, contexts)
    if tmax is not None:
        # Our runner decided infra vs agent when the trial ended: trust it.
        exit_status = tmax.get("exit_status")
        failure = None
        if tmax.get("failure_kind") == "infra":
            failure = (exception_types[0] if exception_types else None) or exit_status or "infra"
        found_model, found_harness = tmax["model"], tmax["harness"]
        found_benchmark, domain, run = tmax["benchmark"], tmax.get("domain"), tmax["run"]
    else:
        exit_status = exception_types[0] if exception_types else COMPLETED
        failure = next(
            (t for t, kind in _exception_kinds(result_path, data) if kind == "infra"), None
        )
        if failure is None and not exception_types and reward is None:
            failure = MISSING_VERIFIER_RESULT
        found_model = (model_info or {}).get("name") or "unknown"
        found_harness = agent_name
        found_benchmark = _string(result_path, data, "source", required=False) or job_benchmark
        domain, run = None, 0

    record = TrialRecord(
        task_name=task_name,
        run=run,
        reward=reward,
        failure=failure,
        exit_status=exit_status,
        model=model or found_model,
        harness=harness or found_harness,
        benchmark=benchmark or found_benchmark,
        domain=domain,
        n_input_tokens=_token_total(result_path, contexts, "n_input_tokens"),
        n_output_tokens=_token_total(result_path, contexts, "n_output_tokens"),
        duration_sec=duration,
        path=result_path.parent,
    )
    return _Parsed(record, numbered=tmax is not None, started_at=started_at, trial_name=trial_name)


def read_trial(
    path: Path,
    *,
    model: str | None = None,
    harness: str | None = None,
    benchmark: str | None = None,
) -> TrialRecord:
    """Read one trial directory (or its ``result.json``).

    ``model``, ``harness`` and ``benchmark``, when given, replace what the file says.
    A lone Harbor trial without our metadata gets ``run`` 0; :func:`read_job` numbers
    a task's attempts. Raises :class:`RecordError` naming the file on any malformed
    content.
    """
    return _parse_trial(path, model=model, harness=harness, benchmark=benchmark).record


# --- reading job folders ---------------------------------------------------------------


def job_benchmark(job_dir: Path) -> str | None:
    """The dataset of a Harbor job from ``config.json``: ``datasets[0].name``, else the
    folder name of ``datasets[0].path`` (Harbor's ``source`` for a local dataset).
    None without a config or with several datasets (each trial's ``source`` tells)."""
    config_path = Path(job_dir) / CONFIG_FILE
    if not config_path.is_file():
        return None
    config = _load_json(config_path)
    datasets = config.get("datasets") if isinstance(config, dict) else None
    if not isinstance(datasets, list) or len(datasets) != 1 or not isinstance(datasets[0], dict):
        return None
    dataset = datasets[0]
    if dataset.get("name"):
        return str(dataset["name"])
    if dataset.get("path"):
        return Path(str(dataset["path"])).name or None
    return None


def _trial_dirs(job_dir: Path) -> list[Path]:
    # Harbor keeps its task cache in hidden folders (``.sources/``); skip those.
    return sorted(p for p in job_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def _read_parsed_job(
    job_dir: Path,
    *,
    model: str | None,
    harness: str | None,
    benchmark: str | None,
    strict: bool,
) -> list[_Parsed]:
    job_dir = Path(job_dir)
    if not job_dir.is_dir():
        raise RecordError(f"{job_dir}: not a directory")
    summary_path = job_dir / RESULT_FILE
    summary: Any = None
    found_benchmark = None
    try:
        # The job summary is only checked for what it is; its numbers are recomputed.
        summary = _load_json(summary_path) if summary_path.is_file() else None
        found_benchmark = job_benchmark(job_dir)
    except RecordError as err:
        if strict:
            raise
        logger.warning("ignoring the job files of %s: %s", job_dir, err)
    if isinstance(summary, dict) and not _is_job_summary(summary):
        raise RecordError(f"{job_dir}: is a trial directory, not a job folder (use read_trial)")
    parsed: list[_Parsed] = []
    for trial_dir in _trial_dirs(job_dir):
        try:
            parsed.append(
                _parse_trial(
                    trial_dir,
                    model=model,
                    harness=harness,
                    benchmark=benchmark,
                    job_benchmark=found_benchmark,
                )
            )
        except RecordError as err:
            if strict:
                raise
            logger.warning("skipping unreadable trial %s: %s", trial_dir, err)
    return parsed


def _number_attempts(parsed: Iterable[_Parsed]) -> list[TrialRecord]:
    """Give each Harbor trial without our metadata its ``run``: the ordinal of its
    attempt at that task (0, 1, 2, …) within its (model, benchmark, harness), by
    ``started_at`` and then trial name."""
    attempts: dict[tuple[Any, ...], list[_Parsed]] = defaultdict(list)
    records: list[TrialRecord] = []
    for item in parsed:
        if item.numbered:
            records.append(item.record)
        else:
            attempts[(*item.record.group, item.record.task_name)].append(item)
    never = datetime.max.replace(tzinfo=UTC)
    for items in attempts.values():
        items.sort(key=lambda p: (p.started_at or never, p.trial_name))
        records += [replace(item.record, run=ordinal) for ordinal, item in enumerate(items)]
    return sorted(records, key=lambda r: (str(r.path), r.run))


def read_job(
    job_dir: Path,
    *,
    model: str | None = None,
    harness: str | None = None,
    benchmark: str | None = None,
    strict: bool = True,
) -> list[TrialRecord]:
    """Every trial under a job folder (``job_dir/<trial>/result.json``).

    Works on Harbor's job folders and on our runner's. For a Harbor trial without our
    metadata: ``harness`` = ``agent_info.name``, ``model`` =
    ``agent_info.model_info.name``, ``benchmark`` = the trial's ``source`` or the
    job's dataset (:func:`job_benchmark`), and ``run`` = the attempt ordinal of its
    task by ``started_at``. Arguments given here replace those values. With
    ``strict`` an unreadable trial raises :class:`RecordError`; otherwise it is logged
    as a warning with its path and skipped.
    """
    return read_jobs([job_dir], model=model, harness=harness, benchmark=benchmark, strict=strict)


def read_jobs(
    job_dirs: Iterable[Path],
    *,
    model: str | None = None,
    harness: str | None = None,
    benchmark: str | None = None,
    strict: bool = True,
) -> list[TrialRecord]:
    """:func:`read_job` over several folders. Harbor attempts are numbered across all
    of them, so three one-attempt jobs of the same setting give runs 0, 1 and 2."""
    parsed: list[_Parsed] = []
    job_dirs = list(job_dirs)
    for job_dir in job_dirs:
        parsed += _read_parsed_job(
            Path(job_dir), model=model, harness=harness, benchmark=benchmark, strict=strict
        )
    records = _number_attempts(parsed)
    n_infra = sum(r.is_infra_failure for r in records)
    logger.info(
        "read %d trials (%d infrastructure failures) from %d job folder(s)",
        len(records),
        n_infra,
        len(job_dirs),
    )
    return records
