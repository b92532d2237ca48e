"""The paper's tables, filled from what this run measured.

Each builder lays the paper's rows and columns out first (from ``paper_values.yaml``)
and adds whatever this run produced beyond them, so at paper scale the grids line up
cell by cell and at embedded scale the tiny model's rows sit beside the paper's, each
paper-only cell marked "not run". How measurements map onto the paper's tables:

- cross-size: rows = base models, columns = benchmark/variant, the primary harness
  (``tmax`` when evaluated), SWE-bench Verified and AIME left to cross-task;
- cross-harness: the reference model, rows = harness, columns = benchmark/variant;
- cross-task: the reference model, rows = SWE-bench Verified / AIME, columns = variant;
- dataset ablation: the reference model before RL ("none": the base model, or the SFT
  warm-up when the base model is not evaluated), after RL on the generated tasks
  ("tmax-15k"), and after RL on each prior dataset (a row per dataset, from the model
  configured with ``rl_data: <dataset>`` on the same base; "not run" without one);
- dataset comparison: this run's generated tasks as the ``tmax-15k`` row (size,
  exp(H)/N, difficulty by the reference model on held-out tasks, 13-gram overlap),
  and one row per configured prior dataset (size from its manifest, balance from its
  labels, pass@1/pass@8 from its difficulty run, 13-gram overlap when checked);
- contamination: the decontamination report, dataset × benchmark × n.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tmax.evaluate.metrics import DEFAULT_STATISTICS, STATISTICS_NOTES, paired_difference
from tmax.report.ingest import VARIANTS, DatasetReport, Measurement
from tmax.report.tables import NOT_RUN, Cell, PaperValues, Table, missing, ordered_union

#: Benchmarks that are not terminal tasks: the cross-task table, not cross-size.
CROSS_TASK_BENCHMARKS = ("swe-bench-verified", "aime")
PRIMARY_HARNESS = "tmax"
GENERATED_DATASET = "tmax-15k"
"""Our generated task set is the row the paper calls TMAX-15K."""
GENERATED_LABEL = "TMAX tasks generated here"
GENERATED_ROW_BESIDE_RELEASE = "tmax-generated"
"""The generated tasks' row when the released TMAX-15K is itself a measured dataset
(which then takes the paper's ``tmax-15k`` row)."""
NOT_CHECKED = "not checked"


NO_COMPLETED_TRIAL = "no completed trial"


def pass1_cell(measurement: Measurement) -> Cell:
    """pass@1 mean ± std over runs, under the measurement's statistics convention."""
    if measurement.pass_at_1 is None:
        return missing(NO_COMPLETED_TRIAL)
    return Cell(
        value=measurement.pass_at_1,
        std=measurement.pass_at_1_std,
        n_tasks=measurement.n_tasks,
        n_runs=measurement.n_runs,
        n_infra=measurement.n_infra,
        sources=measurement.sources,
    )


def primary_harness(measurements: Sequence[Measurement]) -> str:
    """``tmax`` (the paper's own harness) when evaluated, else the most used one."""
    harnesses = [m.harness for m in measurements]
    if not harnesses or PRIMARY_HARNESS in harnesses:
        return PRIMARY_HARNESS
    return max(sorted(set(harnesses)), key=harnesses.count)


def reference_model(measurements: Sequence[Measurement], configured: str | None) -> str | None:
    """The model of the single-model tables: the configured one, else the first seen."""
    if configured:
        return configured
    return measurements[0].model if measurements else None


def _grid(
    name: str,
    title: str,
    corner: str,
    measurements: Iterable[Measurement],
    row_of: Callable[[Measurement], str],
    column_of: Callable[[Measurement], str],
    paper: PaperValues,
    notes: list[str],
    statistics: str,
) -> Table:
    cells: dict[tuple[str, str], Cell] = {}
    for m in measurements:
        cells[(row_of(m), column_of(m))] = pass1_cell(m)
    rows = ordered_union(paper.rows(name), sorted({r for r, _ in cells}))
    columns = ordered_union(paper.columns(name), sorted({c for _, c in cells}, key=_column_key))
    return Table(
        name,
        title,
        corner,
        rows,
        columns,
        cells,
        dict(paper.labels),
        [*notes, STATISTICS_NOTES[statistics]],
        statistics=statistics,
    )


def _column_key(column: str) -> tuple[str, int]:
    """benchmark/variant columns: by benchmark, then base < sft < control < tmax."""
    benchmark, _, variant = column.partition("/")
    order = VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS)
    return (benchmark, order)


PASS1_NOTE = (
    "pass@1 in %, mean ± std over runs; n = tasks × runs; 'infra' counts the trials that "
    "ended in an infrastructure error (how they are scored: the statistics note)."
)


def statistics_of(measurements: Iterable[Measurement]) -> str:
    """The one statistics convention of ``measurements`` (the default when there are
    none); a table never mixes two."""
    found = sorted({m.statistics for m in measurements})
    if len(found) > 1:
        raise ValueError(f"measurements mix statistics conventions {found}; use one")
    return found[0] if found else DEFAULT_STATISTICS


def cross_size(measurements: Sequence[Measurement], paper: PaperValues) -> Table:
    harness = primary_harness(measurements)
    chosen = [
        m for m in measurements if m.harness == harness and m.benchmark not in CROSS_TASK_BENCHMARKS
    ]
    return _grid(
        "cross_size",
        "Cross-size: base vs trained per model size",
        "model",
        chosen,
        lambda m: m.model,
        lambda m: f"{m.benchmark}/{m.variant}",
        paper,
        [PASS1_NOTE, f"harness: {harness}."],
        statistics_of(measurements),
    )


def cross_harness(
    measurements: Sequence[Measurement], paper: PaperValues, model: str | None
) -> Table:
    chosen = [m for m in measurements if m.model == model]
    return _grid(
        "cross_harness",
        "Cross-harness: base vs trained under each harness",
        "harness",
        chosen,
        lambda m: m.harness,
        lambda m: f"{m.benchmark}/{m.variant}",
        paper,
        [PASS1_NOTE, f"model: {model or 'none evaluated'}.", *control_verdicts(chosen)],
        statistics_of(measurements),
    )


#: What RL is compared with, and what a verdict about each says.
RL_BASELINES = (
    ("control", "the SFT control trained for the same learner tokens"),
    ("sft", "the SFT model RL started from"),
)


def control_verdicts(measurements: Iterable[Measurement]) -> list[str]:
    """For each benchmark and harness where RL (variant tmax) and a baseline were both
    measured, whether RL is ahead of the SFT control trained for RL's learner tokens
    (only a gain over it can be credited to RL) and of the SFT model it started from.

    The verdict is a paired comparison on the tasks both were scored on
    (:func:`~tmax.evaluate.metrics.paired_difference`): a gap whose 95% interval holds 0
    is reported as not resolved, however the means compare, because two samplings of
    one model differ by as much on a few dozen tasks. Measurements without per-task
    counts are compared by their means, and the note says so."""
    found = {(m.benchmark, m.harness, m.variant): m for m in measurements}
    notes = []
    for (benchmark, harness, variant), rl in sorted(found.items()):
        if variant != "tmax" or rl.pass_at_1 is None:
            continue
        for name, baseline_text in RL_BASELINES:
            baseline = found.get((benchmark, harness, name))
            if baseline is None or baseline.pass_at_1 is None:
                continue
            where = (f"on {benchmark} under {harness} "
                     f"({rl.pass_at_1:.1f} vs {baseline.pass_at_1:.1f})")  # fmt: skip
            notes.append(_rl_verdict(rl, baseline, baseline_text, where, name == "control"))
    return notes


def _rl_verdict(
    rl: Measurement, baseline: Measurement, baseline_text: str, where: str, control: bool
) -> str:
    """One sentence: RL against one baseline (:func:`control_verdicts`)."""
    other = baseline_text[:1].upper() + baseline_text[1:]
    gap = paired_difference(rl.per_task, baseline.per_task)
    if gap is None:  # no per-task counts, or no task both were scored on
        assert rl.pass_at_1 is not None and baseline.pass_at_1 is not None
        if rl.pass_at_1 > baseline.pass_at_1:
            return f"RL is above {baseline_text} {where}, by the means only (no paired tasks)."
        return f"{other} matches or beats RL {where}, by the means only (no paired tasks)."
    if gap.verdict == "ahead":
        credit = ": a gain that can be credited to RL" if control else ""
        return f"RL beats {baseline_text} {where}: {gap.describe()}{credit}."
    if gap.verdict == "behind":
        return f"{other} beats RL {where}: RL {gap.describe()}."
    reason = "too few paired tasks" if gap.verdict == "too_few_tasks" else "the interval holds 0"
    consequence = "; no gain can be credited to RL" if control else ""
    return (f"RL and {baseline_text} are not told apart {where}: RL {gap.describe()}, "
            f"{reason}{consequence}.")  # fmt: skip


def cross_task(measurements: Sequence[Measurement], paper: PaperValues, model: str | None) -> Table:
    harness = primary_harness(measurements)
    chosen = [
        m
        for m in measurements
        if m.model == model and m.harness == harness and m.benchmark in CROSS_TASK_BENCHMARKS
    ]
    return _grid(
        "cross_task",
        "Cross-task: SWE-bench Verified and AIME",
        "benchmark",
        chosen,
        lambda m: m.benchmark,
        lambda m: m.variant,
        paper,
        [PASS1_NOTE, f"model: {model or 'none evaluated'}; harness: {harness}."],
        statistics_of(measurements),
    )


def ablation_models(
    ablations: Mapping[str, Mapping[str, Any]], model: str | None
) -> dict[str, str]:
    """Model name -> prior dataset, for the models trained on a prior dataset from the
    same base as ``model`` (``ablations``: rules/common.smk's rl_dataset_ablations)."""
    return {
        name: entry["dataset"]
        for name, entry in ablations.items()
        if model is not None and entry.get("base") == model
    }


def dataset_ablation(
    measurements: Sequence[Measurement],
    paper: PaperValues,
    model: str | None,
    ablations: Mapping[str, Mapping[str, Any]] | None = None,
) -> Table:
    """RL-dataset ablation: the same base model with no RL ("none"), after RL on the
    generated tasks, and after RL on each prior dataset (``ablations``)."""
    harness = primary_harness(measurements)
    trained_on = ablation_models(ablations or {}, model)
    generated = (
        GENERATED_ROW_BESIDE_RELEASE
        if GENERATED_DATASET in trained_on.values()
        else GENERATED_DATASET
    )
    rows = {model: generated, **trained_on}
    chosen = [
        m
        for m in measurements
        if m.model in rows and m.harness == harness and m.benchmark not in CROSS_TASK_BENCHMARKS
    ]
    # "none" is the model RL started from: the base model, or the SFT warm-up when
    # the base model itself was not evaluated (the embedded default).
    start = {}
    for m in sorted(chosen, key=lambda m: VARIANTS.index(m.variant), reverse=True):
        if m.model == model and m.variant not in ("tmax", "control"):
            start[m.benchmark] = m
    chosen = [m for m in chosen if m.variant == "tmax"] + list(start.values())
    trained = ", ".join(f"{d}: {name}" for name, d in sorted(trained_on.items())) or "none"
    table = _grid(
        "dataset_ablation",
        "RL-dataset ablation",
        "RL data",
        chosen,
        lambda m: rows[m.model] if m.variant == "tmax" else "none",
        lambda m: m.benchmark,
        paper,
        [
            PASS1_NOTE,
            f"model: {model or 'none evaluated'}; harness: {harness}; 'none' is the model RL "
            "started from (" + ", ".join(sorted({m.label for m in start.values()})) + "). "
            f"Models trained on a prior dataset (models[].rl_data) — {trained}; a dataset "
            "without one is not run. Terminal-Bench 2.1 is not in this workflow's "
            "benchmark registry.",
        ],
        statistics_of(measurements),
    )
    table.labels[generated] = GENERATED_LABEL
    return table


# --- tables from the data-side reports ----------------------------------------------------


def _difficulty_measurement(
    measurements: Sequence[Measurement], model: str | None
) -> Measurement | None:
    """The reference model on held-out generated tasks, least trained variant first
    (the paper measures difficulty with an untrained-on-it model)."""
    harness = primary_harness(measurements)
    candidates = [
        m
        for m in measurements
        if m.model == model and m.benchmark == "heldout" and m.harness == harness
    ]
    candidates.sort(key=lambda m: VARIANTS.index(m.variant) if m.variant in VARIANTS else 9)
    return candidates[0] if candidates else None


def _thirteen_gram_overlap(
    decontam: Mapping[str, Any] | None,
    source: str = "decontam/report.json",
    absent: str = NOT_RUN,
) -> Cell:
    if decontam is None:
        return missing(absent)
    rows = [r for r in decontam.get("summary", []) if r["n"] == 13]
    if not rows:
        return missing(NOT_CHECKED)
    worst = max(rows, key=lambda r: r["tasks_flagged_pct"])
    return Cell(
        value=worst["tasks_flagged_pct"],
        n_tasks=worst["tasks"],
        sources=(source,),
    )


def _short_reason(reason: str | None, default: str) -> str:
    """The head of a recorded reason ("no environments: ..." -> "no environments")."""
    return (reason or default).split(":", 1)[0].strip() or default


def _dataset_size(report: DatasetReport) -> tuple[Cell, str | None]:
    """Converted tasks, or the number of trajectories when no environments exist
    (with a note saying so)."""
    manifest = report.manifest
    if manifest is None:
        return missing(NOT_RUN), None
    source = (f"datasets/{report.name}/manifest.json",)
    tasks = manifest.get("tasks") or []
    if manifest.get("has_environments"):
        converted = sum(1 for task in tasks if task.get("path"))
        return Cell(value=converted, digits=0, sources=source), None
    note = f"{report.name}: size counts trajectories (the dataset releases no environments)."
    return Cell(value=len(tasks), digits=0, sources=source), note


def _dataset_balance(report: DatasetReport, axis: str) -> Cell:
    labels = report.labels
    if labels is None:
        return missing(NOT_RUN)
    balance = labels.get("balance") or {}
    if balance.get(axis) is None:
        if labels.get("status") == "off":
            return missing("labelling off")
        return missing("nothing labelled")
    return Cell(
        value=balance[axis],
        digits=3,
        n_tasks=balance.get("n_labelled"),
        sources=(f"datasets/{report.name}/labels.json",),
    )


def _dataset_difficulty(report: DatasetReport, k: int) -> Cell:
    difficulty = report.difficulty
    if difficulty is None:
        return missing(NOT_RUN)
    if difficulty.get("status") != "measured":
        return missing(_short_reason(difficulty.get("reason"), "not measured"))
    value = difficulty.get(f"pass_at_{k}")
    if value is None:
        reason = difficulty.get(f"pass_at_{k}_reason") or difficulty.get("reason")
        return missing(_short_reason(reason, "not measured"))
    return Cell(
        value=value,
        n_tasks=difficulty.get(f"pass_at_{k}_tasks") or difficulty.get("n_tasks"),
        n_runs=difficulty.get("n_runs"),
        n_infra=difficulty.get("n_infra"),
        sources=(f"datasets/{report.name}/difficulty.json",),
    )


def prior_dataset_cells(
    reports: Sequence[DatasetReport],
) -> tuple[dict[tuple[str, str], Cell], list[str]]:
    """The dataset-comparison cells of each configured prior dataset (row = its name),
    and the notes they need."""
    cells: dict[tuple[str, str], Cell] = {}
    notes: list[str] = []
    for report in reports:
        row = report.name
        cells[(row, "size")], note = _dataset_size(report)
        notes += [note] if note else []
        for axis in ("domain", "skill_type"):
            cells[(row, f"{axis}_balance")] = _dataset_balance(report, axis)
        unlabelled = ((report.labels or {}).get("balance") or {}).get("n_unlabelled")
        if unlabelled:
            notes.append(f"{row}: {unlabelled} task(s) left unlabelled, outside the balance.")
        for k in (1, 8):
            cells[(row, f"pass_at_{k}")] = _dataset_difficulty(report, k)
        cells[(row, "contamination_13gram")] = _thirteen_gram_overlap(
            report.decontam, f"datasets/{row}/decontam.json", NOT_CHECKED
        )
    measured = sorted(
        {
            f"{r.difficulty['model']} under {r.difficulty['harness']}"
            for r in reports
            if r.difficulty and r.difficulty.get("status") == "measured"
        }
    )
    if measured:
        notes.append(
            "Prior datasets' difficulty: " + "; ".join(measured) + " on each dataset's "
            "sample (pass@k by the unbiased estimator; infrastructure failures left out)."
        )
    return cells, notes


def dataset_comparison(
    measurements: Sequence[Measurement],
    paper: PaperValues,
    model: str | None,
    tasks_report: Mapping[str, Any] | None,
    decontam: Mapping[str, Any] | None,
    datasets: Sequence[DatasetReport] = (),
) -> Table:
    names = [report.name for report in datasets]
    row = GENERATED_ROW_BESIDE_RELEASE if GENERATED_DATASET in names else GENERATED_DATASET
    cells: dict[tuple[str, str], Cell] = {}
    if tasks_report is not None:
        size = tasks_report.get("tasks_validated")
        checked = tasks_report.get("tasks_checked")
        if decontam is not None and "removed" in decontam:
            size = decontam["removed"].get("kept", size)
        if size is not None:
            cells[(row, "size")] = Cell(value=size, digits=0, sources=("tasks/report.json",))
        for axis in ("domain", "skill_type"):
            balance = (tasks_report.get("balance") or {}).get(axis)
            if balance is not None:
                cells[(row, f"{axis}_balance")] = Cell(
                    value=balance, digits=3, n_tasks=checked, sources=("tasks/report.json",)
                )
    difficulty = _difficulty_measurement(measurements, model)
    if difficulty is not None:
        cells[(row, "pass_at_1")] = pass1_cell(difficulty)
        if 8 in difficulty.pass_at_k:
            cells[(row, "pass_at_8")] = Cell(
                value=difficulty.pass_at_k[8],
                n_tasks=difficulty.n_tasks,
                n_runs=difficulty.n_runs,
                n_infra=difficulty.n_infra,
                sources=difficulty.sources,
            )
        else:
            cells[(row, "pass_at_8")] = missing(f"needs 8 runs (ran {difficulty.n_runs})")
    cells[(row, "contamination_13gram")] = _thirteen_gram_overlap(
        None if decontam is None else decontam.get("report")
    )
    prior_cells, prior_notes = prior_dataset_cells(datasets)
    cells.update(prior_cells)
    columns = ordered_union(
        ["size", "domain_balance", "skill_type_balance"],
        paper.columns("dataset_comparison"),
        ["contamination_13gram"],
    )
    labels = dict(paper.labels)
    labels.update(
        {row: GENERATED_LABEL},
        size="tasks",
        domain_balance="domain exp(H)/N",
        skill_type_balance="skill-type exp(H)/N",
        pass_at_1="pass@1 %",
        pass_at_8="pass@8 %",
        contamination_13gram="13-gram overlap %",
    )
    who = "none evaluated" if difficulty is None else f"{difficulty.label} on held-out tasks"
    generated_note = (
        f"Row '{GENERATED_LABEL}' stands where the paper has TMAX-15K (after "
        "decontamination when it ran)."
        if row == GENERATED_DATASET
        else f"Row '{GENERATED_LABEL}' is this run's tasks (after decontamination when it "
        "ran); the TMAX-15K row is the released dataset, measured here."
    )
    return Table(
        "dataset_comparison",
        "Datasets: size, balance, difficulty, contamination",
        "dataset",
        ordered_union([row], paper.rows("dataset_comparison"), names),
        columns,
        cells,
        labels,
        [
            generated_note,
            f"Difficulty: {who} (the paper: Gemini-3-Flash on its training tasks).",
            "13-gram overlap: the largest share of tasks sharing a 13-gram with any "
            "checked benchmark.",
            *prior_notes,
            STATISTICS_NOTES[statistics_of(measurements)],
        ],
        statistics=statistics_of(measurements),
    )


def _by_ngram_then_benchmark(columns: Sequence[str]) -> list[str]:
    """``benchmark/n`` columns: larger n first, benchmarks in their first-seen order
    within each n (the paper's order, then ours)."""
    benchmarks = ordered_union([c.partition("/")[0] for c in columns], [])
    return sorted(
        columns,
        key=lambda c: (-int(c.rpartition("/")[2]), benchmarks.index(c.partition("/")[0])),
    )


def contamination(decontam: Mapping[str, Any] | None, paper: PaperValues) -> Table:
    """Share of tasks (%) sharing an n-gram with each benchmark; an unchecked
    benchmark says why."""
    row = GENERATED_DATASET
    cells: dict[tuple[str, str], Cell] = {}
    columns: list[str] = []
    if decontam is not None:
        for summary in decontam.get("summary", []):
            column = f"{summary['benchmark']}/{summary['n']}"
            columns.append(column)
            cells[(row, column)] = Cell(
                value=summary["tasks_flagged_pct"],
                n_tasks=summary["tasks"],
                sources=("decontam/report.json",),
            )
        for name, info in sorted(decontam.get("benchmarks", {}).items()):
            if info.get("status") == "ok":
                continue
            for n in decontam.get("ngram_sizes", []):
                column = f"{name}/{n}"
                columns.append(column)
                cells[(row, column)] = missing("not checked (benchmark not loaded)")
    columns = sorted(set(columns), key=lambda c: (-int(c.rpartition("/")[2]), c))
    columns = _by_ngram_then_benchmark(ordered_union(paper.columns("contamination"), columns))
    labels = dict(paper.labels)
    labels[GENERATED_DATASET] = GENERATED_LABEL
    for column in columns:
        benchmark, _, n = column.partition("/")
        labels[column] = f"{paper.labels.get(benchmark, benchmark)} {n}-gram"
    notes = ["Share of tasks (%) with at least one shared word n-gram; n = tasks checked."]
    if decontam is None:
        notes.append("The decontamination stage did not run.")
    return Table(
        "contamination",
        "Contamination: dataset × benchmark",
        "dataset",
        ordered_union([row], paper.rows("contamination")),
        columns,
        cells,
        labels,
        notes,
        default=NOT_RUN,
    )


def evaluations(measurements: Sequence[Measurement]) -> Table:
    """Every setting measured, under the one statistics convention of the report."""
    cells: dict[tuple[str, str], Cell] = {}
    rows = []
    for m in measurements:
        row = f"{m.label}/{m.benchmark}/{m.harness}"
        rows.append(row)
        cells[(row, "pass_at_1")] = pass1_cell(m)
    statistics = statistics_of(measurements)
    return Table(
        "evaluations",
        "Every evaluation: pass@1",
        "model · benchmark · harness",
        rows,
        ["pass_at_1"],
        cells,
        {"pass_at_1": "pass@1 %"},
        [
            PASS1_NOTE,
            "The same numbers as `tmax eval metrics` with the same --statistics.",
            STATISTICS_NOTES[statistics],
        ],
        default="no trials",
        statistics=statistics,
    )


TABLE_NAMES = (
    "dataset_comparison",
    "dataset_ablation",
    "cross_size",
    "cross_task",
    "cross_harness",
    "contamination",
    "evaluations",
)
"""Every table the report writes; each but ``evaluations`` also gets a paper copy
(``<name>_paper``) and a ``<name>_vs_paper`` view."""

PAPER_TABLES = tuple(name for name in TABLE_NAMES if name != "evaluations")


def build_tables(
    measurements: Sequence[Measurement],
    paper: PaperValues,
    *,
    reference: str | None = None,
    tasks_report: Mapping[str, Any] | None = None,
    decontam_report: Mapping[str, Any] | None = None,
    removed: Mapping[str, Any] | None = None,
    datasets: Sequence[DatasetReport] = (),
    ablations: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Table]:
    """Every table by name (see :data:`TABLE_NAMES`); ``datasets`` adds the
    configured prior datasets' rows to the dataset comparison, ``ablations`` (model
    -> {dataset, base}) the models trained on them to the dataset ablation (and only
    there: they are not model sizes)."""
    ablations = ablations or {}
    sizes = [m for m in measurements if m.model not in ablations]
    model = reference_model(sizes, reference)
    decontam = None
    if decontam_report is not None:
        decontam = {"report": decontam_report, "removed": removed or {}}
    return {
        "dataset_comparison": dataset_comparison(
            measurements, paper, model, tasks_report, decontam, datasets
        ),
        "dataset_ablation": dataset_ablation(measurements, paper, model, ablations),
        "cross_size": cross_size(sizes, paper),
        "cross_task": cross_task(measurements, paper, model),
        "cross_harness": cross_harness(measurements, paper, model),
        "contamination": contamination(decontam_report, paper),
        "evaluations": evaluations(measurements),
    }
