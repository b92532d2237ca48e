"""The generator's fingerprint (a rule param) follows every file a task is rendered from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tmax.generate import fingerprint

SOURCE = Path(fingerprint.__file__).resolve().parents[1]  # src/tmax


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "tmax"
    shutil.copytree(SOURCE / "generate", copy / "generate")
    shutil.copytree(SOURCE / "tasks", copy / "tasks")
    shutil.copytree(SOURCE / "sandbox" / "definitions", copy / "sandbox" / "definitions")
    monkeypatch.setattr(fingerprint, "definitions_dir", lambda: copy / "sandbox" / "definitions")
    monkeypatch.setattr(fingerprint, "_PACKAGE", copy / "generate")
    monkeypatch.setattr(fingerprint, "_ROOT", copy)
    return copy / "generate"


@pytest.mark.parametrize(
    "path",
    [
        "families/easy/tests/test_task.py",
        "families/easy/solution/solve.sh",
        "families/easy/instruction.md",
        "templates.py",
        "builders.py",
        "families/personas.yaml",
    ],
)
def test_editing_a_template_or_its_renderer_changes_the_fingerprint(
    package: Path, path: str
) -> None:
    before = fingerprint.generator_fingerprint()
    target = package / path
    target.write_text(target.read_text() + "\n")
    assert fingerprint.generator_fingerprint() != before


def test_a_compiled_cache_does_not(package: Path) -> None:
    before = fingerprint.generator_fingerprint()
    cache = package / "families" / "easy" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "x.cpython-311.pyc").write_bytes(b"\0")
    assert fingerprint.generator_fingerprint() == before
