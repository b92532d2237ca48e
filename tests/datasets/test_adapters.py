"""Each adapter converts a small source in its published layout into our task format:
the files Harbor needs, the instruction, tmax.json's source block, and the reason for
every task it could not convert."""

from __future__ import annotations

import gzip
import json
import shutil
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.datasets.adapter_support import (
    DATASET_FIXTURES,
    convert,
    out_dir,
    private_cache,  # noqa: F401  (autouse)
    skip_reasons,
    tarball,
    tmax_json,
)
from tmax.datasets.base import TaskSkipped
from tmax.datasets.container_def import definition_to_dockerfile
from tmax.tasks import read_task

HARBOR = DATASET_FIXTURES / "harbor"
TB1 = DATASET_FIXTURES / "terminal_bench_v1"
NATIVE = DATASET_FIXTURES / "endless_terminals"


# --- harbor ---------------------------------------------------------------------------


def test_harbor_tasks_are_copied_with_a_source_block(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "harbor", HARBOR)
    assert [t["id"] for t in manifest["tasks"]] == ["count-words"]
    entry = manifest["tasks"][0]
    assert entry["path"] == "tasks/count-words"
    original = HARBOR / "tasks" / "count-words"
    assert entry["instruction"] == (original / "instruction.md").read_text()
    task = read_task(out_dir(tmp_path) / entry["path"])
    assert task.config.get("task", "name") == "fixture-org/count-words"  # kept
    assert task.environment["words.txt"].data == (original / "environment/words.txt").read_bytes()
    assert task.tests["test.sh"].executable and task.solution is not None
    meta = tmax_json(out_dir(tmp_path) / entry["path"])
    assert meta["axes"] is None and "spec_id" not in meta
    assert meta["source"]["dataset"] == "fx"
    assert meta["source"]["layout"] == "harbor"
    assert meta["source"]["original_id"] == "count-words"
    assert meta["source"]["revision"] == manifest["revision"]
    assert meta["source"]["labels"]["category"] == "file_operations"
    assert task.meta is not None and task.meta.source == meta["source"]


def test_harbor_task_without_tests_is_skipped_with_the_reason(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "harbor", HARBOR)
    assert "tests/test.sh" in skip_reasons(manifest)["missing-tests"]
    assert not (out_dir(tmp_path) / "tasks" / "missing-tests").exists()
    report = (out_dir(tmp_path) / "report.md").read_text()
    assert "converted: 1, skipped: 1" in report and "missing-tests" in report


def test_harbor_tasks_in_tarballs(tmp_path: Path) -> None:
    source = tmp_path / "tarballs"
    source.mkdir()
    (source / "count-words.tar.gz").write_bytes(tarball(HARBOR / "tasks" / "count-words"))
    (source / "flat-task.tar.gz").write_bytes(tarball(HARBOR / "tasks" / "count-words", False))
    manifest = convert(tmp_path, "harbor", source)
    assert [t["id"] for t in manifest["tasks"]] == ["count-words", "flat-task"]
    for entry in manifest["tasks"]:
        assert read_task(out_dir(tmp_path) / entry["path"]).tests["test.sh"].executable


def test_harbor_environment_with_only_a_container_def(tmp_path: Path) -> None:
    task = Path(shutil.copytree(HARBOR / "tasks" / "count-words", tmp_path / "src" / "t"))
    (task / "environment" / "Dockerfile").unlink()
    (task / "environment" / "container.def").write_text(
        "Bootstrap: docker\nFrom: ubuntu:22.04\n\n%files\n    words.txt /app/words.txt\n"
    )
    manifest = convert(tmp_path, "harbor", tmp_path / "src")
    dockerfile = (out_dir(tmp_path) / "tasks/t/environment/Dockerfile").read_text()
    assert "FROM ubuntu:22.04\nCOPY words.txt /app/words.txt\n" in dockerfile
    assert manifest["skipped"] == []


# --- parquet_tarballs ------------------------------------------------------------------


def test_parquet_rows_of_task_tarballs(tmp_path: Path) -> None:
    table = pa.table(
        {
            "path": ["nl2bash/count-words", "nl2bash/broken"],
            "task_binary": [tarball(HARBOR / "tasks" / "count-words"), gzip.compress(b"junk")],
        }
    )
    pq.write_table(table, tmp_path / "tasks.parquet")
    manifest = convert(tmp_path, "parquet_tarballs", tmp_path / "tasks.parquet")
    (entry,) = manifest["tasks"]
    assert entry["id"].startswith("nl2bash-count-words-")  # "/" is not a folder name
    meta = tmax_json(out_dir(tmp_path) / entry["path"])
    assert meta["source"]["original_id"] == "nl2bash/count-words"
    assert read_task(out_dir(tmp_path) / entry["path"]).solution is not None
    (skipped,) = manifest["skipped"]
    assert "not a readable tarball" in skipped["reason"]


def test_parquet_column_names_are_configurable(tmp_path: Path) -> None:
    table = pa.table({"slug": ["count-words"], "blob": [tarball(HARBOR / "tasks/count-words")]})
    pq.write_table(table, tmp_path / "rows.parquet")
    manifest = convert(tmp_path, "parquet_tarballs", tmp_path / "rows.parquet",
                       columns={"id": "slug", "tarball": "blob"})  # fmt: skip
    assert [t["id"] for t in manifest["tasks"]] == ["count-words"]


# --- terminal_bench_v1 -----------------------------------------------------------------


def test_terminal_bench_task_becomes_a_harbor_task(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "terminal_bench_v1", TB1)
    (entry,) = manifest["tasks"]
    task = read_task(out_dir(tmp_path) / entry["path"])
    assert task.instruction.startswith("The file `/app/numbers.txt` holds one integer")
    assert set(task.environment) == {"Dockerfile", "numbers.txt"}  # the build context
    assert set(task.tests) == {"test.sh", "run-tests.sh", "test_outputs.py"}
    test_sh = task.tests["test.sh"].data.decode()
    assert "bash /tests/run-tests.sh" in test_sh and "/logs/verifier/reward.txt" in test_sh
    assert "export TEST_DIR=/tests" in test_sh and "cd /app" in test_sh
    assert task.solution is not None and task.solution["solve.sh"].executable
    assert task.config.get("agent", "timeout_sec") == 180.0
    assert task.config.get("verifier", "timeout_sec") == 30.0
    assert task.config.metadata["difficulty"] == "easy"
    assert tmax_json(out_dir(tmp_path) / entry["path"])["source"]["labels"]["tags"] == [
        "arithmetic",
        "shell",
    ]
    assert skip_reasons(manifest) == {"no-run-tests": "missing run-tests.sh"}


def test_terminal_bench_multi_service_compose_is_skipped(tmp_path: Path) -> None:
    shutil.copytree(TB1 / "tasks" / "sum-numbers", tmp_path / "src" / "one")
    task = Path(shutil.copytree(TB1 / "tasks" / "sum-numbers", tmp_path / "src" / "two"))
    (task / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build: .\n  redis:\n    image: redis:7\n"
    )
    manifest = convert(tmp_path, "terminal_bench_v1", tmp_path / "src")
    assert "2 services" in skip_reasons(manifest)["two"]
    assert manifest["skipped_by_kind"] == {"unsupported": 1}


def test_terminal_bench_rows_are_read_like_folders(tmp_path: Path) -> None:
    folder = TB1 / "tasks" / "sum-numbers"
    row = {
        "task_id": "sum-numbers",
        "instruction": "Sum the numbers in /app/numbers.txt into /app/sum.txt.",
        "dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
        "run_tests": (folder / "run-tests.sh").read_text(),
        "tests": json.dumps({"test_outputs.py": (folder / "tests/test_outputs.py").read_text()}),
        "difficulty": "hard",
    }
    (tmp_path / "train.jsonl").write_text(json.dumps(row) + "\n")
    manifest = convert(tmp_path, "terminal_bench_v1", tmp_path / "train.jsonl")
    task = read_task(out_dir(tmp_path) / manifest["tasks"][0]["path"])
    assert task.instruction == row["instruction"] + "\n"
    assert set(task.tests) == {"test.sh", "run-tests.sh", "test_outputs.py"}
    assert task.config.metadata["difficulty"] == "hard" and task.solution is None


# --- endless_terminals and tmax15k (the native layout) --------------------------------


def test_native_task_gets_a_dockerfile_from_its_container_def(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "endless_terminals", NATIVE)
    (entry,) = manifest["tasks"]
    assert entry["id"] == "task_000001_0a1b2c3d"
    assert entry["instruction"].startswith("A colleague left a CSV")
    task = read_task(out_dir(tmp_path) / entry["path"])
    dockerfile = task.environment["Dockerfile"].data.decode()
    assert "FROM ubuntu:22.04\n" in dockerfile
    assert "COPY fixtures/latency.csv /home/user/data/latency.csv\n" in dockerfile
    assert "RUN /bin/sh -e /tmp/tmax-post.sh" in dockerfile
    assert dockerfile.index("RUN ") < dockerfile.index("ENV LC_ALL=C")  # runtime only
    assert "ENV HOME=/home/user" in dockerfile and "WORKDIR /home/user" in dockerfile
    assert "apt-get update" in task.environment["tmax-post.sh"].data.decode()
    assert "fixtures/latency.csv" in task.environment
    assert set(task.tests) == {"test.sh", "test_final_state.py", "test_initial_state.py"}
    assert "pytest" in task.tests["test.sh"].data.decode() and task.solution is None
    labels = tmax_json(out_dir(tmp_path) / entry["path"])["source"]["labels"]
    assert labels["domain"] == "data_processing" and "truth" not in labels
    assert "localimage" in skip_reasons(manifest)["task_000002_deadbeef"]


def test_tmax15k_reads_native_folders_from_tasks_zip(tmp_path: Path) -> None:
    release = tmp_path / "release"
    release.mkdir()
    with zipfile.ZipFile(release / "tasks.zip", "w") as bundle:
        for path in sorted((NATIVE / "tasks").rglob("*")):
            if path.is_file():
                bundle.write(path, path.relative_to(NATIVE / "tasks").as_posix())
    (release / "data").mkdir()
    (release / "data" / "train.parquet").write_bytes(b"not read")
    manifest = convert(tmp_path, "tmax15k", release, files="tasks.zip")
    assert [t["id"] for t in manifest["tasks"]] == ["task_000001_0a1b2c3d"]
    meta = tmax_json(out_dir(tmp_path) / manifest["tasks"][0]["path"])
    assert meta["source"]["layout"] == "tmax15k"
    assert meta["source"]["labels"]["skill_type"] == "Data I/O"


@pytest.mark.parametrize(
    ("definition", "reason"),
    [
        ("Bootstrap: library\nFrom: ubuntu:22.04\n", "Bootstrap 'library'"),
        ("Bootstrap: docker\nFrom: a\n%setup\n    touch $ROOTFS/x\n", "%setup"),
        ("Bootstrap: docker\nFrom: a\n%environment\n    source /venv/bin/activate\n",
         "not an assignment"),
        ("Bootstrap: docker\nFrom: a\n%files\n    /etc/hosts /etc/hosts\n", "not a plain path"),
        ("Bootstrap: docker\nFrom: a\n%files\n    missing.txt /x\n", "not beside"),
    ],
)  # fmt: skip
def test_untranslatable_definitions_name_the_reason(
    definition: str, reason: str, tmp_path: Path
) -> None:
    with pytest.raises(TaskSkipped, match=reason):
        definition_to_dockerfile(definition, tmp_path)


def test_post_shell_is_kept(tmp_path: Path) -> None:
    files = definition_to_dockerfile(
        "Bootstrap: docker\nFrom: ubuntu:22.04\n%post -c /bin/bash\n    [[ -d /opt ]] && echo ok\n",
        tmp_path,
    )
    assert "RUN /bin/bash -e /tmp/tmax-post.sh" in files["Dockerfile"].data.decode()


# --- swe ------------------------------------------------------------------------------


def test_swe_instances_apply_the_bug_and_run_the_listed_tests(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "swe", DATASET_FIXTURES / "swe")
    ids = [t["id"] for t in manifest["tasks"]]
    assert ids == ["owner__calc.1a2b3c4d.func_pm_op_swap__x1", "owner__calc.1a2b3c4d.no_image__x3"]
    task = read_task(out_dir(tmp_path) / manifest["tasks"][0]["path"])
    assert task.instruction == "`calc.ops.add(2, 3)` returns -1 instead of 5.\n"
    dockerfile = task.environment["Dockerfile"].data.decode()
    assert "FROM jyangballin/swesmith.x86_64.owner_1776_calc.1a2b3c4d\n" in dockerfile
    assert "git apply /tmp/tmax-bug.patch" in dockerfile and "rm -rf .git" in dockerfile
    assert task.environment["bug.patch"].data.startswith(b"diff --git a/calc/ops.py")
    assert task.tests["test_ids.txt"].data.decode().splitlines() == [
        "tests/test_ops.py::test_add",
        "tests/test_ops.py::test_sub",
        "tests/test_ops.py::test_mul",
    ]
    assert "git apply -R" in task.solution["solve.sh"].data.decode()
    derived = read_task(out_dir(tmp_path) / manifest["tasks"][1]["path"])
    assert b"FROM jyangballin/swesmith.x86_64.owner_1776_calc.1a2b3c4d" in (
        derived.environment["Dockerfile"].data
    )
    reasons = skip_reasons(manifest)
    assert "FAIL_TO_PASS" in reasons["owner__calc.1a2b3c4d.no_tests__x2"]


# --- trajectories ---------------------------------------------------------------------


def test_trajectories_give_instructions_only(tmp_path: Path) -> None:
    manifest = convert(tmp_path, "trajectories", DATASET_FIXTURES / "trajectories")
    assert manifest["has_environments"] is False
    tasks = {t["id"]: t for t in manifest["tasks"]}
    assert list(tasks) == ["big-files", "rename-logs"]  # two trajectories of big-files
    assert tasks["big-files"]["instruction"] == (
        "Find every file under /srv larger than 1 MB and list their paths in /root/big.txt.\n"
    )
    assert tasks["rename-logs"]["instruction"].startswith("Rename every *.log file")
    assert all(t["path"] is None for t in tasks.values())
    assert list((out_dir(tmp_path) / "tasks").iterdir()) == []
    assert skip_reasons(manifest) == {"row-3": "no user message"}
