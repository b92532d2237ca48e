"""Harbor task directories: read, round-trip, and precise errors for bad ones."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.tasks import Task, TaskConfig, TaskFile, TaskFormatError, TaskMeta, read_task, write_task
from tmax.taxonomy import SamplerSettings, Taxonomy, sample_specs

FIXTURES = sorted(p.name for p in FIXTURE_TASKS.iterdir())


def copy_fixture(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE_TASKS / name, tmp_path / name))


def test_reads_a_terminal_bench_style_task() -> None:
    task = read_task(FIXTURE_TASKS / "count-error-lines")
    assert task.config.schema_version == "1.0"  # old `version` key is accepted
    assert task.config.memory_mb == 1024  # deprecated `memory = "1G"` is converted
    assert task.config.network_mode == "no-network"  # from allow_internet = false
    assert task.config.metadata["difficulty"] == "easy"
    assert task.tests["test.sh"].executable
    assert task.solution is not None and "solve.sh" in task.solution
    assert "service.log" in task.environment
    assert task.meta is None


def test_reads_our_task_with_tmax_json() -> None:
    task = read_task(FIXTURE_TASKS / "sum-csv-column")
    assert task.meta is not None
    assert task.meta.axes["domain"] == "data_processing"
    assert task.config.get("task", "name") == "tmax/sum-csv-column"
    assert task.environment["data/orders.csv"].data.startswith(b"order_id")


def test_prebuilt_image_needs_no_environment_dir() -> None:
    task = read_task(FIXTURE_TASKS / "no-solution-prebuilt")
    assert task.environment == {} and task.solution is None
    assert task.config.get("environment", "docker_image") == "debian:bookworm-slim"
    assert task.config.get("agent", "timeout_sec") is None  # Harbor default


@pytest.mark.parametrize("name", FIXTURES)
def test_round_trip_keeps_everything(name: str, tmp_path: Path) -> None:
    task = read_task(FIXTURE_TASKS / name)
    written = write_task(task, tmp_path)
    again = read_task(written)
    assert again == task
    for rel, entry in task.tests.items():
        assert (written / "tests" / rel).read_bytes() == entry.data


def test_unknown_toml_keys_survive_a_round_trip(tmp_path: Path) -> None:
    path = copy_fixture("sum-csv-column", tmp_path / "in")
    with (path / "task.toml").open("a") as handle:
        handle.write("\n[future_table]\nshiny = true\n")
    task = read_task(path)
    assert task.config.extra == {"future_table": {"shiny": True}}
    assert "shiny = true" in read_task(write_task(task, tmp_path / "out")).config.dumps()


def test_writes_a_task_made_from_a_spec(tmp_path: Path, taxonomy: Taxonomy, config: dict) -> None:
    spec = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, 1)[0]
    task = Task(
        name=spec.spec_id,
        instruction="Print hello to /app/out.txt\n",
        config=TaskConfig(environment={"memory_mb": 512, "network_mode": "no-network"}),
        environment={"Dockerfile": TaskFile(b"FROM debian:bookworm-slim\n")},
        tests={"test.sh": TaskFile(b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n", True)},
        solution={"solve.sh": TaskFile(b"#!/bin/bash\necho hello > /app/out.txt\n", True)},
        meta=TaskMeta.from_spec(spec, backend="procedural", family="demo"),
    )
    loaded = read_task(write_task(task, tmp_path))
    assert loaded.meta is not None and loaded.meta.axes == spec.axes()
    assert loaded.meta.spec_id == spec.spec_id
    assert (tmp_path / spec.spec_id / "tests" / "test.sh").stat().st_mode & 0o111


def test_rewrite_replaces_atomically_and_leaves_no_debris(tmp_path: Path) -> None:
    task = read_task(FIXTURE_TASKS / "count-error-lines")
    write_task(task, tmp_path)
    task.instruction = "Changed.\n"
    write_task(task, tmp_path)
    assert read_task(tmp_path / task.name).instruction == "Changed.\n"
    assert [p.name for p in tmp_path.iterdir()] == [task.name]


def test_failed_write_keeps_the_old_copy(tmp_path: Path) -> None:
    task = read_task(FIXTURE_TASKS / "count-error-lines")
    write_task(task, tmp_path)
    task.tests = {"../escape.sh": TaskFile(b"")} | task.tests
    with pytest.raises(TaskFormatError, match="escapes the task directory"):
        write_task(task, tmp_path)
    assert read_task(tmp_path / task.name).tests.keys() == {"test.sh"}


def _edit(path: Path, name: str, old: str, new: str) -> None:
    target = path / name
    target.write_text(target.read_text().replace(old, new))


BREAKAGES: list[tuple[str, Callable[[Path], None], str]] = [
    ("missing instruction", lambda p: (p / "instruction.md").unlink(), "instruction.md: missing"),
    ("missing test.sh", lambda p: (p / "tests/test.sh").unlink(), "tests/test.sh: missing"),
    ("missing task.toml", lambda p: (p / "task.toml").unlink(), "task.toml: missing"),
    (
        "bad TOML",
        lambda p: _edit(p, "task.toml", "[verifier]", "[verifier"),
        "task.toml: not valid TOML",
    ),
    (
        "wrong field type",
        lambda p: _edit(p, "task.toml", "memory_mb = 1024", 'memory_mb = "lots"'),
        r"task.toml: \[environment\].memory_mb must be int, got 'lots'",
    ),
    (
        "bool where a number belongs",
        lambda p: _edit(p, "task.toml", "timeout_sec = 60.0", "timeout_sec = true"),
        r"\[verifier\].timeout_sec must be int or float, got True",
    ),
    (
        "negative limit",
        lambda p: _edit(p, "task.toml", "cpus = 1", "cpus = 0"),
        r"\[environment\].cpus must be > 0",
    ),
    (
        "pytest verdict outside tests/",
        lambda p: _edit(p, "task.toml", "[metadata]", '[metadata]\npytest_verdict = ["../x.py"]'),
        r"\[metadata\].pytest_verdict must list .py files below tests/, got \['../x.py'\]",
    ),
    (
        "unknown network mode",
        lambda p: _edit(p, "task.toml", '"no-network"', '"offline"'),
        r"network_mode must be one of public, no-network, allowlist",
    ),
    (
        "bad task name",
        lambda p: _edit(p, "task.toml", 'name = "tmax/sum-csv-column"', 'name = "plain"'),
        r"\[task\].name must look like 'org/name'",
    ),
    (
        "no Dockerfile",
        lambda p: (p / "environment/Dockerfile").unlink(),
        "environment/Dockerfile: missing",
    ),
    (
        "solution without solve.sh",
        lambda p: (p / "solution/solve.sh").unlink(),
        "solution/solve.sh: missing",
    ),
    (
        "tmax.json without an axis",
        lambda p: _edit(p, "tmax.json", '"domain": "data_processing",', ""),
        "tmax.json: 'axes' is missing domain",
    ),
    (
        "tmax.json axis of the wrong type",
        lambda p: _edit(p, "tmax.json", '"language": "python"', '"language": 3'),
        "tmax.json: 'axes.language' must be a string",
    ),
    (
        "tmax.json not JSON",
        lambda p: (p / "tmax.json").write_text("{"),
        "tmax.json: not valid JSON",
    ),
    (
        "symlink",
        lambda p: (p / "tests/link").symlink_to("/etc/passwd"),
        "symbolic links are not allowed",
    ),
    (
        "instruction not UTF-8",
        lambda p: (p / "instruction.md").write_bytes(b"\xff\xfe bad"),
        "instruction.md: not UTF-8",
    ),
]


@pytest.mark.parametrize(("what", "breakage", "message"), BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_malformed_task_is_rejected_naming_file_and_field(
    tmp_path: Path, what: str, breakage: Callable[[Path], None], message: str
) -> None:
    path = copy_fixture("sum-csv-column", tmp_path)
    breakage(path)
    with pytest.raises(TaskFormatError, match=message) as caught:
        read_task(path)
    assert str(path) in str(caught.value), what
