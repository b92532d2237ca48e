"""Prior datasets as they really are: each defect found in third-party sources (a text
file named ``.tar.gz`` in a task's data, a truncated packaged task, a link out of the
task, a huge binary, a task.toml/task.yaml/task.json that does not parse, a missing
instruction, a JSON line that does not parse) costs that one task, with its kind and
reason in the manifest, and never the dataset; for every layout that can hold it."""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.datasets.adapter_support import (
    DATASET_FIXTURES,
    convert,
    out_dir,
    private_cache,  # noqa: F401  (autouse)
    tarball,
)
from tmax.datasets import folders
from tmax.tasks import read_task

PROSE = b"Incident notes, 14 March: the disk image was copied twice before analysis.\n"


@dataclass(frozen=True)
class Layout:
    """Where a folder layout keeps what a defect spoils: a good fixture task, its data
    folder, its config file and a malformed text of it, how to lose its instruction,
    and the file an adapter reads the instruction from."""

    good: Path
    data: str
    config: str
    malformed: str
    no_instruction: Callable[[Path], None]
    instruction: str


def _write(path: Path, text: str) -> None:
    path.write_text(text)


FOLDER_LAYOUTS = {
    "harbor": Layout(
        DATASET_FIXTURES / "harbor/tasks/count-words", "environment/data", "task.toml",
        '[task\nname = "x"\n', lambda task: (task / "instruction.md").unlink(), "instruction.md",
    ),
    "terminal_bench_v1": Layout(
        DATASET_FIXTURES / "terminal_bench_v1/tasks/sum-numbers", "data",
        "task.yaml", "instruction: [unclosed\n",
        lambda task: _write(task / "task.yaml", "difficulty: easy\n"), "task.yaml",
    ),
    "endless_terminals": Layout(
        DATASET_FIXTURES / "endless_terminals/tasks/task_000001_0a1b2c3d",
        "fixtures", "task.json", '{"description": ',
        lambda task: _write(task / "task.json", '{"truth": "x"}'), "task.json",
    ),
}  # fmt: skip
FOLDER_NAMES = list(FOLDER_LAYOUTS)


def with_good_task(source: Path, layout: Layout) -> Path:
    """``source`` holding the layout's good fixture task as ``good``."""
    shutil.copytree(layout.good, source / "good")
    return source


def spoil(task: Path, layout: Layout, defect: str, outside: Path) -> None:
    """Give one task folder one of the defects seen in real sources."""
    if defect == "fake-archive":  # a data file named like an archive, holding prose
        (task / layout.data).mkdir(parents=True, exist_ok=True)
        (task / layout.data / "artifacts.tar.gz").write_bytes(PROSE)
    elif defect == "link-out":  # a link out of the task, where the adapter reads
        outside.write_text("not this task's file\n")
        target = task / layout.instruction
        target.unlink()
        target.symlink_to(outside)
    elif defect == "huge":  # sparse: over the size limit without filling the disk
        (task / layout.data).mkdir(parents=True, exist_ok=True)
        with (task / layout.data / "dump.bin").open("wb") as handle:
            handle.truncate(folders.size_limits()[0] + 1)
    elif defect == "malformed":
        (task / layout.config).write_text(layout.malformed)
    elif defect == "no-instruction":
        layout.no_instruction(task)
    else:
        raise AssertionError(defect)


SKIPPED_AS = {
    "link-out": "escaping",
    "huge": "oversize",
    "malformed": "malformed",
    "no-instruction": "missing",
}


def kinds(manifest: dict) -> dict[str, str]:
    return {entry["id"]: entry["kind"] for entry in manifest["skipped"]}


def unpacked_now() -> set[str]:
    """What the cache holds unpacked (this session's cache, shared by its tests)."""
    parent = Path(os.environ["TMAX_CACHE"]) / "datasets" / "unpacked"
    return {p.name for p in parent.glob("[!.]*")} if parent.is_dir() else set()


@pytest.mark.parametrize("defect", [*SKIPPED_AS, "fake-archive"])
@pytest.mark.parametrize("layout_name", FOLDER_NAMES)
def test_a_defective_task_folder_costs_one_task(
    layout_name: str, defect: str, tmp_path: Path
) -> None:
    layout = FOLDER_LAYOUTS[layout_name]
    source = with_good_task(tmp_path / "src", layout)
    bad = Path(shutil.copytree(layout.good, source / "bad"))
    spoil(bad, layout, defect, tmp_path / "secret.txt")
    before = unpacked_now()
    manifest = convert(tmp_path, layout_name, source)
    converted = [t["id"] for t in manifest["tasks"]]
    if defect == "fake-archive":  # the task's own data: kept as bytes, never unpacked
        assert converted == ["bad", "good"] and manifest["skipped"] == []
        task = read_task(out_dir(tmp_path) / "tasks" / "bad")
        copied = {rel: f.data for rel, f in task.environment.items() if rel.endswith(".tar.gz")}
        if layout_name != "endless_terminals":  # container.def copies only what it names
            assert list(copied.values()) == [PROSE]
        assert unpacked_now() == before
    else:
        assert converted == ["good"]
        assert kinds(manifest) == {"bad": SKIPPED_AS[defect]}
        assert manifest["skipped_by_kind"] == {SKIPPED_AS[defect]: 1}
        report = (out_dir(tmp_path) / "report.md").read_text()
        assert f"| {SKIPPED_AS[defect]} | 1 |" in report


def test_the_default_size_limit_is_read_from_the_conversion_data() -> None:
    per_file, per_task = folders.size_limits()
    assert per_file == 100 << 20 and per_task == 500 << 20


# --- packaged tasks: tarballs and zips in a folder, tarballs in Parquet rows ----------


def packed(folder: Path, suffix: str, *, link_out: bool = False) -> bytes:
    """``folder`` as a ``.tar.gz`` or ``.zip`` (inside a folder of its name); with
    ``link_out`` it also holds a member that leaves it (a link in a tarball, a ``..``
    name in a zip, which holds no links)."""
    if suffix == ".tar.gz":
        if link_out:
            (folder / "leak").symlink_to("../../../etc/passwd")
        return tarball(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                bundle.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}")
        if link_out:
            bundle.writestr(f"{folder.name}/../../leak.txt", "out\n")
    return buffer.getvalue()


PACKAGED = {  # test name: (layout, fixture layout, archive suffix, entry keys)
    "harbor-tarballs": ("harbor", "harbor", ".tar.gz", {}),
    "tb1-tarballs": ("terminal_bench_v1", "terminal_bench_v1", ".tar.gz", {}),
    "tmax15k-zips": ("tmax15k", "endless_terminals", ".zip", {"files": "*.zip"}),
    "parquet-rows": ("parquet_tarballs", "harbor", ".tar.gz", {}),
}
PACKED_DEFECTS = {
    "truncated": "unreadable",
    "link-out": "escaping",
    "huge": "oversize",
    "malformed": "malformed",
    "fake-archive": None,
}


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> int:
    """A 1 MiB file limit, so a 'huge' member needs only 2 MiB."""
    monkeypatch.setattr(folders, "size_limits", lambda: (1 << 20, 4 << 20))
    return 1 << 20


@pytest.mark.parametrize("defect", list(PACKED_DEFECTS))
@pytest.mark.parametrize("packaging", list(PACKAGED))
def test_a_defective_packaged_task_costs_one_task(
    packaging: str, defect: str, tmp_path: Path, small_limits: int
) -> None:
    layout_name, fixture, suffix, entry = PACKAGED[packaging]
    layout = FOLDER_LAYOUTS[fixture]
    work = tmp_path / "work"
    good = Path(shutil.copytree(layout.good, work / "good"))
    bad = Path(shutil.copytree(layout.good, work / "bad"))
    if defect == "huge":
        (bad / layout.data).mkdir(parents=True, exist_ok=True)
        (bad / layout.data / "dump.bin").write_bytes(os.urandom(small_limits + 1))
    elif defect in ("malformed", "fake-archive"):
        spoil(bad, layout, defect, tmp_path / "secret.txt")
    blobs = {
        "good": packed(good, suffix),
        "bad": packed(bad, suffix, link_out=defect == "link-out"),
    }
    if defect == "truncated":
        blobs["bad"] = blobs["bad"][: len(blobs["bad"]) // 2]
    source = tmp_path / "src"
    source.mkdir()
    if layout_name == "parquet_tarballs":
        pq.write_table(pa.table({"path": list(blobs), "task_binary": list(blobs.values())}),
                       source / "tasks.parquet")  # fmt: skip
    else:
        for name, blob in blobs.items():
            (source / f"{name}{suffix}").write_bytes(blob)
    manifest = convert(tmp_path, layout_name, source, **entry)
    converted = [t["id"] for t in manifest["tasks"]]
    if PACKED_DEFECTS[defect] is None:
        assert converted == ["bad", "good"] and manifest["skipped"] == []
    else:
        assert converted == ["good"]
        assert kinds(manifest) == {"bad": PACKED_DEFECTS[defect]}


def test_archives_are_unpacked_only_for_the_drawn_tasks(tmp_path: Path) -> None:
    layout = FOLDER_LAYOUTS["harbor"]
    source = tmp_path / "src"
    source.mkdir()
    for index in range(6):
        task = Path(shutil.copytree(layout.good, tmp_path / "work" / f"task-{index}"))
        (task / "instruction.md").write_text(f"Task {index}: count the words.\n")
        (source / f"task-{index}.tar.gz").write_bytes(tarball(task))
    before = unpacked_now()
    manifest = convert(tmp_path, "harbor", source, sample=2)
    assert manifest["found"] == 6 and len(manifest["tasks"]) == 2
    assert len(unpacked_now() - before) == 2


def test_an_archive_inside_a_task_is_never_opened_even_when_a_glob_selects_it(
    tmp_path: Path,
) -> None:
    layout = FOLDER_LAYOUTS["harbor"]
    source = with_good_task(tmp_path / "src", layout)
    spoil(source / "good", layout, "fake-archive", tmp_path / "secret.txt")
    (source / "packaged.tar.gz").write_bytes(tarball(layout.good))
    manifest = convert(tmp_path, "harbor", source, files="*.tar.gz")  # both archives
    assert [t["id"] for t in manifest["tasks"]] == ["count-words"]  # the packaged one only


# --- rows -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout_name", "fixture"),
    [
        ("swe", DATASET_FIXTURES / "swe" / "instances.jsonl"),
        ("trajectories", DATASET_FIXTURES / "trajectories" / "trajectories.jsonl"),
    ],
)
def test_a_row_that_does_not_parse_costs_one_task(
    layout_name: str, fixture: Path, tmp_path: Path
) -> None:
    lines = fixture.read_text().splitlines()
    good = convert(tmp_path, layout_name, fixture, name="good")
    broken = tmp_path / "rows.jsonl"
    broken.write_text("\n".join([lines[0], '{"instance_id": "cut-off', "[1, 2]", *lines[1:]]))
    manifest = convert(tmp_path, layout_name, broken, max_skipped_share=1.0)
    assert [t["id"] for t in manifest["tasks"]] == [t["id"] for t in good["tasks"]]
    assert {kinds(manifest)[row] for row in ("row-1", "row-2")} == {"malformed"}
    assert json.loads((out_dir(tmp_path) / "manifest.json").read_text()) == manifest
