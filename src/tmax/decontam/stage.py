"""The decontamination stage as the workflow runs it (rules/decontaminate.smk).

1. ``load_benchmark``: a benchmark's texts, cached under results/ with its source.
   A benchmark that cannot be loaded stops the run (``on_missing_benchmark: error``,
   the message says how to provide it) or is recorded as not checked (``skip``).
2. ``decontaminate``: every task field against every benchmark text at each n; the
   report (JSON and the paper-shaped Markdown table), with a planted-leak self-test.
   The workflow runs it as one job per n (``ngram_sizes=[n]``, no Markdown) and
   ``merge_reports``: the removal reads only its own n's part, so an n that is only
   reported can be added or dropped without touching what training reads.
3. ``filter_tasks``: the clean task set that training reads, and the removed tasks
   with their reasons (``removal_reasons``, also applied to a prior dataset that RL
   trains on).

``check_texts`` is step 2 on any texts: a converted prior dataset's tasks go through
the same check (:func:`tmax.datasets.measure_stage.dataset_decontam`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from tmax.decontam.check import (
    BenchmarkSide,
    boilerplate_ngrams,
    check_tasks,
    removal_reason,
    summary_rows,
)
from tmax.decontam.selftest import self_test
from tmax.decontam.texts import (
    Text,
    harbor_item_texts,
    read_benchmark_texts,
    read_task_texts,
    write_benchmark_texts,
)
from tmax.io import atomic_path, write_json, write_text

log = logging.getLogger("tmax.decontam")


class DecontaminationError(RuntimeError):
    """A benchmark is missing (and the config says that is an error), or the self-test
    missed a planted leak."""


def load_benchmark(
    name: str,
    output: Path,
    manifest: Path,
    *,
    work_dir: Path,
    sources: Mapping[str, Mapping[str, Any]] | None = None,
    on_missing: str = "error",
) -> dict[str, Any]:
    """Resolve ``name`` (tmax.benchmarks) and cache its item texts."""
    from tmax.benchmarks import BenchmarkError, resolve_benchmark

    try:
        task_set = resolve_benchmark(name, overrides=sources, work_dir=work_dir)
    except BenchmarkError as error:
        how = (
            f"benchmark {name!r} could not be loaded: {error}. Provide it with "
            f"evaluation.sources.{name}: {{path: DIR}} (a local copy in Harbor layout), "
            "{git_url, commit} or {data_files}"
        )
        if on_missing != "skip":
            raise DecontaminationError(how) from None
        log.warning("%s; skipped (decontamination.on_missing_benchmark: skip)", how)
        info = {"benchmark": name, "status": "skipped", "reason": str(error), "source": None}
        write_benchmark_texts([], output, manifest, info)
        return info
    texts = list(harbor_item_texts(task_set.tasks))
    info = {"benchmark": name, "status": "ok", "reason": None, "source": task_set.source}
    write_benchmark_texts(texts, output, manifest, info)
    log.info("%s: %d item(s), %d text(s) from %s", name, len(task_set.tasks), len(texts),
             task_set.source)  # fmt: skip
    return info


def decontaminate(
    tasks_parquet: Path,
    benchmarks: Sequence[tuple[str, Path, Path]],
    *,
    ngram_sizes: Sequence[int],
    boilerplate_min_items: int,
    report_json: Path,
    report_md: Path | None,
    dataset: str = "generated",
    workers: int | None = None,
    self_test_leaks: int = 20,
    seed: int = 0,
) -> dict[str, Any]:
    """Check every exported task against every loaded benchmark at every n; write the
    report (the Markdown too unless ``report_md`` is None)."""
    return check_texts(
        read_task_texts(tasks_parquet), benchmarks, ngram_sizes=ngram_sizes,
        boilerplate_min_items=boilerplate_min_items, report_json=report_json,
        report_md=report_md, dataset=dataset, workers=workers,
        self_test_leaks=self_test_leaks, seed=seed,
    )  # fmt: skip


def check_texts(
    task_texts: Sequence[Text],
    benchmarks: Sequence[tuple[str, Path, Path]],
    *,
    ngram_sizes: Sequence[int],
    boilerplate_min_items: int,
    report_json: Path,
    report_md: Path | None,
    dataset: str,
    workers: int | None = None,
    self_test_leaks: int = 20,
    seed: int = 0,
) -> dict[str, Any]:
    """The check behind :func:`decontaminate`, on any tasks' texts (a prior dataset's
    too): every text against every loaded benchmark at every n; writes the report."""
    workers = workers or os.cpu_count() or 1
    task_ids = {t.owner for t in task_texts}
    loaded: dict[str, list[Text]] = {}
    status: dict[str, Any] = {}
    for name, texts_path, manifest_path in benchmarks:
        info = json.loads(Path(manifest_path).read_text())
        status[name] = info
        if info["status"] == "ok":
            loaded[name] = read_benchmark_texts(Path(texts_path))
    report: dict[str, Any] = {
        "dataset": dataset,
        "tasks": len(task_ids),
        "task_texts": len(task_texts),
        "task_megabytes": sum(len(t.text.encode()) for t in task_texts) / 1e6,
        "benchmarks": status,
        "ngram_sizes": list(ngram_sizes),
        "boilerplate_min_items": boilerplate_min_items,
        "summary": [],
        "self_test": {},
        "boilerplate": {},
        "flagged": {},
    }
    if loaded:
        all_results = {}
        for n in ngram_sizes:
            side = BenchmarkSide(n, loaded, boilerplate_min_items)
            results = check_tasks(task_texts, side, workers=workers)
            all_results[n] = results
            report["flagged"][str(n)] = [
                r.to_dict() for r in sorted(results.values(), key=lambda r: r.task_id)
                if r.flagged() or r.boilerplate
            ]  # fmt: skip
            report["boilerplate"][str(n)] = boilerplate_ngrams(side)
            if self_test_leaks:
                outcome = self_test(task_texts, side, count=self_test_leaks, seed=seed,
                                    workers=workers)  # fmt: skip
                report["self_test"][str(n)] = outcome
                if not outcome["passed"]:
                    raise DecontaminationError(
                        f"self-test at n={n} missed planted leaks: {outcome['missed']}"
                    )
        report["summary"] = summary_rows(all_results, side.items_per_benchmark, len(task_ids))
    else:
        log.warning("no benchmark could be loaded: nothing was checked (see the report)")
    write_json(report_json, report)
    if report_md is not None:
        write_text(report_md, render_report(report))
    return report


def merge_reports(parts: Sequence[Path], report_json: Path, report_md: Path) -> dict[str, Any]:
    """One report from per-n reports of the same tasks and benchmarks (the workflow's
    ``decontam_ngram`` jobs), in the order given; equal to checking every n at once."""
    reports = [json.loads(Path(p).read_text()) for p in parts]
    if not reports:
        raise DecontaminationError("no per-n decontamination report to merge")
    first = reports[0]
    for path, other in zip(parts, reports, strict=True):
        for key in ("dataset", "tasks", "task_texts", "benchmarks", "boilerplate_min_items"):
            if other[key] != first[key]:
                raise DecontaminationError(
                    f"{path} was checked with another {key} than {parts[0]}: rerun both"
                )
    merged = {**first, "ngram_sizes": [n for r in reports for n in r["ngram_sizes"]]}
    for key in ("self_test", "boilerplate", "flagged"):
        merged[key] = {n: part for r in reports for n, part in r[key].items()}
    rows = [row for r in reports for row in r["summary"]]
    merged["summary"] = sorted(rows, key=lambda row: -row["n"])  # stable: benchmarks stay
    write_json(report_json, merged)
    write_text(report_md, render_report(merged))
    return merged


def render_report(report: Mapping[str, Any]) -> str:
    """The paper-shaped table (rows: dataset; columns: benchmark × n) and the details."""
    lines = ["# Decontamination", ""]
    lines.append(
        f"{report['tasks']} task(s) ({report['task_megabytes']:.1f} MB of text in "
        f"{report['task_texts']} field(s)) against each benchmark's instructions, tests and "
        "solutions: word n-grams after lowercasing and splitting on [^a-z0-9]+. A cell is "
        "the share of tasks with any overlap, then the share of benchmark items touched. "
        f"n-grams found in ≥ {report['boilerplate_min_items']} items of a benchmark are "
        "boilerplate and do not count."
    )
    lines.append("")
    rows = report["summary"]
    columns = [(row["benchmark"], row["n"]) for row in rows]
    if columns:
        header = ["dataset"] + [f"{b} {n}-gram" for b, n in columns]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        cells = [
            f"{row['tasks_flagged_pct']:.1f}% ({row['items_touched_pct']:.1f}% items)"
            for row in rows
        ]
        lines.append(f"| {report['dataset']} | " + " | ".join(cells) + " |")
        lines.append("")
    not_checked = {b: s for b, s in report["benchmarks"].items() if s["status"] != "ok"}
    for name, info in sorted(report["benchmarks"].items()):
        if info["status"] == "ok":
            lines.append(f"- {name}: {info['n_items']} item(s) from {info['source']}")
    for name, info in sorted(not_checked.items()):
        lines.append(f"- **{name}: not checked** ({info['reason']})")
    for n, outcome in sorted(report["self_test"].items()):
        lines.append(
            f"- self-test, n={n}: {outcome['found']} of {outcome['planted']} planted leaks found"
        )
    lines.append("")
    for n, flagged in sorted(report["flagged"].items(), key=lambda kv: -int(kv[0])):
        contaminated = [f for f in flagged if f["count"]]
        if not contaminated:
            continue
        lines += [f"## Tasks with {n}-gram overlap", ""]
        for entry in contaminated[:100]:
            lines.append(f"- `{entry['task_id']}`: {entry['count']} n-gram(s)")
            for match in entry["matches"][:3]:
                lines.append(
                    f"  - {match['benchmark']} `{match['item']}` {match['item_field']} "
                    f"{match['item_span']} ↔ task {match['task_field']} {match['task_span']}: "
                    f"“{match['text'][:160]}”"
                )
        lines.append("")
    return "\n".join(lines) + "\n"


def filter_tasks(
    tasks_parquet: Path,
    report_json: Path,
    *,
    ngram: int,
    rule: str,
    threshold: float,
    clean: Path,
    removed: Path,
) -> dict[str, Any]:
    """Write the clean task set (what RL trains on) and the removed tasks with reasons."""
    report = json.loads(report_json.read_text())
    reasons = removal_reasons(report, ngram=ngram, rule=rule, threshold=threshold)
    table = pq.read_table(tasks_parquet)
    keep = pc.invert(pc.is_in(table.column("task_id"), value_set=_string_array(reasons)))
    with atomic_path(clean) as tmp:
        pq.write_table(table.filter(keep), tmp, compression="zstd")
    summary = {
        "rule": rule,
        "threshold": threshold,
        "ngram": ngram,
        "tasks": table.num_rows,
        "kept": table.num_rows - len(reasons),
        "removed": [{"task_id": t, "reason": r} for t, r in sorted(reasons.items())],
        "not_checked": [b for b, s in report["benchmarks"].items() if s["status"] != "ok"],
    }
    write_json(removed, summary)
    log.info("kept %d of %d task(s); removed %d (%s rule, %d-grams)", summary["kept"],
             table.num_rows, len(reasons), rule, ngram)  # fmt: skip
    return summary


def write_removals(
    report_json: Path, output: Path, *, ngram: int, rule: str, threshold: float
) -> dict[str, str]:
    """Write ``{"removed": {task id: why}}``: what the configured rule takes out of a
    prior dataset's tasks (the workflow's dataset_filter checkpoint, which training
    reads: a rerun check that flags the same tasks then retrains nothing)."""
    reasons = removal_reasons(
        json.loads(Path(report_json).read_text()), ngram=ngram, rule=rule, threshold=threshold
    )
    write_json(output, {"removed": dict(sorted(reasons.items()))})
    return reasons


def removal_reasons(
    report: Mapping[str, Any], *, ngram: int, rule: str, threshold: float
) -> dict[str, str]:
    """Task id -> why it is removed, for the tasks of a decontamination report that
    the configured rule (``decontamination.remove_*``) takes out."""
    if report["summary"] and str(ngram) not in report["flagged"]:
        raise DecontaminationError(
            f"the report has no {ngram}-gram results; add {ngram} to decontamination.ngram_sizes"
        )
    reasons = {}
    for entry in report["flagged"].get(str(ngram), []):
        reason = removal_reason(entry, rule, threshold)
        if reason:
            reasons[entry["task_id"]] = reason
    return reasons


def _string_array(values: Mapping[str, Any]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), type=pa.string())
