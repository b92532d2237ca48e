"""The report stage as the workflow (rules/report.smk) and ``tmax report`` run it.

``write_report_tables`` reads trials (this workflow's run files or Harbor job
folders), builds every table of :mod:`tmax.report.build` and writes, per table,
``<name>.<format>`` and ``<name>_vs_paper.<format>``, plus one Markdown page with
them all (``tables.md``) and, in the workflow, the trials as a tidy table
(``evaluations.parquet``). Every pass@1 follows one statistics convention
(``report.statistics``; the paper's by default), named in each table's notes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.evaluate.metrics import DEFAULT_STATISTICS, STATISTICS_NOTES, paired_difference
from tmax.evaluate.records import TrialRecord
from tmax.io import write_text
from tmax.report.build import PAPER_TABLES, TABLE_NAMES, build_tables, control_verdicts
from tmax.report.ingest import measure, read_dataset_reports
from tmax.report.tables import FORMATS, compare, load_paper_values, to_markdown, write_table
from tmax.report.tidy import write_evaluations

log = logging.getLogger("tmax.report")


FIGURE_NAMES = (
    "training_curves",
    "dppo_vs_grpo",
    "group_size",
    "domain_distribution",
    "contamination",
)
"""Every figure the report draws, each as ``<name>.png`` and ``<name>.pdf``."""


def figure_files(out_dir: str | Path, fmt: str) -> list[str]:
    return [f"{out_dir}/{name}.{fmt}" for name in FIGURE_NAMES]


def table_stems() -> list[str]:
    """File stems of every table written (reproduced, then the comparison views)."""
    return list(TABLE_NAMES) + [f"{name}_vs_paper" for name in PAPER_TABLES]


def table_files(out_dir: str | Path, formats: Sequence[str] = FORMATS) -> list[str]:
    return [f"{out_dir}/{stem}.{fmt}" for stem in table_stems() for fmt in formats]


def _read_json(path: Path | None) -> dict[str, Any] | None:
    if path is None or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def rl_headline(measurements: Sequence[Any]) -> list[str]:
    """The report's first section: for every model whose RL result was evaluated, RL
    against the SFT control and the SFT model it started from, the gap and its paired
    95% interval, in words (:func:`~tmax.report.build.control_verdicts`): a gain is
    claimed only when the interval leaves out 0, and the section says so plainly when
    none does."""
    lines = ["## What RL did", ""]
    trained = sorted({m.model for m in measurements if m.variant == "tmax"})
    found = {(m.model, m.benchmark, m.harness, m.variant): m for m in measurements}
    claimed = False
    for model in trained:
        verdicts = control_verdicts([m for m in measurements if m.model == model])
        lines += [f"- {model}: {verdict}" for verdict in verdicts]
    for (model, benchmark, harness, variant), rl in found.items():
        control = found.get((model, benchmark, harness, "control"))
        if variant == "tmax" and control is not None:
            gap = paired_difference(rl.per_task, control.per_task)
            claimed |= gap is not None and gap.verdict == "ahead"
    if not trained:
        lines.append("No RL model was evaluated, so there is no gain to report.")
    elif not claimed:
        lines += ["", "RL shows no gain over the SFT control beyond the noise here: no "
                  "interval above leaves out 0 in RL's favour against the control."]  # fmt: skip
    return lines


def write_report_tables(
    records: Sequence[TrialRecord],
    out_dir: Path,
    *,
    formats: Sequence[str] = FORMATS,
    combined: Path | None = None,
    reference: str | None = None,
    paper_values: Path | None = None,
    tasks_report: Path | None = None,
    decontam_report: Path | None = None,
    removed: Path | None = None,
    datasets: Sequence[str] = (),
    datasets_root: Path = Path("results/datasets"),
    ablations: Mapping[str, Mapping[str, Any]] | None = None,
    statistics: str = DEFAULT_STATISTICS,
    evaluations: Path | None = None,
) -> list[Path]:
    """Write every table and its comparison with the paper; returns the paths.

    ``statistics`` is the pass@1 convention of every table (``paper`` or
    ``exclude_infra``, :mod:`tmax.evaluate.metrics`).

    The data-side reports are optional: without them their tables say "not run".
    ``datasets`` names the prior datasets whose measurements under
    ``datasets_root/<name>/`` become rows of the dataset comparison; ``ablations``
    (model -> {dataset, base}) names the models trained on a prior dataset, whose
    evaluations fill the dataset ablation's rows. ``evaluations``, when given, is where
    the trials go as a tidy table, one row each (:func:`tmax.report.tidy.write_evaluations`).
    """
    paper = load_paper_values(paper_values)
    paths: list[Path] = []
    if evaluations is not None:
        paths.append(write_evaluations(evaluations, records))
    measurements = measure(records, statistics=statistics)
    tables = build_tables(
        measurements,
        paper,
        reference=reference,
        tasks_report=_read_json(tasks_report),
        decontam_report=_read_json(decontam_report),
        removed=_read_json(removed),
        datasets=read_dataset_reports(datasets_root, datasets),
        ablations=ablations,
    )
    views = list(tables.values()) + [compare(tables[name], paper) for name in PAPER_TABLES]
    for table in views:
        paths += write_table(table, out_dir, formats)
    if combined is not None:
        page = ["# The paper's tables, rebuilt", ""]
        page.append(
            f"From {len(records)} trial(s) in {len(measurements)} setting(s). Paper values: "
            f"{paper.source.strip()} Each cell: value (n = tasks × runs, infrastructure "
            "errors); a cell this run did not produce says so."
        )
        page += ["", STATISTICS_NOTES[statistics]]
        page += ["", *rl_headline(measurements)]
        page += [""] + [to_markdown(table) for table in views]
        write_text(combined, "\n".join(page))
        paths.append(Path(combined))
    log.info(
        "%d table(s) from %d measurement(s) written to %s", len(views), len(measurements), out_dir
    )
    return paths
