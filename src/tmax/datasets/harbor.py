"""Harbor-layout task folders (TermiGen, the Harbor copies of Endless Terminals and
TMAX-15K), as folders or as task tarballs in a folder.

A task is read as Harbor reads it (``task.toml``, ``instruction.md``,
``environment/``, ``tests/test.sh``, optional ``solution/solve.sh``) and written back
unchanged but for ``tmax.json``. An environment that ships only an Apptainer
``container.def`` (as some Endless Terminals tasks do) gets the equivalent
Dockerfile (:mod:`tmax.datasets.container_def`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tmax.datasets.base import (
    ConvertContext,
    Converted,
    SourceTask,
    TaskSkipped,
    read_text,
    read_tree,
    register,
)
from tmax.datasets.container_def import definition_to_dockerfile
from tmax.datasets.folders import list_task_folders, task_folder
from tmax.tasks import Task, TaskConfig, TaskFormatError

METADATA_KEYS = ("category", "difficulty", "tags", "author_name")
"""``task.toml`` [metadata] keys kept as the source's own labels."""


def harbor_task(folder: Path, name: str) -> Task:
    """A Harbor task folder read into memory under the new ``name``."""
    try:
        config = TaskConfig.parse(read_text(folder / "task.toml", "task.toml"), "task.toml")
    except TaskFormatError as error:
        raise TaskSkipped(str(error), "malformed") from None
    environment = read_tree(folder / "environment")
    if "Dockerfile" not in environment and "container.def" in environment:
        definition = environment["container.def"].data.decode("utf-8", errors="replace")
        environment.update(definition_to_dockerfile(definition, folder / "environment"))
    if not (folder / "tests" / "test.sh").is_file():
        raise TaskSkipped("missing tests/test.sh (the verifier's entry point)", "missing")
    solution_dir = folder / "solution"
    task = Task(
        name=name,
        instruction=read_text(folder / "instruction.md", "instruction.md"),
        config=config,
        environment=environment,
        tests=read_tree(folder / "tests"),
        solution=read_tree(solution_dir) if (solution_dir / "solve.sh").is_file() else None,
    )
    task.validate(name)
    return task


def source_labels(config: TaskConfig) -> dict[str, Any]:
    return {key: config.metadata[key] for key in METADATA_KEYS if key in config.metadata}


@register("harbor")
class HarborAdapter:
    """Harbor task folders, plain or in tarballs."""

    layout = "harbor"
    has_environments = True

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        return list_task_folders(context, ("task.toml",))

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        task = harbor_task(task_folder(item.ref), item.original_id)
        return Converted(task.instruction, task, source_labels(task.config))
