"""Sampling and output: the same seed draws the same tasks anywhere, the manifest has
exactly the shape its readers expect, and a rerun replaces the output whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.datasets.adapter_support import (
    DATASET_FIXTURES,
    convert,
    out_dir,
    private_cache,  # noqa: F401  (autouse)
)
from tmax.cli import main as tmax_main
from tmax.datasets.base import DatasetError, task_id
from tmax.datasets.convert import converter_fingerprint, sample_ids

MANIFEST_KEYS = {
    "dataset",
    "layout",
    "source",
    "revision",
    "has_environments",
    "sample",
    "seed",
    "found",
    "tasks",
    "skipped",
    "skipped_by_kind",
}


def many_harbor_tasks(root: Path, count: int) -> Path:
    """``count`` copies of the Harbor fixture task under ``root``."""
    for index in range(count):
        shutil.copytree(DATASET_FIXTURES / "harbor/tasks/count-words", root / f"task-{index:02d}")
    return root


def test_sample_is_deterministic_sorted_and_seeded() -> None:
    ids = [f"t{i:03d}" for i in range(100)]
    first = sample_ids(list(reversed(ids)), 10, seed=1, dataset="d")
    assert first == sample_ids(ids, 10, seed=1, dataset="d")  # input order is irrelevant
    assert first == sorted(first) and len(set(first)) == 10
    assert first != sample_ids(ids, 10, seed=2, dataset="d")
    assert first != sample_ids(ids, 10, seed=1, dataset="other")
    assert sample_ids(ids, None, seed=1, dataset="d") == ids
    assert sample_ids(ids[:5], 10, seed=1, dataset="d") == ids[:5]


def test_a_conversion_samples_the_same_tasks_twice(tmp_path: Path) -> None:
    source = many_harbor_tasks(tmp_path / "src", 12)
    first = convert(tmp_path, "harbor", source, sample=4)
    ids = [t["id"] for t in first["tasks"]]
    assert sorted(p.name for p in (out_dir(tmp_path) / "tasks").iterdir()) == ids
    second = convert(tmp_path, "harbor", source, sample=4)
    assert len(ids) == 4 and ids == [t["id"] for t in second["tasks"]]
    assert (first["sample"], first["seed"]) == (4, 7)
    other_seed = convert(tmp_path, "harbor", source, sample=4, seed=8)
    assert [t["id"] for t in other_seed["tasks"]] != ids


def test_manifest_has_exactly_the_agreed_shape(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "harbor", DATASET_FIXTURES / "harbor")
    saved = json.loads((out_dir(tmp_path) / "manifest.json").read_text())
    assert saved == manifest and set(saved) == MANIFEST_KEYS
    assert saved["source"]["kind"] == "path" and saved["revision"].startswith("sha256:")
    assert saved["has_environments"] is True and saved["sample"] is None
    for entry in saved["tasks"]:
        assert set(entry) == {"id", "instruction", "path"}
    for entry in saved["skipped"]:
        assert set(entry) == {"id", "kind", "reason"}
    assert saved["found"] == 2 and saved["skipped_by_kind"] == {"missing": 1}


def test_revision_of_a_local_folder_follows_its_content(tmp_path: Path) -> None:
    source = many_harbor_tasks(tmp_path / "src", 1)
    before = convert(tmp_path, "harbor", source)["revision"]
    assert convert(tmp_path, "harbor", source)["revision"] == before
    (source / "task-00" / "instruction.md").write_text("Something else.\n")
    assert convert(tmp_path, "harbor", source)["revision"] != before


def test_rerun_replaces_the_output_whole(tmp_path: Path) -> None:
    source = many_harbor_tasks(tmp_path / "src", 3)
    convert(tmp_path, "harbor", source)
    shutil.rmtree(source / "task-02")
    manifest = convert(tmp_path, "harbor", source)
    assert [p.name for p in sorted((out_dir(tmp_path) / "tasks").iterdir())] == [
        "task-00",
        "task-01",
    ]
    assert len(manifest["tasks"]) == 2
    leftovers = [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]
    assert leftovers == []  # the staging directory is gone


def test_a_source_with_no_tasks_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="'fx': no tasks of layout 'harbor'"):
        convert(tmp_path, "harbor", tmp_path / "empty")
    assert not out_dir(tmp_path).exists()


def test_unknown_layout_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown layout 'folders'; choose one of: harbor"):
        convert(tmp_path, "folders", tmp_path)


def test_task_ids_are_folder_names() -> None:
    assert task_id("count-words") == "count-words"
    slug = task_id("nl2bash/count words")
    assert slug.startswith("nl2bash-count-words-") and "/" not in slug
    assert task_id("a/b") != task_id("a:b")  # the same slug, told apart by the hash


def test_fingerprint_is_stable() -> None:
    assert converter_fingerprint() == converter_fingerprint()
    assert len(converter_fingerprint()) == 16


def test_cli_converts_a_local_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli"
    code = tmax_main(["datasets", "convert", "fx", "--layout", "terminal_bench_v1",
                      "--path", str(DATASET_FIXTURES / "terminal_bench_v1"),
                      "--out", str(out), "--sample", "1", "--seed", "5"])  # fmt: skip
    assert code == 0
    assert "task(s) converted" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["sample"], manifest["seed"]) == (1, 5)
    assert [t["id"] for t in manifest["tasks"]] == ["sum-numbers"]


def test_cli_fails_when_nothing_converts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tmax_main(["datasets", "convert", "fx", "--layout", "terminal_bench_v1",
                      "--path", str(DATASET_FIXTURES / "terminal_bench_v1"),
                      "--out", str(tmp_path / "cli"), "--sample", "1", "--seed", "3"])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert "none of the 1 drawn task(s) converted" in error
    assert "1x missing: missing run-tests.sh" in error
    assert not (tmp_path / "cli" / "manifest.json").exists()


def test_too_many_skips_fail_and_name_the_knob(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = DATASET_FIXTURES / "terminal_bench_v1"  # one of its two tasks is skipped
    args = ["datasets", "convert", "fx", "--layout", "terminal_bench_v1", "--path", str(source),
            "--out", str(tmp_path / "cli")]  # fmt: skip
    assert tmax_main([*args, "--max-skipped-share", "0.4"]) == 2
    error = capsys.readouterr().err
    assert "1 of 2 drawn tasks skipped (50%), over the limit of 40%" in error
    assert "max_skipped_share" in error and "--max-skipped-share" in error
    assert "missing run-tests.sh" in error
    assert tmax_main(args) == 0  # the default allows half
    with pytest.raises(DatasetError, match="over the limit of 40%"):
        convert(tmp_path, "terminal_bench_v1", source, max_skipped_share=0.4)


def test_cli_reports_a_missing_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = tmax_main(["datasets", "convert", "fx", "--layout", "harbor",
                      "--path", str(tmp_path / "nowhere")])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert "dataset 'fx': path" in error and "does not exist" in error
