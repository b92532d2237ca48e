"""Helpers of the dataset-adapter tests: the fixture sources and one conversion."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture(autouse=True)
def private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Unpacked archives go to this session's own cache (import it to use it)."""
    monkeypatch.setenv("TMAX_CACHE", str(tmp_path_factory.getbasetemp() / "tmax-cache"))
    yield


def skip_reasons(manifest: dict[str, Any]) -> dict[str, str]:
    return {entry["id"]: entry["reason"] for entry in manifest["skipped"]}


def tarball(folder: Path, wrap: bool = True) -> bytes:
    """A gzipped tarball of a task folder (inside a folder of its name, or flat)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if wrap:
            tar.add(folder, arcname=folder.name)
        else:
            for child in sorted(folder.iterdir()):
                tar.add(child, arcname=child.name)
    return buffer.getvalue()
