"""Convert a prior dataset, read as it is published, into our task format: resolve its
source, list its tasks, draw a deterministic sample and convert each sampled task.

The sample is drawn from the task ids sorted, with ``random.Random`` seeded by the
workflow seed and the dataset's name, so the same config draws the same tasks on any
machine (the paper's Table 1 uses 250 tasks per dataset). A sampled task that cannot
be converted is skipped with its reason and kind (:data:`~tmax.datasets.base.SKIP_KINDS`),
never dropped silently and never a crash. The conversion fails only when nothing
converts, or when more than ``max_skipped_share`` of the drawn tasks (default
:data:`MAX_SKIPPED_SHARE`) are skipped: then the source, or its adapter, needs a look.

Output, under ``out_dir`` (``results/datasets/<dataset>/``)::

    tasks/<id>/      Harbor layout + tmax.json (its ``source`` block names the origin)
    manifest.json    dataset, layout, source, revision, has_environments, sample, seed,
                     found (tasks in the source), tasks [{id, instruction, path}],
                     skipped [{id, kind, reason}], skipped_by_kind {kind: count}
    report.md        counts, skips by kind and by reason, for people

Everything is written in a staging directory beside ``out_dir`` and renamed into
place, the manifest last: a crash never leaves a manifest over half-written tasks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from rich.progress import track

from tmax.datasets.base import (
    SKIP_KINDS,
    Adapter,
    ConvertContext,
    Converted,
    DatasetError,
    ResolvedSource,
    SourceTask,
    TaskSkipped,
    get_adapter,
    task_id,
)
from tmax.datasets.sources import resolve_source
from tmax.io import write_json, write_text
from tmax.tasks import TaskFormatError, TaskMeta, write_task

log = logging.getLogger("tmax.datasets.convert")

MAX_SKIPPED_SHARE = 0.5
"""The share of drawn tasks that may be skipped before a conversion fails (a source's
``max_skipped_share``, or ``--max-skipped-share``, overrides it)."""

ADAPTER_MODULES = (
    "base.py",
    "container_def.py",
    "convert.py",
    "endless_terminals.py",
    "folders.py",
    "harbor.py",
    "parquet_tarballs.py",
    "rows.py",
    "sources.py",
    "swe.py",
    "terminal_bench_v1.py",
    "tmax15k.py",
    "trajectories.py",
    "data/conversion.yaml",
)


def converter_fingerprint() -> str:
    """A hash of the conversion code and data: a workflow param, so editing an adapter
    reconverts the datasets and nothing else does."""
    digest = hashlib.sha256()
    package = resources.files("tmax.datasets")
    for name in ADAPTER_MODULES:
        digest.update(name.encode() + b"\0" + package.joinpath(name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def sample_ids(ids: Sequence[str], sample: int | None, seed: int, dataset: str) -> list[str]:
    """``sample`` of ``ids`` drawn without replacement from the sorted ids by
    ``random.Random(f"tmax-datasets/{seed}/{dataset}")``, returned sorted; all of them
    when ``sample`` is None or not smaller than their number."""
    ordered = sorted(ids)
    if sample is None or sample >= len(ordered):
        return ordered
    rng = random.Random(f"tmax-datasets/{seed}/{dataset}")
    return sorted(rng.sample(ordered, sample))


def _unique(items: Sequence[SourceTask]) -> tuple[dict[str, SourceTask], list[str]]:
    """Items by task id; an id seen again (a task twice in the source) keeps the first."""
    by_id: dict[str, SourceTask] = {}
    repeated: list[str] = []
    for item in items:
        tid = task_id(item.original_id)
        if tid in by_id:
            repeated.append(tid)
        else:
            by_id[tid] = item
    return by_id, repeated


def _meta(converted: Converted, item: SourceTask, context: ConvertContext, layout: str) -> TaskMeta:
    source: dict[str, Any] = {
        "dataset": context.dataset,
        "layout": layout,
        "original_id": item.original_id,
        "revision": context.source.revision,
        "location": context.source.description,
    }
    if converted.metadata:
        source["labels"] = converted.metadata
    return TaskMeta.from_source(**source)


def _convert_one(
    adapter: Adapter, item: SourceTask, tid: str, context: ConvertContext, tasks_dir: Path
) -> Converted:
    """Convert one task and write it (named ``tid``) with its ``tmax.json``."""
    if isinstance(item.ref, TaskSkipped):  # a defect seen while listing
        raise item.ref
    converted = adapter.convert(item, context)
    if converted.task is not None:
        task = converted.task
        task.name = tid
        name = task.config.task.get("name")
        if not isinstance(name, str) or name.count("/") != 1:
            task.config.task["name"] = f"{context.dataset}/{tid}"
        task.meta = _meta(converted, item, context, adapter.layout)
        write_task(task, tasks_dir)
    return converted


def _install(staging: Path, out_dir: Path) -> None:
    """Move the staged tasks/, report.md and manifest.json (last) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    old = None
    if (out_dir / "tasks").exists():
        old = out_dir / f".tasks.old-{os.getpid()}"
        os.replace(out_dir / "tasks", old)
    os.replace(staging / "tasks", out_dir / "tasks")
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    os.replace(staging / "report.md", out_dir / "report.md")
    os.replace(staging / "manifest.json", out_dir / "manifest.json")


def skip_entry(tid: str, error: Exception) -> dict[str, str]:
    """The manifest's record of one skipped task: its id, the kind of defect and the
    reason (the error's first line; an unforeseen error keeps its type)."""
    text = str(error).strip()
    reason = text.splitlines()[0] if text else type(error).__name__
    if isinstance(error, TaskSkipped):
        kind = error.kind
    elif isinstance(error, TaskFormatError):
        kind = "invalid"
    elif isinstance(error, OSError | UnicodeDecodeError):
        kind, reason = "unreadable", f"{type(error).__name__}: {reason}"
    else:
        kind, reason = "error", f"{type(error).__name__}: {reason}"
    return {"id": tid, "kind": kind, "reason": reason[:500]}


def skipped_by_kind(skipped: Sequence[Mapping[str, str]]) -> dict[str, int]:
    """Skipped tasks counted by kind, most frequent first."""
    counts = Counter(entry["kind"] for entry in skipped)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def check_skipped_share(
    name: str, converted: int, skipped: Sequence[Mapping[str, str]], limit: float
) -> None:
    """:class:`DatasetError` when nothing converted, or more than ``limit`` of the
    drawn tasks were skipped; the message names the share, the limit, the knob and
    the most common reasons."""
    drawn = converted + len(skipped)
    share = len(skipped) / drawn if drawn else 0.0
    if converted and share <= limit:
        return
    common = Counter((entry["kind"], entry["reason"]) for entry in skipped).most_common(3)
    reasons = "; ".join(f"{count}x {kind}: {reason}" for (kind, reason), count in common)
    if not converted:
        what = f"none of the {drawn} drawn task(s) converted"
    else:
        what = (
            f"{len(skipped)} of {drawn} drawn tasks skipped ({share:.0%}), over the limit of "
            f"{limit:.0%} (max_skipped_share in its datasets.sources entry, or "
            "--max-skipped-share)"
        )
    raise DatasetError(f"dataset {name!r}: {what}; most common: {reasons}")


def report_markdown(manifest: Mapping[str, Any], listed: int, repeated: int) -> str:
    """The human-readable summary of one conversion."""
    tasks, skipped = manifest["tasks"], manifest["skipped"]
    sample = manifest["sample"]
    source = manifest["source"]
    where = source.get("path") or source.get("git") or source.get("hf") or "?"
    lines = [
        f"# Dataset `{manifest['dataset']}`",
        "",
        f"- layout: `{manifest['layout']}`"
        + ("" if manifest["has_environments"] else " (no environments: instructions only)"),
        f"- source: {source.get('kind', '?')} `{where}`, revision `{manifest['revision']}`",
        f"- tasks in the source: {listed}"
        + (f" ({repeated} repeated id(s) counted once)" if repeated else ""),
        f"- sample: {'all' if sample is None else sample} (seed {manifest['seed']}), "
        f"drawn {len(tasks) + len(skipped)}",
        f"- converted: {len(tasks)}, skipped: {len(skipped)}",
        "",
    ]
    if skipped:
        lines += ["## Skips by kind", "", "| kind | tasks | what it means |", "|---|---:|---|"]
        for kind, count in manifest["skipped_by_kind"].items():
            lines.append(f"| {kind} | {count} | {SKIP_KINDS[kind]} |")
        lines += ["", "## Skip reasons", "", "| reason | tasks |", "|---|---:|"]
        counts = Counter(entry["reason"] for entry in skipped)
        for reason, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"| {reason.replace('|', '/')} | {count} |")
        lines += ["", "## Skipped tasks", ""]
        lines += [f"- `{entry['id']}`: {entry['reason']}" for entry in skipped]
        lines.append("")
    return "\n".join(lines)


def prepare_dataset(
    entry: Mapping[str, Any],
    out_dir: str | Path,
    *,
    seed: int,
    sample: int | None,
    max_skipped_share: float | None = None,
) -> dict[str, Any]:
    """Convert the dataset of one ``datasets.sources`` entry into ``out_dir`` (see the
    module docstring) and return its manifest. ``sample`` None converts every task;
    ``max_skipped_share`` None takes the entry's, else :data:`MAX_SKIPPED_SHARE`."""
    name, layout = str(entry["name"]), str(entry["layout"])
    if max_skipped_share is None:
        max_skipped_share = float(entry.get("max_skipped_share", MAX_SKIPPED_SHARE))
    if not 0.0 <= max_skipped_share <= 1.0:
        raise DatasetError(
            f"dataset {name!r}: max_skipped_share {max_skipped_share} is not a share "
            "between 0 and 1"
        )
    out_dir = Path(out_dir)
    adapter = get_adapter(layout)
    source: ResolvedSource = resolve_source(entry)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.staging-", dir=out_dir.parent))
    try:
        (staging / "tasks").mkdir()
        (staging / "scratch").mkdir()
        context = ConvertContext(
            name, source, dict(entry.get("columns") or {}), staging / "scratch"
        )
        items = adapter.list_tasks(context)
        if not items:
            raise DatasetError(
                f"dataset {name!r}: no tasks of layout {layout!r} found in {source.root}"
            )
        by_id, repeated = _unique(items)
        chosen = sample_ids(list(by_id), sample, seed, name)
        log.info("%s: %d task(s) in the source, converting a sample of %d", name, len(by_id),
                 len(chosen))  # fmt: skip
        tasks: list[dict[str, Any]] = []
        skipped: list[dict[str, str]] = []
        for tid in track(chosen, description=f"converting {name}", disable=len(chosen) < 20):
            try:
                converted = _convert_one(adapter, by_id[tid], tid, context, staging / "tasks")
            except Exception as error:  # one broken task is recorded, never a crash
                skipped.append(skip_entry(tid, error))
                log.warning("%s: skipped %s (%s): %s", name, tid, skipped[-1]["kind"],
                            skipped[-1]["reason"])  # fmt: skip
                continue
            path = f"tasks/{tid}" if converted.task is not None else None
            tasks.append({"id": tid, "instruction": converted.instruction, "path": path})
        manifest = {
            "dataset": name,
            "layout": layout,
            "source": source.description,
            "revision": source.revision,
            "has_environments": bool(adapter.has_environments),
            "sample": sample,
            "seed": seed,
            "found": len(by_id),
            "tasks": tasks,
            "skipped": skipped,
            "skipped_by_kind": skipped_by_kind(skipped),
        }
        check_skipped_share(name, len(tasks), skipped, max_skipped_share)
        write_text(staging / "report.md", report_markdown(manifest, len(by_id), len(repeated)))
        write_json(staging / "manifest.json", manifest)
        shutil.rmtree(staging / "scratch", ignore_errors=True)
        _install(staging, out_dir)
        log.info("%s: %d converted, %d skipped -> %s", name, len(tasks), len(skipped), out_dir)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def source_entry(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The ``datasets.sources`` entry called ``name`` of a validated config."""
    sources = config.get("datasets", {}).get("sources", [])
    for entry in sources:
        if entry.get("name") == name:
            return dict(entry)
    known = ", ".join(str(e.get("name")) for e in sources) or "none configured"
    raise DatasetError(f"no dataset named {name!r} in datasets.sources ({known})")
