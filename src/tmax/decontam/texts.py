"""The texts compared, field by field, on both sides of the contamination check.

A generated task contributes its instruction and every text file it ships
(``environment/…``, ``tests/…``, ``solution/…``); a benchmark item contributes what
the benchmark publishes: its instruction, and its tests and solution where it ships
them. Binary files (a NUL byte, or not UTF-8) carry no words and are skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tmax.io import atomic_path, write_json
from tmax.tasks import read_task

log = logging.getLogger("tmax.decontam")

MAX_FILE_BYTES = 4 * 1024 * 1024
"""Larger files (data dumps, vendored code) are skipped: they are not task text."""

BENCHMARK_FIELDS = ("instruction", "tests/", "solution/")
"""What of a benchmark item is compared: the instruction, and tests and solution files."""

TEXT_SCHEMA = pa.schema([("item", pa.string()), ("field", pa.string()), ("text", pa.string())])


@dataclass(frozen=True)
class Text:
    """One field of one task or benchmark item."""

    owner: str
    field: str
    text: str


def decode_text(data: bytes) -> str | None:
    """A file's text, or None for binary (NUL bytes, not UTF-8) and oversized files."""
    if len(data) > MAX_FILE_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def task_texts(row: Mapping[str, Any]) -> Iterator[Text]:
    """The fields of one exported task (a row of ``tasks.parquet``)."""
    task_id = row["task_id"]
    yield Text(task_id, "instruction", row["instruction"])
    for entry in row["files"]:
        text = decode_text(entry["data"])
        if text is not None:
            yield Text(task_id, entry["path"], text)


def task_dir_texts(task_id: str, instruction: str, task_dir: Path | None) -> Iterator[Text]:
    """The fields of a task folder (a converted prior dataset's task), as for an
    exported task: the instruction and every environment, tests and solution file.
    Without a folder (a dataset that ships trajectories only) the instruction alone."""
    files = []
    if task_dir is not None:
        task = read_task(task_dir)
        groups = (("environment", task.environment), ("tests", task.tests),
                  ("solution", task.solution or {}))  # fmt: skip
        for group, entries in groups:
            for rel, entry in sorted(entries.items()):
                files.append({"path": f"{group}/{rel}", "data": entry.data})
    yield from task_texts({"task_id": task_id, "instruction": instruction, "files": files})


def read_task_texts(tasks_parquet: Path) -> list[Text]:
    table = pq.read_table(tasks_parquet, columns=["task_id", "instruction", "files"])
    return [text for row in table.to_pylist() for text in task_texts(row)]


def harbor_item_texts(task_dirs: Iterable[Path]) -> Iterator[Text]:
    """Instruction, tests and solution of each benchmark task directory."""
    for task_dir in task_dirs:
        task = read_task(task_dir)
        yield Text(task.name, "instruction", task.instruction)
        groups = (("tests", task.tests), ("solution", task.solution or {}))
        for group, files in groups:
            for rel, entry in sorted(files.items()):
                text = decode_text(entry.data)
                if text is not None:
                    yield Text(task.name, f"{group}/{rel}", text)


def write_benchmark_texts(
    texts: Sequence[Text], output: Path, manifest: Path, info: Mapping[str, Any]
) -> None:
    """The loaded benchmark, cached under results/ with where it came from."""
    table = pa.Table.from_pylist(
        [{"item": t.owner, "field": t.field, "text": t.text} for t in texts], schema=TEXT_SCHEMA
    )
    with atomic_path(output) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    items = len({t.owner for t in texts})
    write_json(manifest, {**info, "n_items": items, "n_texts": len(texts)})


def read_benchmark_texts(path: Path) -> list[Text]:
    return [Text(row["item"], row["field"], row["text"]) for row in pq.read_table(path).to_pylist()]
