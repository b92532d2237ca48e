"""Rows of table-shaped sources: Parquet, JSON Lines or a JSON list, as the Hugging Face
Hub publishes them. Every row keeps a stable index (file order, then row order), which
is how an adapter finds a sampled row again. A line or row that does not parse is kept
in its place as an :class:`UnreadableRow`, listed as one skipped task."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tmax.datasets.base import ConvertContext, DatasetError, SourceTask, TaskSkipped


class UnreadableRow(dict[str, Any]):
    """A row that does not parse (an empty mapping that says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


TABLE_SUFFIXES = (".parquet", ".jsonl", ".json")


def table_files(context: ConvertContext) -> list[Path]:
    """The source's table files: those the ``files`` glob selected, else every
    Parquet/JSONL/JSON file under the root (hidden folders left out)."""
    source = context.source
    if source.files is not None:
        candidates = list(source.files)
    else:
        candidates = [
            path
            for path in sorted(source.root.rglob("*"))
            if not any(part.startswith(".") for part in path.relative_to(source.root).parts)
        ]
    found = [p for p in candidates if p.is_file() and p.name.lower().endswith(TABLE_SUFFIXES)]
    if not found:
        raise DatasetError(
            f"dataset {context.dataset!r}: no Parquet/JSONL/JSON files in {source.root}"
            + (" matching the `files` glob" if source.files is not None else "")
        )
    return found


def _json_rows(path: Path, label: str) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.name.lower().endswith(".jsonl"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    rows.append(UnreadableRow(f"{path.name} line {number}: not JSON ({error})"))
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DatasetError(f"{label}: {path.name}: {error}") from None
    if isinstance(data, dict):  # {"rows": [...]} or {"data": [...]}
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise DatasetError(f"{label}: {path.name} holds no list of rows")
    return data


def read_rows(context: ConvertContext, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row of the source's table files; ``columns`` limits Parquet reads to the
    columns named (those a file lacks are left out)."""
    label = f"dataset {context.dataset!r}"
    rows: list[dict[str, Any]] = []
    for path in table_files(context):
        if path.name.lower().endswith(".parquet"):
            try:
                names = set(pq.read_schema(path).names)
                wanted = [c for c in columns if c in names] if columns is not None else None
                rows += pq.read_table(path, columns=wanted).to_pylist()
            except (OSError, ValueError) as error:
                raise DatasetError(
                    f"{label}: {path.name} is not readable Parquet: {error}"
                ) from None
        else:
            rows += _json_rows(path, label)
    return [
        row if isinstance(row, dict) else UnreadableRow(f"row {index} is not an object")
        for index, row in enumerate(rows)
    ]


def row_tasks(
    context: ConvertContext, rows: list[dict[str, Any]], id_of: Callable[[dict[str, Any]], Any],
    tried: str,
) -> list[SourceTask]:  # fmt: skip
    """One task per row, its id ``id_of(row)`` and its ref the row's index; a row that
    does not parse or has no id is listed as skipped (``row-<index>``). That no row has
    an id is the config's fault (``columns.id``), and an error."""
    items = []
    for index, row in enumerate(rows):
        value = None if isinstance(row, UnreadableRow) else id_of(row)
        if isinstance(row, UnreadableRow):
            items.append(SourceTask(f"row-{index}", TaskSkipped(row.reason, "malformed")))
        elif value in (None, ""):
            why = TaskSkipped(f"row {index} has no id (tried {tried})", "missing")
            items.append(SourceTask(f"row-{index}", why))
        else:
            items.append(SourceTask(str(value), index))
    readable = [row for row in rows if not isinstance(row, UnreadableRow)]
    if readable and all(isinstance(item.ref, TaskSkipped) for item in items):
        raise DatasetError(
            f"dataset {context.dataset!r}: no row has an id column (tried {tried}; set "
            f"columns.id); the first row has {', '.join(sorted(readable[0])) or 'no columns'}"
        )
    return items
