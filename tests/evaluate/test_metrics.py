"""Metrics against values computed by hand."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from tmax.evaluate.metrics import (
    PairedDifference,
    mean_pass_at_k,
    number_attempts,
    paired_difference,
    pass_at_1,
    pass_at_k,
    per_run_accuracy,
    per_run_infra_failures,
    summarize,
    task_counts,
    write_metrics,
    write_summary,
)
from tmax.evaluate.records import TrialRecord


def trial(
    task: str,
    run: int,
    reward: float | None,
    *,
    failure: str | None = None,
    exit_status: str | None = "submitted",
    model: str = "m",
    harness: str = "tmax",
    benchmark: str | None = "bench",
    domain: str | None = None,
    tokens: tuple[int | None, int | None] = (None, None),
) -> TrialRecord:
    return TrialRecord(
        task_name=task,
        run=run,
        reward=reward,
        failure=failure,
        exit_status=exit_status,
        model=model,
        harness=harness,
        benchmark=benchmark,
        domain=domain,
        n_input_tokens=tokens[0],
        n_output_tokens=tokens[1],
        duration_sec=None,
        path=Path(f"/jobs/{model}/{task}__{run}"),
    )


def three_runs() -> list[TrialRecord]:
    """Four tasks; runs solve 2/4, 3/4 and 4/4: accuracies 0.5, 0.75, 1.0."""
    solved = {0: {"a", "b"}, 1: {"a", "b", "c"}, 2: {"a", "b", "c", "d"}}
    return [
        trial(task, run, 1.0 if task in solved[run] else 0.0) for run in range(3) for task in "abcd"
    ]


# --- pass@k ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # c / n
        (5, 2, 2, 0.7),  # 1 − C(3,2)/C(5,2) = 1 − 3/10
        (5, 2, 3, 0.9),  # 1 − C(3,3)/C(5,3) = 1 − 1/10
        (5, 2, 4, 1.0),  # n − c = 3 < 4: every draw holds a success
        (4, 0, 2, 0.0),
        (4, 4, 3, 1.0),
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5)),
    ],
)
def test_pass_at_k_matches_the_binomial_formula(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_stable_for_many_attempts() -> None:
    # C(1000, 500) overflows a float; the product form does not need it.
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)
    assert 0.0 < pass_at_k(1000, 3, 10) < 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 1, 0), (3, 4, 1), (3, -1, 1), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="need"):
        pass_at_k(n, c, k)


def test_mean_pass_at_k_averages_over_tasks() -> None:
    counts = {"a": (5, 2), "b": (4, 0), "c": (4, 4)}
    assert mean_pass_at_k(counts, 2) == pytest.approx((0.7 + 0.0 + 1.0) / 3)
    with pytest.raises(ValueError):
        mean_pass_at_k({}, 1)


# --- pass@1 over runs ------------------------------------------------------------------


def test_three_runs_give_mean_and_sample_std_in_percent() -> None:
    records = three_runs()
    assert per_run_accuracy(records) == {0: 0.5, 1: 0.75, 2: 1.0}
    mean, std, n_runs = pass_at_1(records)
    # std = sqrt(((50−75)² + 0 + (100−75)²) / (3 − 1)) = 25
    assert (mean, std, n_runs) == (pytest.approx(75.0), pytest.approx(25.0), 3)


def test_one_run_has_zero_std() -> None:
    records = [trial("a", 0, 1.0), trial("b", 0, 0.0)]
    assert pass_at_1(records) == (50.0, 0.0, 1)


def test_infra_failures_leave_numerator_and_denominator() -> None:
    records = [
        *three_runs(),
        # The sandbox died on a fifth task in run 0 and a sixth in run 2.
        trial("e", 0, None, failure="EnvironmentStartTimeoutError"),
        trial("f", 2, 0.0, failure="RewardFileNotFoundError"),
    ]
    assert per_run_accuracy(records) == {0: 0.5, 1: 0.75, 2: 1.0}
    assert per_run_infra_failures(records) == {0: 1, 1: 0, 2: 1}
    assert pass_at_1(records)[:2] == (pytest.approx(75.0), pytest.approx(25.0))


def test_agent_endings_without_reward_count_as_zero() -> None:
    records = [
        trial("a", 0, 1.0),
        trial("b", 0, None, exit_status="max_turns"),
        trial("c", 0, None, exit_status="context_length"),
        trial("d", 0, 0.0),
    ]
    assert per_run_accuracy(records) == {0: 0.25}


def test_rewards_are_used_as_is_for_accuracy_but_pass_needs_full_reward() -> None:
    records = [trial("a", 0, 0.5), trial("b", 0, 1.0)]
    assert per_run_accuracy(records) == {0: 0.75}
    assert task_counts(records) == {"a": (1, 0), "b": (1, 1)}


def test_a_run_of_only_infra_failures_has_no_accuracy() -> None:
    records = [trial("a", 0, 1.0), trial("a", 1, None, failure="ApiError")]
    assert per_run_accuracy(records) == {0: 1.0}
    assert pass_at_1(records) == (100.0, 0.0, 1)
    with pytest.raises(ValueError, match="undefined"):
        pass_at_1([trial("a", 0, None, failure="ApiError")])


def test_mixed_settings_and_duplicates_are_refused() -> None:
    with pytest.raises(ValueError, match="mix 2"):
        per_run_accuracy([trial("a", 0, 1.0), trial("a", 0, 1.0, model="other")])
    with pytest.raises(ValueError, match="twice in run 0"):
        per_run_accuracy([trial("a", 0, 1.0), trial("a", 0, 0.0)])


# --- summaries -------------------------------------------------------------------------


def test_summary_of_three_runs() -> None:
    summary = summarize(three_runs())
    (group,) = summary.groups
    assert (group.model, group.benchmark, group.harness) == ("m", "bench", "tmax")
    assert (group.n_tasks, group.n_runs, group.n_trials) == (4, 3, 12)
    assert group.pass_at_1_mean == pytest.approx(75.0)
    assert group.pass_at_1_std == pytest.approx(25.0)
    assert group.per_task == {
        "a": {"successes": 3, "attempts": 3, "infra_failures": 0},
        "b": {"successes": 3, "attempts": 3, "infra_failures": 0},
        "c": {"successes": 2, "attempts": 3, "infra_failures": 0},
        "d": {"successes": 1, "attempts": 3, "infra_failures": 0},
    }
    # pass@1 = (1 + 1 + 2/3 + 1/3)/4 = 75 %; pass@2 = (1 + 1 + 1 + (1 − C(2,2)/C(3,2)))/4
    assert group.pass_at_k == {1: pytest.approx(75.0), 2: pytest.approx(100 * (3 + 2 / 3) / 4)}
    assert group.pass_at_k_tasks == {1: 4, 2: 4}  # no task has 4 attempts: no pass@4, @8


def test_pass_at_k_leaves_out_tasks_short_of_k_valid_attempts() -> None:
    records = [
        trial("a", 0, 1.0),
        trial("a", 1, 0.0),
        trial("b", 0, 1.0),
        trial("b", 1, None, failure="EnvironmentStartTimeoutError"),
    ]
    group = summarize(records, ks=(1, 2)).groups[0]
    # k=1: a (2, 1) → 0.5, b (1, 1) → 1; k=2 over a only: 1 − C(1,2)/C(2,2) = 1.
    assert group.pass_at_k == {1: pytest.approx(75.0), 2: pytest.approx(100.0)}
    assert group.pass_at_k_tasks == {1: 2, 2: 1}
    assert group.per_task["b"] == {"successes": 1, "attempts": 1, "infra_failures": 1}
    assert group.n_infra_failures == 1
    assert group.infra_failures == {"EnvironmentStartTimeoutError": 1}
    assert group.per_run[1] == {"accuracy": 0.0, "n_valid": 1, "n_infra_failures": 1}
    assert "100.0*" in summary_markdown(records)


def summary_markdown(records: list[TrialRecord]) -> str:
    return summarize(records, ks=(1, 2)).to_markdown()


def test_per_domain_breakdown() -> None:
    records = [
        trial("s1", 0, 1.0, domain="security"),
        trial("s2", 0, 0.0, domain="security"),
        trial("s1", 1, 1.0, domain="security"),
        trial("s2", 1, 1.0, domain="security"),
        trial("d1", 0, 0.0, domain="debugging"),
        trial("d1", 1, None, domain="debugging", failure="ApiError"),
        trial("x", 0, 1.0),  # no domain: in the totals, not in per_domain
    ]
    group = summarize(records).groups[0]
    # security: run 0 → 1/2, run 1 → 2/2: mean 75, std sqrt((25² + 25²)/1) = 35.36
    assert group.per_domain["security"]["mean"] == pytest.approx(75.0)
    assert group.per_domain["security"]["std"] == pytest.approx(25 * math.sqrt(2))
    assert group.per_domain["security"]["n_tasks"] == 2
    # debugging: only run 0 is valid: 0 %, one run so std 0.
    assert group.per_domain["debugging"] == {"mean": 0.0, "std": 0.0, "n_tasks": 1}
    assert set(group.per_domain) == {"security", "debugging"}


def test_summary_groups_by_model_benchmark_harness() -> None:
    records = [
        trial("a", 0, 1.0, model="base"),
        trial("a", 0, 0.0, model="tmax"),
        trial("a", 0, 1.0, model="tmax", harness="terminus-2"),
        trial("a", 0, 1.0, model="tmax", benchmark=None),
    ]
    summary = summarize(records)
    assert [(g.model, g.benchmark, g.harness) for g in summary.groups] == [
        ("base", "bench", "tmax"),
        ("tmax", None, "tmax"),
        ("tmax", "bench", "terminus-2"),
        ("tmax", "bench", "tmax"),
    ]
    assert summary.get("tmax", "bench", "tmax").pass_at_1_mean == 0.0
    with pytest.raises(KeyError):
        summary.get("nope", None, "tmax")


def test_summary_counts_exit_statuses_and_tokens() -> None:
    records = [
        trial("a", 0, 1.0, tokens=(100, 10)),
        trial("b", 0, None, exit_status="max_turns", tokens=(300, 30)),
        trial("c", 0, None, exit_status=None),
        trial("d", 0, None, failure="ApiError", exit_status="model_error", tokens=(5, 1)),
    ]
    group = summarize(records).groups[0]
    assert group.exit_statuses == {
        "max_turns": 1,
        "model_error": 1,
        "submitted": 1,
        "unrecorded": 1,
    }
    # Over valid trials that report tokens; the infra failure is left out.
    assert group.mean_input_tokens == pytest.approx(200.0)
    assert group.mean_output_tokens == pytest.approx(20.0)


def test_summary_serialises_and_renders() -> None:
    records = [*three_runs(), trial("e", 0, None, failure="ApiError")]
    summary = summarize(records)
    data = json.loads(json.dumps(summary.to_dict()))
    assert data == summary.to_dict()
    group = data["groups"][0]
    assert group["pass_at_k"]["1"] == pytest.approx(100 * (1 + 1 + 2 / 3 + 1 / 3) / 4)
    assert group["per_run"]["0"]["n_infra_failures"] == 1
    table = summary.to_markdown()
    assert table.splitlines()[0] == (
        "| model | benchmark | harness | tasks | runs | pass@1 | pass@2 | trials | infra |"
    )
    # The paper's format: mean ± std; task e (infra only) makes pass@k "partial".
    assert "| m | bench | tmax | 5 | 3 | 75.0 ± 25.0 | 91.7* | 13 | 1 |" in table


def test_summary_of_only_infra_failures() -> None:
    group = summarize([trial("a", 0, None, failure="ApiError")]).groups[0]
    assert (group.pass_at_1_mean, group.pass_at_1_std, group.n_runs) == (None, None, 0)
    assert group.pass_at_k == {}
    assert "| – |" in summarize([trial("a", 0, None, failure="ApiError")]).to_markdown()


def test_summarize_rejects_bad_ks() -> None:
    with pytest.raises(ValueError, match="ks"):
        summarize([trial("a", 0, 1.0)], ks=(0, 1))


# --- the two statistics conventions ----------------------------------------------------


def one_infra_failure() -> list[TrialRecord]:
    """Two tasks, three runs; b's run-0 sandbox never started."""
    return [
        trial("a", 0, 1.0),
        trial("b", 0, None, failure="EnvironmentStartTimeoutError", exit_status=None),
        trial("a", 1, 0.0),
        trial("b", 1, 1.0),
        trial("a", 2, 1.0),
        trial("b", 2, 1.0),
    ]


def test_one_infra_failure_under_the_papers_convention() -> None:
    group = summarize(one_infra_failure(), statistics="paper").groups[0]
    # runs: (1 + 0)/2, (0 + 1)/2, (1 + 1)/2 = 0.5, 0.5, 1.0 → mean 2/3;
    # population std = sqrt(((1/6)² + (1/6)² + (1/3)²) / 3) = sqrt(1/18) = 0.2357
    assert group.statistics == "paper"
    assert group.pass_at_1_mean == pytest.approx(200 / 3)
    assert group.pass_at_1_std == pytest.approx(100 * math.sqrt(1 / 18))
    assert group.n_runs == 3
    assert group.per_run[0] == {"accuracy": 50.0, "n_valid": 2, "n_infra_failures": 1}
    assert group.per_task["b"] == {"successes": 2, "attempts": 3, "infra_failures": 1}
    assert group.pass_at_k_tasks[2] == 2  # the failure is an attempt: b has 3
    assert group.n_infra_failures == 1
    assert group.infra_failures == {"EnvironmentStartTimeoutError": 1}


def test_one_infra_failure_left_out() -> None:
    group = summarize(one_infra_failure(), statistics="exclude_infra").groups[0]
    # runs: 1/1, (0 + 1)/2, (1 + 1)/2 = 1.0, 0.5, 1.0 → mean 5/6;
    # sample std = sqrt(((1/6)² + (1/3)² + (1/6)²) / 2) = sqrt(1/12) = 0.2887
    assert group.statistics == "exclude_infra"
    assert group.pass_at_1_mean == pytest.approx(250 / 3)
    assert group.pass_at_1_std == pytest.approx(100 * math.sqrt(1 / 12))
    assert group.per_run[0] == {"accuracy": 100.0, "n_valid": 1, "n_infra_failures": 1}
    assert group.per_task["b"] == {"successes": 2, "attempts": 2, "infra_failures": 1}


def test_population_and_sample_std_of_the_same_runs() -> None:
    # accuracies 0.5, 0.75, 1.0 (no infra): the conventions differ only in the std.
    # population: sqrt((25² + 0 + 25²) / 3) = 25·sqrt(2/3) = 20.41; sample: 25.
    assert pass_at_1(three_runs(), "paper") == (
        pytest.approx(75.0),
        pytest.approx(25 * math.sqrt(2 / 3)),
        3,
    )
    assert pass_at_1(three_runs(), "exclude_infra")[1] == pytest.approx(25.0)
    assert pass_at_1([trial("a", 0, 1.0), trial("b", 0, 0.0)], "paper") == (50.0, 0.0, 1)


def test_paper_runs_are_each_tasks_ith_attempt() -> None:
    # b has no run-1 trial (e.g. unreadable and skipped): its attempts are runs 0, 2,
    # which the paper counts as its 1st and 2nd attempts.
    records = [
        trial("a", 0, 1.0),
        trial("a", 1, 0.0),
        trial("a", 2, 0.0),
        trial("b", 0, 1.0),
        trial("b", 2, 1.0),
    ]
    assert sorted((r.task_name, r.run) for r in number_attempts(records)) == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1),
    ]  # fmt: skip
    # paper: runs (1 + 1)/2, (0 + 1)/2, 0/1 → 1, 0.5, 0: mean 50, std sqrt(1/6) = 40.8
    group = summarize(records, statistics="paper").groups[0]
    assert [group.per_run[r]["accuracy"] for r in range(3)] == [100.0, 50.0, 0.0]
    assert group.pass_at_1_std == pytest.approx(100 * math.sqrt(1 / 6))
    # exclude_infra: runs as recorded, 1, 0, 0.5: mean 50, sample std 50
    other = summarize(records, statistics="exclude_infra").groups[0]
    assert [other.per_run[r]["accuracy"] for r in range(3)] == [100.0, 0.0, 50.0]
    assert (other.pass_at_1_mean, other.pass_at_1_std) == (50.0, 50.0)


def test_every_output_names_its_convention() -> None:
    for statistics in ("paper", "exclude_infra"):
        summary = summarize(one_infra_failure(), statistics=statistics)
        assert summary.to_dict()["statistics"] == statistics
        assert summary.to_dict()["groups"][0]["statistics"] == statistics
        assert (
            summary.to_markdown().rstrip().splitlines()[-1].startswith(f"statistics: {statistics}")
        )
    with pytest.raises(ValueError, match="allowed: 'paper', 'exclude_infra'"):
        summarize(one_infra_failure(), statistics="population")


def test_write_metrics_and_summary_say_which_convention(tmp_path: Path) -> None:
    json_path, md_path = tmp_path / "metrics.json", tmp_path / "metrics.md"
    write_metrics(one_infra_failure(), json_path, md_path)  # the default: paper
    data = json.loads(json_path.read_text())
    assert data["statistics"] == "paper"
    assert data["groups"][0]["pass_at_1_mean"] == pytest.approx(200 / 3)
    assert "statistics: paper" in md_path.read_text()
    write_summary([json_path], tmp_path / "summary.json", tmp_path / "summary.md")
    summary = (tmp_path / "summary.md").read_text()
    assert "statistics: paper" in summary
    assert "| m | bench | tmax | 66.7 ± 23.6 | 3 | 2 | 6 | 1 |" in summary


def test_a_trial_read_twice_is_refused() -> None:
    record = trial("a", 0, 1.0)
    with pytest.raises(ValueError, match="read twice"):
        summarize([record, replace(record, run=1)], statistics="paper")


# --- paired comparison -------------------------------------------------------------------


def _tasks(*rates: tuple[int, int]) -> dict[str, tuple[int, int]]:
    return {f"t{index:02d}": counts for index, counts in enumerate(rates)}


def test_a_gain_on_every_task_is_resolved_and_a_mirror_loss_too() -> None:
    rl, sft = _tasks(*[(2, 2)] * 20), _tasks(*[(0, 2)] * 20)
    gain = paired_difference(rl, sft)
    assert gain == PairedDifference(20, 100.0, 100.0, 100.0, 0.95)
    assert gain.verdict == "ahead"
    assert paired_difference(sft, rl).verdict == "behind"


def test_one_task_of_ten_is_not_a_difference_though_the_means_differ() -> None:
    """A model one task ahead on 10 (5 points in the means) is within the noise: the
    interval holds 0. A verdict by the means would call it a win."""
    rl = _tasks((2, 2), *[(1, 2)] * 9)
    sft = _tasks(*[(1, 2)] * 10)
    gap = paired_difference(rl, sft)
    assert gap is not None and gap.mean == pytest.approx(5.0)
    assert gap.low <= 0 < gap.high and gap.verdict == "unresolved"
    assert paired_difference(rl, sft) == gap  # seeded: the same trials, the same interval


def test_a_steady_gain_on_most_tasks_is_resolved() -> None:
    """16 of 20 tasks better by one attempt in two, none worse: +40 points, ahead."""
    rl = _tasks(*[(2, 2)] * 16, *[(1, 2)] * 4)
    sft = _tasks(*[(1, 2)] * 20)
    gap = paired_difference(rl, sft)
    assert gap is not None and gap.mean == pytest.approx(40.0)
    assert 20.0 < gap.low < 40.0 < gap.high <= 50.0 and gap.verdict == "ahead"


def test_only_tasks_both_scored_are_paired() -> None:
    rl = {**_tasks(*[(2, 2)] * 6), "only-rl": (2, 2), "no-attempt": (0, 0)}
    sft = {**_tasks(*[(0, 2)] * 6), "only-sft": (0, 2), "no-attempt": (0, 2)}
    gap = paired_difference(rl, sft)
    assert gap is not None and gap.n_tasks == 6
    assert paired_difference({"a": (1, 1)}, {"b": (0, 1)}) is None


def test_a_few_tasks_are_too_few_for_a_verdict() -> None:
    gap = paired_difference(_tasks(*[(2, 2)] * 4), _tasks(*[(0, 2)] * 4))
    assert gap is not None and gap.mean == 100.0 and gap.verdict == "too_few_tasks"
    assert gap.describe() == "+100.0 points (95% CI +100.0 to +100.0, 4 paired tasks)"
