"""A Parquet table whose rows hold gzipped task tarballs (OpenThoughts-Agent-v1-RL:
``tasks.parquet`` with the task's path in ``path`` and the tarball's bytes in
``task_binary``). Each tarball holds one Harbor task folder (or its files directly)
and is converted as a Harbor task (:mod:`tmax.datasets.harbor`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tmax.datasets.base import (
    ConvertContext,
    Converted,
    DatasetError,
    SourceTask,
    TaskSkipped,
    column,
    first_present,
    register,
)
from tmax.datasets.folders import unpack_bytes
from tmax.datasets.harbor import harbor_task, source_labels
from tmax.datasets.rows import UnreadableRow, read_rows, row_tasks

ID_COLUMNS = ("path", "task_id", "id", "name")
TARBALL_COLUMNS = ("task_binary", "tarball", "task_tarball")


def _only_task_folder(root: Path) -> Path:
    """The task folder inside an unpacked tarball: the root itself, or its only folder."""
    if (root / "task.toml").is_file():
        return root
    candidates = [p.parent for p in sorted(root.rglob("task.toml"))]
    if len(candidates) != 1:
        raise TaskSkipped(
            f"the tarball holds {len(candidates)} task.toml files, not one", "malformed"
        )
    return candidates[0]


@register("parquet_tarballs")
class ParquetTarballsAdapter:
    """Rows of (id, gzipped tarball of a Harbor task)."""

    layout = "parquet_tarballs"
    has_environments = True

    def __init__(self) -> None:
        self._rows: list[dict] = []

    def _columns(self, context: ConvertContext, row: dict) -> tuple[str, str]:
        ids = column(context.columns, "id", ID_COLUMNS)
        tarballs = column(context.columns, "tarball", TARBALL_COLUMNS)
        id_name, tarball_name = first_present(row, ids), first_present(row, tarballs)
        if id_name is None or tarball_name is None:
            missing = "id" if id_name is None else "tarball"
            tried = ids if id_name is None else tarballs
            raise DatasetError(
                f"dataset {context.dataset!r}: no {missing} column (tried {', '.join(tried)}; "
                f"set columns.{missing}); the table has {', '.join(sorted(row))}"
            )
        return id_name, tarball_name

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        self._rows = read_rows(context)
        readable = [row for row in self._rows if not isinstance(row, UnreadableRow)]
        if not readable:
            return row_tasks(context, self._rows, lambda row: None, "")
        id_name, _ = self._columns(context, readable[0])
        return row_tasks(context, self._rows, lambda row: row.get(id_name), id_name)

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        row = self._rows[item.ref]
        _, tarball_name = self._columns(context, row)
        data = row[tarball_name]
        if isinstance(data, str):
            data = data.encode("latin-1")
        if not isinstance(data, bytes | bytearray) or not data:
            raise TaskSkipped(f"column {tarball_name!r} holds no tarball bytes", "missing")
        with tempfile.TemporaryDirectory(dir=context.scratch) as scratch:
            unpack_bytes(bytes(data), Path(scratch), f"row {item.ref} ({item.original_id})")
            task = harbor_task(_only_task_folder(Path(scratch)), item.original_id)
        return Converted(task.instruction, task, source_labels(task.config))
