"""Helpers of the dataset-decontamination and RL-dataset-ablation tests: a local
Harbor-layout dataset with one task that copies a benchmark's instruction, and the
fixture tasks that stand in for TB-Lite and Terminal-Bench 2.0."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURE_TASKS
from tests.datasets.adapter_support import DATASET_FIXTURES

CLEAN_TASK = "count-words"
LEAKY_TASK = "copied-benchmark-task"
LEAKED_ITEM = "count-error-lines"
"""The fixture benchmark item whose instruction the leaky task copies word for word."""
BENCHMARK_SOURCES: dict[str, dict[str, Any]] = {
    "terminal-bench-2.0": {"path": str(FIXTURE_TASKS)},
    "tb-lite": {"path": str(FIXTURE_TASKS)},
}


def leaky_dataset_source(root: Path) -> Path:
    """A Harbor source folder: the clean fixture task, and a copy of it whose
    instruction is a benchmark item's (a contaminated training task)."""
    tasks = root / "tasks"
    clean = DATASET_FIXTURES / "harbor" / "tasks" / CLEAN_TASK
    shutil.copytree(clean, tasks / CLEAN_TASK)
    leaky = tasks / LEAKY_TASK
    shutil.copytree(clean, leaky)
    (leaky / "instruction.md").write_text(
        (FIXTURE_TASKS / LEAKED_ITEM / "instruction.md").read_text()
    )
    toml = (leaky / "task.toml").read_text()
    (leaky / "task.toml").write_text(
        re.sub(r'name = ".*"', f'name = "fixture-org/{LEAKY_TASK}"', toml)
    )
    return tasks


def dataset_entry(name: str, root: Path) -> dict[str, Any]:
    """The ``datasets.sources`` entry of the leaky dataset."""
    return {"name": name, "layout": "harbor", "path": str(leaky_dataset_source(root))}
