"""Measuring a converted prior dataset as the workflow runs it
(rules/datasets_measure.smk), for the dataset-comparison table:

1. ``label_dataset``: ``manifest.json`` -> ``labels.json`` (taxonomy labels of every
   task and the balance score exp(H)/N on the domain and skill-type axes);
2. ``dataset_difficulty``: ``manifest.json`` -> ``difficulty.json`` (pass@1 and
   pass@8 of a reference model on the dataset's sample);
3. ``dataset_decontam``: ``manifest.json`` -> ``decontam.json`` (the word n-gram
   check the generated tasks go through, same benchmarks and n, on every converted
   task's files, or on the instruction alone where the dataset has no environments).

The manifest is the dataset adapters' output: ``dataset``, ``has_environments``,
``tasks`` (``id``, ``instruction``, ``path`` relative to the manifest's folder or
null) and ``skipped``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.datasets.difficulty import DifficultySettings, measure_difficulty
from tmax.datasets.labels import (
    LabelClient,
    LabelInput,
    LabelSettings,
    label_tasks,
    labels_document,
)
from tmax.decontam.stage import check_texts
from tmax.decontam.texts import Text, task_dir_texts
from tmax.generate.llm.cache import CallCache
from tmax.io import write_json
from tmax.models.client import ChatModel
from tmax.taxonomy.model import load_taxonomy

log = logging.getLogger("tmax.datasets")


class ManifestError(ValueError):
    """A dataset manifest without the keys the measurements need (names which)."""


def read_manifest(path: Path) -> dict[str, Any]:
    """Load ``manifest.json`` and check the keys used here."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ManifestError(f"{path}: cannot be read as JSON: {error}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a JSON object")
    for key, kind in (("dataset", str), ("has_environments", bool), ("tasks", list)):
        if not isinstance(data.get(key), kind):
            raise ManifestError(f"{path}: '{key}' must be a {kind.__name__}")
    for index, task in enumerate(data["tasks"]):
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            raise ManifestError(f"{path}: tasks[{index}] needs a string 'id'")
        if not isinstance(task.get("instruction"), str):
            raise ManifestError(f"{path}: tasks[{index}] ({task['id']}) needs an 'instruction'")
    return data


def label_inputs(manifest: Mapping[str, Any], dataset_dir: Path) -> list[LabelInput]:
    return [
        LabelInput(
            id=task["id"],
            instruction=task["instruction"],
            task_dir=dataset_dir / task["path"] if task.get("path") else None,
        )
        for task in manifest["tasks"]
    ]


def label_dataset(
    manifest_path: Path,
    output: Path,
    settings: LabelSettings,
    *,
    taxonomy_path: str | Path | None = None,
    workdir: Path = Path("."),
    model: ChatModel | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``labels.json`` for one dataset; returns it. ``model`` replaces the
    configured endpoint (tests)."""
    manifest = read_manifest(manifest_path)
    taxonomy = load_taxonomy(taxonomy_path)
    client = None
    if settings.off_reason is None or model is not None:
        cache = CallCache(settings.cache_path(workdir))
        client = LabelClient(settings, cache, taxonomy.digest, model)
    labels = label_tasks(
        label_inputs(manifest, manifest_path.parent),
        taxonomy,
        client,
        max_retries=settings.max_retries,
        concurrency=settings.concurrency,
        off_reason=settings.off_reason,
        progress=progress,
    )
    document = labels_document(manifest["dataset"], labels, taxonomy, settings, client)
    write_json(output, document)
    if client is not None:
        log.info("labeller calls: %s; cache %s", client.totals.to_dict(), client.cache.stats())
    return document


def dataset_difficulty(
    manifest_path: Path,
    output: Path,
    settings: DifficultySettings,
    *,
    model_dir: Path | None = None,
    server_log: Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``difficulty.json`` for one dataset; returns it."""
    manifest = read_manifest(manifest_path)
    document = measure_difficulty(
        manifest,
        manifest_path.parent,
        settings,
        model_dir=model_dir,
        server_log=server_log,
        progress=progress,
    )
    write_json(output, document)
    return document


def manifest_texts(manifest: Mapping[str, Any], dataset_dir: Path) -> list[Text]:
    """Every checked text of a dataset's tasks: a converted task's files, or the
    instruction alone for a task without a folder."""
    texts = []
    for task in manifest["tasks"]:
        task_dir = dataset_dir / task["path"] if task.get("path") else None
        texts += task_dir_texts(task["id"], task["instruction"], task_dir)
    return texts


def dataset_decontam(
    manifest_path: Path,
    benchmarks: Sequence[tuple[str, Path, Path]],
    report_json: Path,
    report_md: Path | None,
    *,
    ngram_sizes: Sequence[int],
    boilerplate_min_items: int,
    workers: int | None = None,
    self_test_leaks: int = 20,
    seed: int = 0,
) -> dict[str, Any]:
    """Write ``decontam.json`` (and its Markdown unless ``report_md`` is None) for one
    dataset: the paper's contamination check (§3.3) on the sampled tasks, as for the
    generated ones. The workflow runs it once per n and merges the parts
    (:func:`tmax.decontam.stage.merge_reports`)."""
    manifest = read_manifest(manifest_path)
    texts = manifest_texts(manifest, manifest_path.parent)
    log.info("%s: checking %d text(s) of %d task(s)", manifest["dataset"], len(texts),
             len(manifest["tasks"]))  # fmt: skip
    return check_texts(
        texts, benchmarks, ngram_sizes=ngram_sizes, boilerplate_min_items=boilerplate_min_items,
        report_json=report_json, report_md=report_md, dataset=manifest["dataset"],
        workers=workers, self_test_leaks=self_test_leaks, seed=seed,
    )  # fmt: skip
