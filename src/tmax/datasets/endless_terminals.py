"""The native layout of LLM-generated terminal tasks (Endless Terminals; TMAX's own
pipeline writes the same files) converted into the Harbor layout.

A native task folder holds ``task.json`` (``description`` is the instruction,
``truth`` the privileged ground truth, plus the generator's labels),
``test_initial_state.py``, ``test_final_state.py`` and ``container.def`` (an Apptainer
definition, its ``%files`` sources beside it). The conversion:

- ``instruction.md`` is the description;
- ``environment/`` is the Dockerfile equivalent of ``container.def``
  (:mod:`tmax.datasets.container_def`); a definition without one is skipped with
  the reason. Without a definition, an ``image.txt`` naming a prebuilt image
  (TMAX's task-data tarball) becomes ``FROM <image>``;
- ``tests/test.sh`` runs ``test_final_state.py`` with pytest and writes reward 1 only
  if every test passes (the dataset's own Harbor export does the same);
  ``test_initial_state.py`` is kept beside it for audits;
- no reference solution: these datasets have none (TMAX paper §3.1);
- ``task.toml`` takes TMAX's Harbor-export limits (``data/conversion.yaml``).

The truth never leaves the source; the other ``task.json`` fields are recorded as the
source's own labels.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tmax.datasets.base import (
    ConvertContext,
    Converted,
    SourceTask,
    TaskSkipped,
    conversion_data,
    fill,
    read_text,
    register,
    text_file,
)
from tmax.datasets.container_def import definition_to_dockerfile
from tmax.datasets.folders import list_task_folders, task_folder
from tmax.tasks import Task, TaskConfig, TaskFile

PRIVATE_FIELDS = ("description", "truth", "name")
"""task.json fields not copied into the labels: the instruction, the privileged truth,
and the name (the task id already)."""


def _labels(spec: dict[str, Any]) -> dict[str, Any]:
    labels = {}
    for key, value in spec.items():
        if key in PRIVATE_FIELDS:
            continue
        plain_list = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if isinstance(value, str | int | float | bool) or plain_list:
            labels[key] = value
    return labels


def _environment(folder: Path) -> dict[str, TaskFile]:
    definition = folder / "container.def"
    if definition.is_file():
        return definition_to_dockerfile(read_text(definition, "container.def"), folder)
    image_file = folder / "image.txt"
    if image_file.is_file() and image_file.read_text(encoding="utf-8").strip():
        image = image_file.read_text(encoding="utf-8").split()[0]
        return {
            "Dockerfile": text_file(f"# The task's prebuilt image (image.txt).\nFROM {image}\n")
        }
    raise TaskSkipped("missing container.def (and no image.txt)", "missing")


def convert_native(folder: Path, name: str) -> Converted:
    """One native task folder as a Harbor task named ``name``."""
    try:
        spec = json.loads(read_text(folder / "task.json", "task.json"))
    except json.JSONDecodeError as error:
        raise TaskSkipped(f"task.json is not valid JSON: {error}", "malformed") from None
    if not isinstance(spec, dict):
        raise TaskSkipped("task.json is not an object", "malformed")
    description = spec.get("description")
    if not isinstance(description, str) or not description.strip():
        raise TaskSkipped("task.json has no description", "missing")
    instruction = description if description.endswith("\n") else description + "\n"
    final_tests = read_text(folder / "test_final_state.py", "final-state tests")
    tests = {
        "test.sh": text_file(fill("native_test_sh"), True),
        "test_final_state.py": text_file(final_tests),
    }
    if (folder / "test_initial_state.py").is_file():
        initial = read_text(folder / "test_initial_state.py", "initial-state tests")
        tests["test_initial_state.py"] = text_file(initial)
    limits = conversion_data()["defaults"]["native"]
    labels = _labels(spec)
    config = TaskConfig(
        metadata={"source_layout": "native", **labels},
        agent={"timeout_sec": float(limits["agent_timeout_sec"])},
        verifier={"timeout_sec": float(limits["verifier_timeout_sec"])},
        environment={"cpus": int(limits["cpus"]), "memory_mb": int(limits["memory_mb"])},
    )
    task = Task(name, instruction, config, _environment(folder), tests, None)
    task.validate(name)
    return Converted(instruction, task, labels)


@register("endless_terminals")
class EndlessTerminalsAdapter:
    """Native task folders (task.json + tests + container.def), plain or archived."""

    layout = "endless_terminals"
    has_environments = True

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        return list_task_folders(context, ("task.json",))

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        return convert_native(task_folder(item.ref), item.original_id)
