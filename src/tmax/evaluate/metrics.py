"""Evaluation metrics: pass@1 as mean ± std over runs, pass@k, and their breakdowns.

The paper reports each (model, benchmark, harness) as pass@1 averaged over
independent runs, "mean ± std" in percent (e.g. 57.2 ± 2.5), and pass@k with the
unbiased estimator of Chen et al. (2021).

Two statistics conventions, chosen by one switch (``report.statistics`` in the
config, ``--statistics`` on ``tmax eval metrics`` and ``tmax report tables``):

- ``paper`` (the default of every entry point): as the paper's release computes its
  numbers (``scripts/compute_stats.py`` in hamishivi/tmax). A trial that ended in an
  infrastructure failure (``TrialRecord.failure`` set: the sandbox did not start, the
  model endpoint failed after retries, the verifier produced no reward) scores 0 like
  a wrong answer. Run i is each task's i-th attempt (:func:`number_attempts`), run i's
  accuracy is the mean over the tasks that have an i-th attempt, and the ± is the
  population standard deviation (ddof = 0) of the run accuracies. The ± therefore
  depends on the order in which a task's attempts are counted: our runs count them by
  run number; Harbor's own job folders by their listing, by trial folder name
  (:func:`runs_in_listing_order`).
- ``exclude_infra``: an infrastructure failure is treated as if the attempt had never
  been made: left out of both the numerator and the denominator, and counted
  separately; runs are taken as recorded; the ± is the sample standard deviation
  (ddof = 1), the spread one would expect of another run.

Under both, agent-caused endings (turn, time or token budget, refusal, a wrong answer)
are valid attempts, scored by their reward, or 0 when they have none, and
infrastructure failures are counted on the side. (Harbor's own ``pass_at_k`` in a
job's result.json scores every trial, errored ones as 0.)
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import fmean, pstdev, stdev
from typing import Any

from tmax.evaluate.records import TrialRecord, read_jobs, read_trial
from tmax.io import write_json, write_text

#: A trial *succeeds* (for pass@k and per-task counts) when its reward reaches this.
#: Rewards are binary in practice (Harbor's reward.txt is 0 or 1), so this is
#: "all tests passed"; a partial-credit reward below 1 is not a success.
SUCCESS_REWARD = 1.0

DEFAULT_KS = (1, 2, 4, 8)

STATISTICS = ("paper", "exclude_infra")
"""The statistics conventions (module docstring); one switch chooses between them."""
DEFAULT_STATISTICS = "paper"
"""The convention of every entry point (``tmax eval metrics``, ``tmax report tables``,
the workflow's metrics and report rules) unless told otherwise."""
LEGACY_STATISTICS = "exclude_infra"
"""What :func:`summarize` and :func:`pass_at_1` do when a caller names no convention
(the callers that predate the switch, e.g. the prior datasets' difficulty)."""

STATISTICS_NOTES = {
    "paper": (
        "statistics: paper (as the TMAX release computes them): infrastructure failures "
        "score 0; run i = each task's i-th attempt; ± = population std (ddof 0) over runs, "
        "so it depends on the attempt order (our runs: by run number; Harbor jobs: by "
        "trial folder name)."
    ),
    "exclude_infra": (
        "statistics: exclude_infra: infrastructure failures are left out of numerator "
        "and denominator; runs as recorded; ± = sample std (ddof 1) over runs."
    ),
}
"""One line per convention, for every output that reports a pass@1."""


def check_statistics(value: str) -> str:
    """``value`` if it names a convention; otherwise a ValueError naming the choices."""
    if value not in STATISTICS:
        raise ValueError(
            f"statistics is {value!r}; allowed: {', '.join(repr(s) for s in STATISTICS)}"
        )
    return value


Group = tuple[str, str | None, str]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` attempts drawn without replacement
    from ``n`` attempts, ``c`` of them correct, is correct:

        pass@k = 1 − C(n−c, k) / C(n, k)

    computed as the product 1 − ∏_{i=n−c+1}^{n} (1 − k/i) (Chen et al., 2021,
    "Evaluating Large Language Models Trained on Code"), which never forms the large
    binomials. It is 1 when n − c < k (every draw of k holds a correct attempt) and
    0 when c = 0. Requires 0 ≤ c ≤ n and 1 ≤ k ≤ n.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an integer, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 ≤ c ≤ n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 ≤ k ≤ n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(counts: Mapping[str, tuple[int, int]], k: int) -> float:
    """pass@k averaged over tasks: (1/|T|) Σ_t pass@k(n_t, c_t), where ``counts``
    maps each task t to (n_t attempts, c_t correct). Every task needs n_t ≥ k."""
    if not counts:
        raise ValueError("no tasks to average pass@k over")
    return sum(pass_at_k(n, c, k) for n, c in counts.values()) / len(counts)


def _effective_reward(record: TrialRecord) -> float:
    """A valid trial's score: its reward, or 0 when the agent ended without one."""
    return 0.0 if record.reward is None else record.reward


def _check_one_group(records: Sequence[TrialRecord]) -> None:
    groups = {r.group for r in records}
    if len(groups) > 1:
        raise ValueError(
            f"records mix {len(groups)} (model, benchmark, harness) settings "
            f"{sorted(groups, key=_group_sort_key)}; use summarize() or filter first"
        )
    seen: set[tuple[str, int]] = set()
    paths: set[Path] = set()
    for record in records:
        key = (record.task_name, record.run)
        if key in seen:
            raise ValueError(
                f"task {record.task_name!r} appears twice in run {record.run} "
                f"(again at {record.path}); was a job read twice?"
            )
        if record.path in paths:
            raise ValueError(f"trial {record.path} appears twice; was a job read twice?")
        seen.add(key)
        paths.add(record.path)


def per_run_accuracy(records: Iterable[TrialRecord]) -> dict[int, float]:
    """For each run r, the mean reward over the tasks attempted in r, infrastructure
    failures left out of numerator and denominator:

        acc_r = Σ_{t valid in r} reward_{t,r} / |{t valid in r}|

    The reward is used as is (no threshold); rewards are 0/1 in practice, making this
    the fraction solved. A run whose trials all failed for infrastructure reasons has
    no accuracy and is absent; see :func:`per_run_infra_failures` for those counts.
    Records must come from one (model, benchmark, harness).
    """
    records = list(records)
    _check_one_group(records)
    rewards: dict[int, list[float]] = defaultdict(list)
    for record in records:
        if not record.is_infra_failure:
            rewards[record.run].append(_effective_reward(record))
    return {run: sum(values) / len(values) for run, values in sorted(rewards.items())}


def infra_as_failures(records: Iterable[TrialRecord]) -> list[TrialRecord]:
    """Each infrastructure failure becomes a valid attempt with reward 0 (the paper's
    convention); its ``exit_status`` still says what happened."""
    return [replace(r, failure=None, reward=0.0) if r.is_infra_failure else r for r in records]


def number_attempts(records: Iterable[TrialRecord]) -> list[TrialRecord]:
    """The paper's runs: run i of a task is its i-th attempt, i = 0, 1, …, per
    (model, benchmark, harness, task), attempts taken in order of their recorded run
    and then of their trial folder's path. A task attempted fewer times than the
    others is then in the first runs only (``compute_stats`` averages run i over the
    tasks that have an i-th attempt); with one attempt per task and run, as our
    runner writes them, nothing changes."""
    attempts: dict[tuple[Any, ...], list[TrialRecord]] = defaultdict(list)
    for record in records:
        attempts[(*record.group, record.task_name)].append(record)
    numbered: list[TrialRecord] = []
    for items in attempts.values():
        items.sort(key=lambda r: (r.run, r.path.parts))
        numbered += [replace(r, run=ordinal) for ordinal, r in enumerate(items)]
    return numbered


def runs_in_listing_order(records: Iterable[TrialRecord]) -> list[TrialRecord]:
    """Harbor's own trials put back in the order the paper's ``compute_stats`` reads
    them: the job folder's listing (here: job folder path, then trial folder name,
    sorted; ``os.listdir`` itself promises no order). :mod:`~tmax.evaluate.records`
    numbers such attempts by start time instead; this starts again from the run each
    trial's result.json records (none, read as 0, for Harbor's; the explicit run for
    our runner's), so :func:`number_attempts` orders Harbor's attempts by folder and
    ours by run number."""
    return number_attempts(replace(r, run=read_trial(r.path).run) for r in records)


def read_job_records(
    job_dirs: Sequence[Path],
    *,
    statistics: str = DEFAULT_STATISTICS,
    benchmark: str | None = None,
    strict: bool = True,
) -> list[TrialRecord]:
    """Every trial of Harbor job folders (ours or Harbor's own), runs numbered as
    ``statistics`` numbers them: for ``paper``, Harbor's attempts in listing order
    (:func:`runs_in_listing_order`); for ``exclude_infra``, by start time."""
    records = read_jobs([Path(p) for p in job_dirs], benchmark=benchmark, strict=strict)
    if check_statistics(statistics) == "paper":
        records = runs_in_listing_order(records)
    return records


def records_from_run_files(run_files: Sequence[Path]) -> list[TrialRecord]:
    """The trials behind the workflow's ``results/eval/.../run<r>.json`` files (each
    names its folder of trial directories and the trials of that run), labelled with
    the run's model, benchmark, harness and number where it names them (a Harbor
    agent's trials name Harbor's agent, the served model and a dataset folder)."""
    records = []
    for run_file in run_files:
        run = json.loads(Path(run_file).read_text(encoding="utf-8"))
        root = Path(run["trials_dir"])
        # (a run file written by hand or by another stage may name none of them)
        labels = {key: run[key] for key in ("model", "benchmark", "harness") if run.get(key)}
        for trial in run["trials"]:
            record = read_trial(root / trial["trial"], **labels)
            records.append(record if run.get("run") is None else replace(record, run=run["run"]))
    return records


def per_run_infra_failures(records: Iterable[TrialRecord]) -> dict[int, int]:
    """Number of infrastructure failures in each run (runs without any included)."""
    counts: dict[int, int] = {}
    for record in records:
        counts[record.run] = counts.get(record.run, 0) + int(record.is_infra_failure)
    return dict(sorted(counts.items()))


def _mean_std(values: Sequence[float], statistics_: str) -> tuple[float, float]:
    """Mean and std of run accuracies: population std (ddof 0) for ``paper``, sample
    std (ddof 1) for ``exclude_infra``; one run has std 0 under both."""
    if len(values) < 2:
        return fmean(values), 0.0
    spread = pstdev if statistics_ == "paper" else stdev
    return fmean(values), spread(values)


def scored_records(records: Iterable[TrialRecord], statistics_: str) -> list[TrialRecord]:
    """The trials a convention scores, runs numbered as it numbers them: for
    ``paper`` infrastructure failures become 0-reward attempts and runs are attempt
    ordinals (:func:`number_attempts`); for ``exclude_infra`` the records as they are
    (:func:`per_run_accuracy` leaves the failures out)."""
    if check_statistics(statistics_) == "paper":
        return infra_as_failures(number_attempts(records))
    return list(records)


def pass_at_1(
    records: Iterable[TrialRecord], statistics: str = LEGACY_STATISTICS
) -> tuple[float, float, int]:
    """pass@1 as the paper reports it, in percent: (mean, std, n_runs) over runs of
    :func:`per_run_accuracy`, with R runs,

        mean = 100 · (1/R) Σ_r acc_r
        paper:          std = 100 · sqrt( Σ_r (acc_r − mean)² / R )
        exclude_infra:  std = 100 · sqrt( Σ_r (acc_r − mean)² / (R − 1) )

    ``paper`` scores infrastructure failures 0 and takes run r as each task's r-th
    attempt; ``exclude_infra`` leaves them out (R then counts the runs with at least
    one valid trial) and gives the sample std, the spread one would expect of another
    run. With a single run the std is 0.
    """
    records = list(records)
    _check_one_group(records)
    accuracies = list(per_run_accuracy(scored_records(records, statistics)).values())
    if not accuracies:
        raise ValueError("no trial without an infrastructure failure: pass@1 is undefined")
    mean, std = _mean_std(accuracies, statistics)
    return 100.0 * mean, 100.0 * std, len(accuracies)


def task_counts(records: Iterable[TrialRecord]) -> dict[str, tuple[int, int]]:
    """task → (valid attempts n, successes c), infrastructure failures left out; a
    success is a reward ≥ :data:`SUCCESS_REWARD`. Tasks with no valid attempt are
    absent."""
    counts: dict[str, list[int]] = {}
    for record in records:
        if record.is_infra_failure:
            continue
        n_c = counts.setdefault(record.task_name, [0, 0])
        n_c[0] += 1
        n_c[1] += int(_effective_reward(record) >= SUCCESS_REWARD)
    return {task: (n, c) for task, (n, c) in sorted(counts.items())}


# --- paired comparison -----------------------------------------------------------------

MIN_PAIRED_TASKS = 5
"""Fewer tasks scored by both models than this, and no difference is called resolved."""


@dataclass(frozen=True)
class PairedDifference:
    """pass@1 of model A minus model B, in points, on the tasks both were scored on.

    Each task's success rate over its attempts is taken for each model, and ``mean`` is
    the mean over tasks of A's rate minus B's. ``low``/``high`` bound it at ``level``
    by a paired bootstrap over those tasks (tasks drawn with replacement, both models'
    rates of a task kept together), so it carries the noise of which tasks were drawn
    and of each task's few attempts. Two samplings of one model differ by several
    points on a few dozen tasks: a gap whose interval holds 0 is not a difference.
    """

    n_tasks: int
    mean: float
    low: float
    high: float
    level: float

    @property
    def verdict(self) -> str:
        """``ahead`` (A above B: the interval above 0), ``behind`` (below 0),
        ``unresolved`` (it holds 0) or ``too_few_tasks``."""
        if self.n_tasks < MIN_PAIRED_TASKS:
            return "too_few_tasks"
        if self.low > 0:
            return "ahead"
        if self.high < 0:
            return "behind"
        return "unresolved"

    def describe(self) -> str:
        """``+15.0 points (95% CI +5.0 to +25.0, 10 paired tasks)``."""
        return (
            f"{self.mean:+.1f} points ({100 * self.level:.0f}% CI {self.low:+.1f} to "
            f"{self.high:+.1f}, {self.n_tasks} paired tasks)"
        )


def paired_difference(
    a: Mapping[str, tuple[int, int]],
    b: Mapping[str, tuple[int, int]],
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> PairedDifference | None:
    """A minus B (:class:`PairedDifference`) from each model's task → (successes,
    scored attempts), as :func:`task_counts` or ``GroupSummary.per_task`` give them.
    Only tasks both scored are compared; None when there is none. The bootstrap is
    seeded, so one set of trials always gives the same interval."""
    import numpy as np

    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    shared = sorted(task for task in a.keys() & b.keys() if a[task][1] > 0 and b[task][1] > 0)
    if not shared:
        return None
    gaps = np.array([a[t][0] / a[t][1] - b[t][0] / b[t][1] for t in shared]) * 100.0
    draws = np.random.default_rng(seed).integers(0, len(shared), size=(resamples, len(shared)))
    means = gaps[draws].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return PairedDifference(len(shared), float(gaps.mean()), float(low), float(high), level)


# --- summaries -------------------------------------------------------------------------


def _group_sort_key(group: Group) -> tuple[str, str, str]:
    model, benchmark, harness = group
    return (model, benchmark or "", harness)


def _str_keys(values: Mapping[int, Any]) -> dict[str, Any]:
    return {str(key): value for key, value in values.items()}


@dataclass(frozen=True)
class GroupSummary:
    """The metrics of one (model, benchmark, harness). Rates are in percent.

    - ``statistics``: the convention (``paper`` or ``exclude_infra``) of every number.
    - ``n_tasks``: distinct tasks seen (an all-infra-failed task included);
      ``n_runs``: runs with a scored trial; ``n_trials``: all trials.
    - ``pass_at_1_mean``/``_std``: :func:`pass_at_1` (None if nothing is scored).
    - ``per_run``: run → accuracy (percent, None if nothing scored), trials scored
      (``n_valid``: under ``paper`` infrastructure failures included, as 0s) and
      infrastructure failures. Under ``paper`` a run is an attempt ordinal.
    - ``pass_at_k``: k → mean pass@k over the tasks with at least k scored attempts;
      ``pass_at_k_tasks``: k → how many tasks that was (fewer than ``n_tasks`` when
      infrastructure failures left some task short). A k no task reaches is absent.
    - ``infra_failures``: failure kind → count; ``exit_statuses``: exit status → count
      over all trials ("unrecorded" for none).
    - ``per_task``: task → successes, scored attempts, infrastructure failures.
    - ``per_domain``: domain → pass@1 mean and std over runs and number of tasks,
      from the records that carry a domain (Harbor's own trials carry none).
    - ``mean_input_tokens``/``mean_output_tokens``: over valid trials reporting them
      (infra failures are cut short and would pull the mean down).
    """

    model: str
    benchmark: str | None
    harness: str
    statistics: str
    n_tasks: int
    n_runs: int
    n_trials: int
    pass_at_1_mean: float | None
    pass_at_1_std: float | None
    per_run: dict[int, dict[str, Any]]
    pass_at_k: dict[int, float]
    pass_at_k_tasks: dict[int, int]
    n_infra_failures: int
    infra_failures: dict[str, int]
    exit_statuses: dict[str, int]
    per_task: dict[str, dict[str, int]]
    per_domain: dict[str, dict[str, Any]]
    mean_input_tokens: float | None
    mean_output_tokens: float | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy (integer keys become strings)."""
        data = asdict(self)
        for key in ("per_run", "pass_at_k", "pass_at_k_tasks"):
            data[key] = _str_keys(data[key])
        return data


@dataclass(frozen=True)
class Summary:
    """One :class:`GroupSummary` per (model, benchmark, harness), sorted."""

    groups: list[GroupSummary] = field(default_factory=list)
    statistics: str = LEGACY_STATISTICS

    def get(self, model: str, benchmark: str | None, harness: str) -> GroupSummary:
        for group in self.groups:
            if (group.model, group.benchmark, group.harness) == (model, benchmark, harness):
                return group
        raise KeyError((model, benchmark, harness))

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistics": self.statistics,
            "statistics_note": STATISTICS_NOTES[self.statistics],
            "groups": [group.to_dict() for group in self.groups],
        }

    def to_markdown(self) -> str:
        """A compact table: one row per setting, pass@1 as "mean ± std" over runs and
        pass@k for k ≥ 2 (the k = 1 estimate stays in :meth:`to_dict`), then a note
        line naming the statistics convention."""
        ks = sorted({k for group in self.groups for k in group.pass_at_k if k > 1})
        header = ["model", "benchmark", "harness", "tasks", "runs", "pass@1"]
        header += [f"pass@{k}" for k in ks] + ["trials", "infra"]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        partial = False
        for group in self.groups:
            if group.pass_at_1_mean is None:
                pass_1 = "–"
            else:
                pass_1 = f"{group.pass_at_1_mean:.1f} ± {group.pass_at_1_std:.1f}"
            cells = [
                group.model,
                group.benchmark or "–",
                group.harness,
                str(group.n_tasks),
                str(group.n_runs),
                pass_1,
            ]
            for k in ks:
                if k not in group.pass_at_k:
                    cells.append("–")
                    continue
                short = group.pass_at_k_tasks[k] < group.n_tasks
                partial |= short
                cells.append(f"{group.pass_at_k[k]:.1f}" + ("*" if short else ""))
            cells += [str(group.n_trials), str(group.n_infra_failures)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        if partial:
            lines.append("\\* over the tasks with at least k scored attempts only.")
        lines.append(STATISTICS_NOTES[self.statistics])
        return "\n".join(lines) + "\n"


def _mean_of(values: Iterable[int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def _summarize_group(
    group: Group, records: list[TrialRecord], ks: Sequence[int], statistics_: str
) -> GroupSummary:
    _check_one_group(records)
    # Every number below comes from the scored trials (runs numbered as the convention
    # numbers them); the failure counts, statuses and tokens from the trials as read.
    numbered = number_attempts(records) if statistics_ == "paper" else records
    scored = scored_records(records, statistics_)
    accuracies = per_run_accuracy(scored)
    infra_per_run = per_run_infra_failures(numbered)
    per_run = {
        run: {
            "accuracy": 100.0 * accuracies[run] if run in accuracies else None,
            "n_valid": sum(1 for r in scored if r.run == run and not r.is_infra_failure),
            "n_infra_failures": infra_per_run[run],
        }
        for run in sorted({r.run for r in scored})
    }
    if accuracies:
        mean, std, n_runs = pass_at_1(records, statistics_)
    else:
        mean, std, n_runs = None, None, 0

    counts = task_counts(scored)
    pass_k: dict[int, float] = {}
    pass_k_tasks: dict[int, int] = {}
    for k in sorted(set(ks)):
        eligible = {task: nc for task, nc in counts.items() if nc[0] >= k}
        if eligible:
            pass_k[k] = 100.0 * mean_pass_at_k(eligible, k)
            pass_k_tasks[k] = len(eligible)

    infra_by_task = Counter(r.task_name for r in records if r.is_infra_failure)
    per_task = {
        task: {
            "successes": counts.get(task, (0, 0))[1],
            "attempts": counts.get(task, (0, 0))[0],
            "infra_failures": infra_by_task[task],
        }
        for task in sorted({r.task_name for r in records})
    }

    per_domain: dict[str, dict[str, Any]] = {}
    for domain in sorted({r.domain for r in records if r.domain is not None}):
        in_domain = [r for r in scored if r.domain == domain]
        domain_acc = list(per_run_accuracy(in_domain).values())
        domain_mean, domain_std = _mean_std(domain_acc, statistics_) if domain_acc else (None, None)
        per_domain[domain] = {
            "mean": None if domain_mean is None else 100.0 * domain_mean,
            "std": None if domain_std is None else 100.0 * domain_std,
            "n_tasks": len({r.task_name for r in in_domain}),
        }

    model, benchmark, harness = group
    return GroupSummary(
        model=model,
        benchmark=benchmark,
        harness=harness,
        statistics=statistics_,
        n_tasks=len(per_task),
        n_runs=n_runs,
        n_trials=len(records),
        pass_at_1_mean=mean,
        pass_at_1_std=std,
        per_run=per_run,
        pass_at_k=pass_k,
        pass_at_k_tasks=pass_k_tasks,
        n_infra_failures=sum(1 for r in records if r.is_infra_failure),
        infra_failures=dict(sorted(Counter(r.failure for r in records if r.failure).items())),
        exit_statuses=dict(sorted(Counter(r.exit_status or "unrecorded" for r in records).items())),
        per_task=per_task,
        per_domain=per_domain,
        # Over trials that were not infrastructure failures (those are cut short).
        mean_input_tokens=_mean_of(r.n_input_tokens for r in records if not r.is_infra_failure),
        mean_output_tokens=_mean_of(r.n_output_tokens for r in records if not r.is_infra_failure),
    )


def summarize(
    records: Iterable[TrialRecord],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    statistics: str = LEGACY_STATISTICS,
) -> Summary:
    """Group ``records`` by (model, benchmark, harness) and compute each group's
    :class:`GroupSummary` under the ``statistics`` convention (``paper`` or
    ``exclude_infra``, module docstring): pass@1 mean ± std over runs, pass@k for each
    k in ``ks`` (over the tasks with at least k scored attempts), infrastructure
    failures by kind, exit statuses, per-task and per-domain breakdowns and mean token
    counts. Entry points pass the configured convention (:data:`DEFAULT_STATISTICS`
    unless told otherwise); the default here is :data:`LEGACY_STATISTICS`."""
    check_statistics(statistics)
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {list(ks)}")
    by_group: dict[Group, list[TrialRecord]] = defaultdict(list)
    for record in records:
        by_group[record.group].append(record)
    return Summary(
        [
            _summarize_group(group, by_group[group], ks, statistics)
            for group in sorted(by_group, key=_group_sort_key)
        ],
        statistics,
    )


def write_metrics(
    records: Sequence[TrialRecord],
    output_json: Path,
    output_md: Path,
    *,
    statistics: str = DEFAULT_STATISTICS,
) -> dict[str, Any]:
    """Metrics of one (model, benchmark, harness) over its runs, under ``statistics``:
    ``output_json`` (:meth:`Summary.to_dict`, naming the convention) and ``output_md``
    (the table and a note line naming it). The workflow's ``eval_metrics``."""
    summary = summarize(records, statistics=statistics)
    data = summary.to_dict()
    write_json(output_json, data)
    write_text(output_md, summary.to_markdown() + "\n")
    return data


def tracked_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The summary numbers of :func:`write_metrics`'s output, for an experiment tracker
    (:mod:`tmax.tracking`): ``eval/pass@1``, ``eval/pass@1_std``, ``eval/pass@<k>``, the
    counts and mean tokens; each under ``<model>/<benchmark>/<harness>/`` when there are
    several groups. Numbers that are None (nothing scored) are left out."""
    groups = metrics["groups"]
    tracked: dict[str, float] = {}
    for group in groups:
        prefix = "eval/"
        if len(groups) > 1:
            prefix += f"{group['model']}/{group['benchmark'] or '-'}/{group['harness']}/"
        values = {
            "pass@1": group["pass_at_1_mean"],
            "pass@1_std": group["pass_at_1_std"],
            **{f"pass@{k}": value for k, value in group["pass_at_k"].items() if k != "1"},
            **{key: group[key] for key in ("n_tasks", "n_runs", "n_trials",
                                             "n_infra_failures", "mean_input_tokens",
                                             "mean_output_tokens")},
        }  # fmt: skip
        tracked.update({prefix + key: value for key, value in values.items() if value is not None})
    return tracked


def write_summary(metric_files: Sequence[Path], output_json: Path, output_md: Path) -> None:
    """One table over every (model, benchmark, harness) of the metric files written by
    :func:`write_metrics`: pass@1 mean ± std, with the convention(s) they used."""
    rows: list[dict[str, Any]] = []
    conventions: list[str] = []
    for path in metric_files:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        rows += data["groups"]
        if data.get("statistics") and data["statistics"] not in conventions:
            conventions.append(data["statistics"])
    write_json(output_json, {"statistics": ", ".join(conventions) or None, "groups": rows})
    lines = ["# Evaluation", ""]
    lines += [STATISTICS_NOTES[c] for c in conventions] or ["statistics: not recorded."]
    lines += [
        "",
        "| model | benchmark | harness | pass@1 | runs | tasks | trials | infra failures |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mean, std = row["pass_at_1_mean"], row["pass_at_1_std"]
        pass_1 = "–" if mean is None else f"{mean:.1f} ± {std:.1f}"
        lines.append(
            f"| {row['model']} | {row['benchmark']} | {row['harness']} | {pass_1} | "
            f"{row['n_runs']} | {row['n_tasks']} | {row['n_trials']} | "
            f"{row['n_infra_failures']} |"
        )
    write_text(output_md, "\n".join(lines) + "\n")
