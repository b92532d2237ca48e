"""Evaluation metrics: pass@1 as mean ± std over runs, pass@k, and their breakdowns.

The paper reports each (model, benchmark, harness) as pass@1 averaged over
independent runs, "mean ± std" in percent (e.g. 57.2 ± 2.5), and pass@k with the
unbiased estimator of Chen et al. (2021).

Infrastructure failures (``TrialRecord.failure`` set: the sandbox did not start, the
model endpoint failed after retries, the verifier could not produce a reward) are
treated everywhere as if the attempt had never been made: they are left out of both
the numerator and the denominator, and counted separately. So a task that
infra-failed in run 2 only is simply absent from run 2's accuracy and has one valid
attempt fewer for pass@k; nothing else changes. Agent-caused endings (turn, time or
token budget, refusal, a wrong answer) are valid attempts, scored by their reward,
or 0 when they have none. (Harbor's own ``pass_at_k`` in a job's result.json scores
every trial, errored ones as 0, so it can be lower than ours.)
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tmax.evaluate.records import TrialRecord

#: A trial *succeeds* (for pass@k and per-task counts) when its reward reaches this.
#: Rewards are binary in practice (Harbor's reward.txt is 0 or 1), so this is
#: "all tests passed"; a partial-credit reward below 1 is not a success.
SUCCESS_REWARD = 1.0

DEFAULT_KS = (1, 2, 4, 8)

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
    for record in records:
        key = (record.task_name, record.run)
        if key in seen:
            raise ValueError(
                f"task {record.task_name!r} appears twice in run {record.run} "
                f"(again at {record.path}); was a job read twice?"
            )
        seen.add(key)


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


def per_run_infra_failures(records: Iterable[TrialRecord]) -> dict[int, int]:
    """Number of infrastructure failures in each run (runs without any included)."""
    counts: dict[int, int] = {}
    for record in records:
        counts[record.run] = counts.get(record.run, 0) + int(record.is_infra_failure)
    return dict(sorted(counts.items()))


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    std = statistics.stdev(values) if len(values) >= 2 else 0.0
    return statistics.fmean(values), std


def pass_at_1(records: Iterable[TrialRecord]) -> tuple[float, float, int]:
    """pass@1 as the paper reports it, in percent: (mean, std, n_runs) over runs of
    :func:`per_run_accuracy`,

        mean = 100 · (1/R) Σ_r acc_r,   std = 100 · sqrt( Σ_r (acc_r − mean)² / (R − 1) )

    i.e. the sample standard deviation (ddof = 1), the spread one would expect of
    another run; with a single run the std is reported as 0. R counts the runs with
    at least one valid trial.
    """
    accuracies = list(per_run_accuracy(records).values())
    if not accuracies:
        raise ValueError("no trial without an infrastructure failure: pass@1 is undefined")
    mean, std = _mean_std(accuracies)
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


# --- summaries -------------------------------------------------------------------------


def _group_sort_key(group: Group) -> tuple[str, str, str]:
    model, benchmark, harness = group
    return (model, benchmark or "", harness)


def _str_keys(values: Mapping[int, Any]) -> dict[str, Any]:
    return {str(key): value for key, value in values.items()}


@dataclass(frozen=True)
class GroupSummary:
    """The metrics of one (model, benchmark, harness). Rates are in percent.

    - ``n_tasks``: distinct tasks seen (an all-infra-failed task included);
      ``n_runs``: runs with a valid trial; ``n_trials``: all trials.
    - ``pass_at_1_mean``/``_std``: :func:`pass_at_1` (None if nothing valid).
    - ``per_run``: run → accuracy (percent, None if nothing valid), valid trials,
      infrastructure failures.
    - ``pass_at_k``: k → mean pass@k over the tasks with at least k valid attempts;
      ``pass_at_k_tasks``: k → how many tasks that was (fewer than ``n_tasks`` when
      infrastructure failures left some task short). A k no task reaches is absent.
    - ``infra_failures``: failure kind → count; ``exit_statuses``: exit status → count
      over all trials ("unrecorded" for none).
    - ``per_task``: task → successes, valid attempts, infrastructure failures.
    - ``per_domain``: domain → pass@1 mean and std over runs and number of tasks,
      from the records that carry a domain (Harbor's own trials carry none).
    - ``mean_input_tokens``/``mean_output_tokens``: over valid trials reporting them
      (infra failures are cut short and would pull the mean down).
    """

    model: str
    benchmark: str | None
    harness: str
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

    def get(self, model: str, benchmark: str | None, harness: str) -> GroupSummary:
        for group in self.groups:
            if (group.model, group.benchmark, group.harness) == (model, benchmark, harness):
                return group
        raise KeyError((model, benchmark, harness))

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [group.to_dict() for group in self.groups]}

    def to_markdown(self) -> str:
        """A compact table: one row per setting, pass@1 as "mean ± std" over runs and
        pass@k for k ≥ 2 (the k = 1 estimate stays in :meth:`to_dict`)."""
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
        if partial:
            lines.append("")
            lines.append("\\* over the tasks with at least k valid attempts only.")
        return "\n".join(lines) + "\n"


def _mean_of(values: Iterable[int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _summarize_group(group: Group, records: list[TrialRecord], ks: Sequence[int]) -> GroupSummary:
    accuracies = per_run_accuracy(records)
    infra_per_run = per_run_infra_failures(records)
    valid = [r for r in records if not r.is_infra_failure]
    per_run = {
        run: {
            "accuracy": 100.0 * accuracies[run] if run in accuracies else None,
            "n_valid": sum(1 for r in valid if r.run == run),
            "n_infra_failures": infra_per_run[run],
        }
        for run in sorted({r.run for r in records})
    }
    if accuracies:
        mean, std, n_runs = pass_at_1(records)
    else:
        mean, std, n_runs = None, None, 0

    counts = task_counts(records)
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
        in_domain = [r for r in records if r.domain == domain]
        domain_acc = list(per_run_accuracy(in_domain).values())
        domain_mean, domain_std = _mean_std(domain_acc) if domain_acc else (None, None)
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
        n_tasks=len(per_task),
        n_runs=n_runs,
        n_trials=len(records),
        pass_at_1_mean=mean,
        pass_at_1_std=std,
        per_run=per_run,
        pass_at_k=pass_k,
        pass_at_k_tasks=pass_k_tasks,
        n_infra_failures=len(records) - len(valid),
        infra_failures=dict(sorted(Counter(r.failure for r in records if r.failure).items())),
        exit_statuses=dict(sorted(Counter(r.exit_status or "unrecorded" for r in records).items())),
        per_task=per_task,
        per_domain=per_domain,
        mean_input_tokens=_mean_of(r.n_input_tokens for r in valid),
        mean_output_tokens=_mean_of(r.n_output_tokens for r in valid),
    )


def summarize(records: Iterable[TrialRecord], ks: Sequence[int] = DEFAULT_KS) -> Summary:
    """Group ``records`` by (model, benchmark, harness) and compute each group's
    :class:`GroupSummary`: pass@1 mean ± std over runs, pass@k for each k in ``ks``
    (over the tasks with at least k valid attempts), infrastructure failures by kind,
    exit statuses, per-task and per-domain breakdowns and mean token counts."""
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {list(ks)}")
    by_group: dict[Group, list[TrialRecord]] = defaultdict(list)
    for record in records:
        by_group[record.group].append(record)
    return Summary(
        [
            _summarize_group(group, by_group[group], ks)
            for group in sorted(by_group, key=_group_sort_key)
        ]
    )
