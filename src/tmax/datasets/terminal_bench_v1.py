"""Terminal-Bench 1.0 tasks (CLI-Gym, TerminalTraj) converted into the Harbor layout.

A Terminal-Bench 1.0 task folder holds ``task.yaml`` (the instruction, timeouts,
labels), a ``Dockerfile`` whose build context is the folder itself, a
``docker-compose.yaml``, ``run-tests.sh`` with ``tests/``, and ``solution.sh``. The
conversion:

- ``instruction.md`` is ``task.yaml``'s ``instruction`` (or its ``base`` description);
- ``environment/`` is the Dockerfile and every other file of the folder (its build
  context); a compose file with more than one service cannot be expressed and is
  skipped;
- ``tests/`` is ``tests/`` plus ``run-tests.sh``, and ``tests/test.sh`` runs it from the
  image's working directory with ``TEST_DIR=/tests``, writing reward 1 only when it
  succeeds (pytest exits non-zero when any test fails, which is when Terminal-Bench's
  pytest parser did not resolve the task);
- ``solution/solve.sh`` is ``solution.sh`` (a keystroke list ``solution.yaml`` is not
  a script, so such a task has no reference solution);
- ``task.toml`` takes the agent and test timeouts and the labels from ``task.yaml``.

The same layout published as table rows (one column per file, as CLI-Gym's Parquet
release does) is materialised as folders first; the column names are configurable.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tmax.datasets.base import (
    ConvertContext,
    Converted,
    DatasetError,
    SourceTask,
    TaskSkipped,
    column,
    conversion_data,
    dockerfile_workdir,
    fill,
    first_present,
    read_text,
    read_tree,
    register,
    text_file,
)
from tmax.datasets.folders import list_task_folders, task_folder
from tmax.datasets.rows import read_rows, row_tasks
from tmax.tasks import Task, TaskConfig, TaskFile

NOT_ENVIRONMENT = (
    "task.yaml",
    "docker-compose.yaml",
    "docker-compose.yml",
    "run-tests.sh",
    "solution.sh",
    "solution.yaml",
)
"""Files of a task folder that are not part of the image's build context."""
LABELS = ("difficulty", "category", "tags", "author_name", "author_email", "parser_name")

# Table rows: which column holds which file of the folder layout.
ROW_FILES = {
    "task_yaml": ("task.yaml", ("task_yaml",)),
    "dockerfile": ("Dockerfile", ("dockerfile", "Dockerfile")),
    "docker_compose": ("docker-compose.yaml", ("docker_compose", "docker_compose_yaml")),
    "run_tests": ("run-tests.sh", ("run_tests", "run_tests_sh")),
    "solution": ("solution.sh", ("solution", "solution_sh")),
}
ROW_IDS = ("task_id", "id", "name")


def _instruction(spec: dict[str, Any]) -> str:
    text = spec.get("instruction")
    if not text:  # older tasks: descriptions: [{key: base, description: ...}]
        for item in spec.get("descriptions") or []:
            if isinstance(item, dict) and item.get("key") == "base":
                text = item.get("description")
    if not isinstance(text, str) or not text.strip():
        raise TaskSkipped("task.yaml has no instruction", "missing")
    return text if text.endswith("\n") else text + "\n"


def _yaml(text: str, name: str) -> object:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise TaskSkipped(f"{name} is not valid YAML ({first})", "malformed") from None


def _check_compose(folder: Path) -> None:
    for name in ("docker-compose.yaml", "docker-compose.yml"):
        path = folder / name
        if path.is_file():
            compose = _yaml(read_text(path, name), name) or {}
            services = compose.get("services") if isinstance(compose, dict) else None
            if isinstance(services, dict) and len(services) > 1:
                raise TaskSkipped(
                    f"{name} has {len(services)} services ({', '.join(services)}); only a "
                    "single-container environment converts to a Dockerfile"
                )


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and value > 0 else float(default)


def convert_folder(folder: Path, name: str) -> Converted:
    """One Terminal-Bench 1.0 task folder as a Harbor task named ``name``."""
    spec = _yaml(read_text(folder / "task.yaml", "task.yaml"), "task.yaml")
    if not isinstance(spec, dict):
        raise TaskSkipped("task.yaml is not a mapping", "malformed")
    instruction = _instruction(spec)
    if not (folder / "Dockerfile").is_file():
        raise TaskSkipped("missing Dockerfile", "missing")
    if not (folder / "run-tests.sh").is_file():
        raise TaskSkipped("missing run-tests.sh", "missing")
    _check_compose(folder)
    everything = read_tree(folder)
    environment = {
        rel: entry
        for rel, entry in everything.items()
        if rel not in NOT_ENVIRONMENT and not rel.startswith("tests/")
    }
    tests = read_tree(folder / "tests")
    clash = sorted({"test.sh", "run-tests.sh"} & set(tests))
    if clash:
        raise TaskSkipped(f"tests/ already holds {', '.join(clash)}")
    workdir = dockerfile_workdir(environment["Dockerfile"].data.decode("utf-8", "replace"), "/")
    tests["run-tests.sh"] = TaskFile(everything["run-tests.sh"].data, True)
    tests["test.sh"] = text_file(fill("terminal_bench_v1_test_sh", workdir=workdir), True)
    solution = None
    if "solution.sh" in everything:
        solution = {"solve.sh": TaskFile(everything["solution.sh"].data, True)}
    defaults = conversion_data()["defaults"]["terminal_bench_v1"]
    labels = {key: spec[key] for key in LABELS if spec.get(key) not in (None, "", [])}
    config = TaskConfig(
        metadata={"source_layout": "terminal_bench_v1", **labels},
        agent={"timeout_sec": _number(spec.get("max_agent_timeout_sec"),
                                      defaults["agent_timeout_sec"])},
        verifier={"timeout_sec": _number(spec.get("max_test_timeout_sec"),
                                         defaults["verifier_timeout_sec"])},
    )  # fmt: skip
    task = Task(name, instruction, config, environment, tests, solution)
    task.validate(name)
    return Converted(instruction, task, labels)


def _row_tests(value: Any) -> dict[str, str]:
    """A tests column: a mapping of relative path -> text (or its JSON), or the text of
    ``test_outputs.py`` alone."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {"test_outputs.py": value}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, list):  # [{"path": ..., "content": ...}]
        return {str(i["path"]): str(i["content"]) for i in value if isinstance(i, dict)}
    raise TaskSkipped("the tests column is neither text nor a mapping of files", "malformed")


def _materialise(row: dict[str, Any], columns: dict[str, str], dest: Path) -> None:
    """Write one table row as a Terminal-Bench 1.0 folder."""
    for key, (filename, defaults) in ROW_FILES.items():
        found = first_present(row, column(columns, key, defaults))
        if found is not None and isinstance(row[found], str) and row[found].strip():
            (dest / filename).write_text(row[found], encoding="utf-8")
    instruction = first_present(row, column(columns, "instruction", ("instruction",)))
    if not (dest / "task.yaml").exists():
        spec = {"instruction": row.get(instruction) if instruction else None}
        spec.update({k: row[k] for k in LABELS if isinstance(row.get(k), str | int | float)})
        (dest / "task.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    tests = first_present(row, column(columns, "tests", ("tests", "test_files")))
    if tests is not None and row[tests]:
        for rel, text in _row_tests(row[tests]).items():
            if rel.startswith("/") or ".." in Path(rel).parts:
                raise TaskSkipped(f"test file {rel!r} escapes the tests folder", "escaping")
            target = dest / "tests" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


@register("terminal_bench_v1")
class TerminalBenchV1Adapter:
    """Terminal-Bench 1.0 task folders (or table rows of their files)."""

    layout = "terminal_bench_v1"
    has_environments = True

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] | None = None

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        folders = list_task_folders(context, ("task.yaml",))
        if folders:
            return folders
        try:
            self._rows = read_rows(context)
        except DatasetError:
            return []  # neither folders nor tables: "no tasks" is reported by the caller
        ids = column(context.columns, "id", ROW_IDS)

        def id_of(row: dict[str, Any]) -> Any:
            found = first_present(row, ids)
            return None if found is None else row[found]

        return row_tasks(context, self._rows, id_of, ", ".join(ids))

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        if self._rows is None:
            return convert_folder(task_folder(item.ref), item.original_id)
        with tempfile.TemporaryDirectory(dir=context.scratch) as scratch:
            folder = Path(scratch)
            _materialise(self._rows[item.ref], dict(context.columns), folder)
            return convert_folder(folder, item.original_id)
