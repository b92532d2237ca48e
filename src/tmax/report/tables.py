"""The table model behind every rebuilt paper table, and its three renderings
(Markdown, CSV and booktabs LaTeX, each written by pandas).

A :class:`Table` is a grid of :class:`Cell` values. A cell keeps what a reader needs
to trust it: the value, its spread over runs, how many tasks and runs it averages
(``n``), how many trials ended in an infrastructure error, and the files it was
computed from. A cell without a value keeps the reason instead ("not run", "not
reported", "not checked"), so a rendered table is never blank and never shows a
made-up 0.

Numbers are rounded half away from zero (57.25 -> 57.3), as papers round, not with
Python's round-half-to-even on binary floats.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from tmax.io import write_text

NOT_RUN = "not run"
STATISTICS_NOTE_PREFIX = "statistics:"
"""How the note naming a table's pass@1 convention begins (see
:data:`tmax.evaluate.metrics.STATISTICS_NOTES`); the comparison view repeats it."""
NOT_REPORTED = "not reported"
FORMATS = ("md", "csv", "tex")


def round_half_up(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` decimals, halves away from zero."""
    quantum = Decimal(1).scaleb(-digits)
    rounded = float(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))
    return rounded + 0.0  # turns -0.0 into 0.0


def format_number(value: float, digits: int, *, signed: bool = False) -> str:
    """``value`` with exactly ``digits`` decimals ("+" in front when ``signed``)."""
    rounded = round_half_up(value, digits)
    text = f"{rounded:.{digits}f}"
    return f"+{text}" if signed and rounded >= 0 else text


@dataclass(frozen=True)
class Cell:
    """One number of a table and where it came from.

    ``value`` and ``std`` are in the table's unit (percent for pass rates); ``n_tasks``
    × ``n_runs`` is the sample behind it (``n_runs`` None when there are no runs, e.g.
    a dataset size); ``n_infra`` counts trials that ended in an infrastructure error
    (scored 0 in the value). ``missing`` says why there is no value.
    """

    value: float | None = None
    std: float | None = None
    n_tasks: int | None = None
    n_runs: int | None = None
    n_infra: int | None = None
    digits: int = 1
    signed: bool = False
    sources: tuple[str, ...] = ()
    missing: str | None = None

    def __post_init__(self) -> None:
        if self.value is None and not self.missing:
            raise ValueError("a cell without a value must say why (missing=...)")

    @property
    def number(self) -> str:
        """The value (± std) as printed, or the reason it is missing."""
        if self.value is None:
            return str(self.missing)
        text = format_number(self.value, self.digits, signed=self.signed)
        if self.std is not None:
            text += f" ± {format_number(self.std, self.digits)}"
        return text

    @property
    def sample(self) -> str:
        """``n=tasks×runs`` (and the infrastructure errors), or "" without a count."""
        if self.value is None or self.n_tasks is None:
            return ""
        text = f"n={self.n_tasks}" if self.n_runs is None else f"n={self.n_tasks}×{self.n_runs}"
        if self.n_infra:
            text += f", {self.n_infra} infra"
        return text

    @property
    def text(self) -> str:
        sample = self.sample
        return f"{self.number} ({sample})" if sample else self.number

    @property
    def rounded(self) -> float | None:
        return None if self.value is None else round_half_up(self.value, self.digits)


def missing(reason: str = NOT_RUN) -> Cell:
    return Cell(missing=reason)


LONG_FORM = {
    "table": "string",
    "row": "string",
    "column": "string",
    "text": "string",
    "value": "Float64",
    "std": "Float64",
    "n_tasks": "Int64",
    "n_runs": "Int64",
    "n_infra": "Int64",
    "missing": "string",
    "sources": "string",
    "statistics": "string",
}
"""The CSV's columns and their types; an absent value, std or count is an empty field."""


@dataclass
class Table:
    """A titled grid: ``cells[(row, column)]``; absent keys read as ``default``.

    ``name`` is the file stem; ``labels`` maps row and column keys to printed names;
    ``statistics`` names the pass@1 convention of its cells ("" for a table without
    pass rates over runs), also a column of the CSV (the notes say it in Markdown and
    LaTeX).
    """

    name: str
    title: str
    corner: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    default: str = NOT_RUN
    statistics: str = ""

    def cell(self, row: str, column: str) -> Cell:
        return self.cells.get((row, column)) or missing(self.default)

    def label(self, key: str) -> str:
        """A key's printed name; ``a/b`` keys print each part ("TB 2.0 · TMAX")."""
        if key in self.labels:
            return self.labels[key]
        return " · ".join(self.labels.get(part, part) for part in key.split("/"))

    def to_frame(self) -> pd.DataFrame:
        """The grid as printed: the corner column of row names, then one column per
        column name, each cell its text (value ± std (n, infra), or why it is missing)."""
        columns = [self.corner] + [self.label(c) for c in self.columns]
        data = [
            [self.label(row)] + [self.cell(row, c).text for c in self.columns] for row in self.rows
        ]
        return pd.DataFrame(data, columns=columns, dtype="string")

    def to_long_frame(self) -> pd.DataFrame:
        """One line per cell in row-major order (the CSV): the printed number, value and
        std as rounded, n, infrastructure errors, why a value is missing, its sources."""
        records = []
        for row in self.rows:
            for column in self.columns:
                cell = self.cell(row, column)
                records.append(
                    {
                        "table": self.name,
                        "row": row,
                        "column": column,
                        "text": cell.number,
                        "value": cell.rounded,
                        "std": None if cell.std is None else round_half_up(cell.std, cell.digits),
                        "n_tasks": cell.n_tasks,
                        "n_runs": cell.n_runs,
                        "n_infra": cell.n_infra,
                        "missing": cell.missing or "",
                        "sources": ";".join(cell.sources),
                        "statistics": self.statistics,
                    }
                )
        frame = pd.DataFrame.from_records(records, columns=list(LONG_FORM))
        return frame.astype(LONG_FORM)


def ordered_union(*groups: Iterable[str]) -> list[str]:
    """Keys in first-seen order without repeats (paper's order first, then ours)."""
    seen: dict[str, None] = {}
    for group in groups:
        for key in group:
            seen.setdefault(key, None)
    return list(seen)


# --- renderers ---------------------------------------------------------------------------

_SAMPLE = re.compile(r" \((n=[^()]*)\)$")
"""A cell text's trailing sample, "(n=tasks×runs, infra)" (:attr:`Cell.sample`)."""


def to_markdown(table: Table) -> str:
    """The title, a pipe table and the notes as a list."""
    cells = table.to_frame().replace(r"\|", r"\\|", regex=True)  # a "|" would end the cell
    lines = [f"## {table.title}", "", cells.to_markdown(index=False, disable_numparse=True)]
    if table.notes:
        lines += ["", *[f"- {note}" for note in table.notes]]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """Long form, one line per cell, so every cell keeps its n and its sources."""
    return table.to_long_frame().to_csv(index=False, lineterminator="\n")


def to_latex(table: Table) -> str:
    """A booktabs ``tabular``; the sample size goes after the number in small type.
    The title and the notes are comments above and below it."""
    styler = (
        table.to_frame()
        .style.hide(axis="index")
        .format(lambda text: _SAMPLE.sub(r" {\\scriptsize (\1)}", text), escape="latex")
        .format_index(escape="latex", axis="columns")
    )
    body = styler.to_latex(hrules=True, column_format="l" + "c" * len(table.columns))
    lines = [f"% {table.title}", body.rstrip("\n"), *[f"% {note}" for note in table.notes]]
    return "\n".join(lines) + "\n"


RENDERERS = {"md": to_markdown, "csv": to_csv, "tex": to_latex}


def write_table(table: Table, out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``out_dir/<name>.<format>`` for each format; returns the paths."""
    paths = []
    for fmt in formats:
        if fmt not in RENDERERS:
            raise ValueError(f"unknown table format {fmt!r}; allowed: {sorted(RENDERERS)}")
        path = Path(out_dir) / f"{table.name}.{fmt}"
        write_text(path, RENDERERS[fmt](table))
        paths.append(path)
    return paths


# --- the paper's numbers and the comparison view ----------------------------------------


@dataclass(frozen=True)
class PaperValues:
    """``paper_values.yaml`` loaded: per table, its source note and its cells."""

    source: str
    labels: dict[str, str]
    tables: dict[str, dict[str, Any]]

    def table(self, name: str) -> dict[str, Any]:
        return self.tables.get(name, {"source": "", "cells": {}})

    def rows(self, name: str) -> list[str]:
        return list(self.table(name).get("cells", {}))

    def columns(self, name: str) -> list[str]:
        return ordered_union(*(cells for cells in self.table(name).get("cells", {}).values()))

    def cell(self, name: str, row: str, column: str, digits: int = 1) -> Cell:
        table = self.table(name)
        value = table.get("cells", {}).get(row, {}).get(column)
        if value is None:
            return missing(NOT_REPORTED)
        n = (table.get("n") or {}).get(column, {})
        return Cell(
            value=float(value),
            n_tasks=n.get("tasks"),
            n_runs=n.get("runs"),
            digits=digits,
            sources=(f"paper: {name}",),
        )


def parse_paper_values(data: Any, source: str = "paper_values.yaml") -> PaperValues:
    """Check the file's shape; an error names the table and the key."""
    if not isinstance(data, Mapping) or not isinstance(data.get("tables"), Mapping):
        raise ValueError(f"{source}: expected a mapping with a 'tables' mapping")
    for name, table in data["tables"].items():
        if not isinstance(table, Mapping) or not isinstance(table.get("cells"), Mapping):
            raise ValueError(f"{source}: table {name!r} needs a 'cells' mapping")
        if not table.get("source"):
            raise ValueError(f"{source}: table {name!r} needs a 'source' note")
        for row, columns in table["cells"].items():
            if not isinstance(columns, Mapping):
                raise ValueError(f"{source}: {name}.{row} must map columns to numbers")
            for column, value in columns.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"{source}: {name}.{row}.{column} is {value!r}, not a number")
    return PaperValues(
        source=str(data.get("source", "")),
        labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
        tables={str(k): dict(v) for k, v in data["tables"].items()},
    )


def packaged_paper_values_path() -> Path:
    return Path(__file__).parent / "data" / "paper_values.yaml"


def load_paper_values(path: Path | None = None) -> PaperValues:
    import yaml

    path = Path(path) if path else packaged_paper_values_path()
    return parse_paper_values(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def compare(reproduced: Table, paper: PaperValues) -> Table:
    """ "Reproduced vs paper": one line per cell of the table, with the difference.

    The difference is taken between the printed (rounded) numbers, so a reader can
    check it by eye; it exists only where both sides have a value, otherwise it
    names the side that is missing.
    """
    rows, cells = [], {}
    labels = dict(reproduced.labels)
    for row in reproduced.rows:
        for column in reproduced.columns:
            key = f"{row}/{column}"
            ours = reproduced.cell(row, column)
            theirs = paper.cell(reproduced.name, row, column, ours.digits)
            if ours.value is None and theirs.value is None:
                continue  # neither side has it: nothing to compare
            rows.append(key)
            labels[key] = f"{reproduced.label(row)} · {reproduced.label(column)}"
            cells[(key, "reproduced")] = ours
            cells[(key, "paper")] = theirs
            cells[(key, "difference")] = difference(ours, theirs)
    return Table(
        name=f"{reproduced.name}_vs_paper",
        title=f"{reproduced.title}: reproduced vs paper",
        corner="cell",
        rows=rows,
        columns=["reproduced", "paper", "difference"],
        cells=cells,
        labels=labels,
        notes=[
            "difference = reproduced − paper, between the printed numbers.",
            *[note for note in reproduced.notes if note.startswith(STATISTICS_NOTE_PREFIX)],
            f"Paper: {paper.table(reproduced.name).get('source', '').strip()}",
        ],
        statistics=reproduced.statistics,
    )


def difference(ours: Cell, theirs: Cell) -> Cell:
    if ours.value is None:
        return missing(f"{ours.missing} here")
    if theirs.value is None:
        return missing(f"{theirs.missing} in paper")
    assert ours.rounded is not None and theirs.rounded is not None
    return Cell(
        value=ours.rounded - theirs.rounded,
        digits=ours.digits,
        signed=True,
        n_tasks=ours.n_tasks,
        n_runs=ours.n_runs,
        n_infra=ours.n_infra,
        sources=ours.sources,
    )
