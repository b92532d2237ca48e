"""Helpers of the dataset-adapter tests: the fixture sources and one conversion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tmax.datasets.convert import prepare_dataset

DATASET_FIXTURES = ROOT / "tests" / "fixtures" / "datasets"


def convert(
    tmp_path: Path,
    layout: str,
    path: Path | str,
    *,
    sample: int | None = None,
    seed: int = 7,
    name: str = "fx",
    **entry: Any,
) -> dict[str, Any]:
    """Convert a source (config-entry keys as arguments) into ``tmp_path/out/<name>``."""
    source = {"name": name, "layout": layout, "path": str(path), **entry}
    return prepare_dataset(source, out_dir(tmp_path, name), seed=seed, sample=sample)


def out_dir(tmp_path: Path, name: str = "fx") -> Path:
    return tmp_path / "out" / name


def tmax_json(task_dir: Path) -> dict[str, Any]:
    return json.loads((task_dir / "tmax.json").read_text())
