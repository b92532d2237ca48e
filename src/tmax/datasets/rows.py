"""Rows of table-shaped sources: Parquet, JSON Lines or a JSON list, as the Hugging Face
Hub publishes them. Every row keeps a stable index (file order, then row order), which
is how an adapter finds a sampled row again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tmax.datasets.base import ConvertContext, DatasetError

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
                    raise DatasetError(f"{label}: {path.name} line {number}: {error}") from None
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
    bad = next((i for i, row in enumerate(rows) if not isinstance(row, dict)), None)
    if bad is not None:
        raise DatasetError(f"{label}: row {bad} is not an object")
    return rows
