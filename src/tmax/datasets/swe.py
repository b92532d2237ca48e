"""SWE-style instances (SWE-Smith) as Harbor tasks.

An instance is a table row: ``instance_id``, the image the repository lives in
(``image_name``, or derived from ``repo`` by SWE-smith's naming), ``patch`` (for
SWE-smith: the patch that *creates* the bug), ``FAIL_TO_PASS`` and ``PASS_TO_PASS``
(pytest node ids) and ``problem_statement``. The task:

- ``environment/Dockerfile`` starts FROM the instance's image and applies the bug
  patch in the repository (``/testbed``), then replaces the git history by one fresh
  commit so the agent cannot read the bug back from git;
- ``tests/test.sh`` runs every FAIL_TO_PASS and PASS_TO_PASS test with pytest and
  writes reward 1 only if all of them pass;
- ``solution/solve.sh`` reverts the bug patch (the oracle);
- ``instruction.md`` is the problem statement.

Column names are configurable (``columns:`` in the source's config entry).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tmax.datasets.base import (
    ConvertContext,
    Converted,
    SourceTask,
    TaskSkipped,
    column,
    conversion_data,
    fill,
    first_present,
    register,
    text_file,
)
from tmax.datasets.rows import read_rows, row_tasks
from tmax.tasks import Task, TaskConfig

WORKDIR = "/testbed"
COLUMNS = {
    "id": ("instance_id",),
    "image": ("image_name", "image"),
    "repo": ("repo",),
    "patch": ("patch",),
    "fail_to_pass": ("FAIL_TO_PASS",),
    "pass_to_pass": ("PASS_TO_PASS",),
    "problem_statement": ("problem_statement",),
}


def _value(row: dict[str, Any], context: ConvertContext, key: str) -> Any:
    found = first_present(row, column(context.columns, key, COLUMNS[key]))
    return row[found] if found is not None else None


def test_ids(value: Any, name: str) -> list[str]:
    """A list of pytest node ids, given as a list or as its JSON text."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise TaskSkipped(f"{name} is not a JSON list of test ids", "malformed") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskSkipped(f"{name} is not a list of test ids", "malformed")
    return value


def image_for_repo(repo: str) -> str:
    """SWE-smith's image of a repository key (``swesmith/owner__name.commit``)."""
    key = repo.removeprefix("swesmith/").replace("__", "_1776_").lower()
    return str(conversion_data()["swe_image_template"]).format(repo=key)


@register("swe")
class SweAdapter:
    """SWE-style instances from Parquet/JSONL rows."""

    layout = "swe"
    has_environments = True

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        self._rows = read_rows(context)
        tried = ", ".join(column(context.columns, "id", COLUMNS["id"]))
        return row_tasks(context, self._rows, lambda row: _value(row, context, "id"), tried)

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        row = self._rows[item.ref]
        statement = _value(row, context, "problem_statement")
        if not isinstance(statement, str) or not statement.strip():
            raise TaskSkipped("no problem statement", "missing")
        patch = _value(row, context, "patch")
        if not isinstance(patch, str) or "diff --git" not in patch:
            raise TaskSkipped("no bug patch (a git diff) in the patch column", "missing")
        fail_to_pass = test_ids(_value(row, context, "fail_to_pass"), "FAIL_TO_PASS")
        pass_to_pass = test_ids(_value(row, context, "pass_to_pass"), "PASS_TO_PASS")
        if not fail_to_pass:
            raise TaskSkipped("no FAIL_TO_PASS tests (nothing shows the bug)", "missing")
        image, repo = _value(row, context, "image"), _value(row, context, "repo")
        if not image and isinstance(repo, str) and repo:
            image = image_for_repo(repo)
        if not isinstance(image, str) or not re.fullmatch(r"[\w./:@-]+", image):
            raise TaskSkipped(f"no usable image name (image {image!r}, repo {repo!r})", "missing")
        patch = patch if patch.endswith("\n") else patch + "\n"
        ids = "".join(f"{test}\n" for test in fail_to_pass + pass_to_pass)
        limits = conversion_data()["defaults"]["swe"]
        labels = {"repo": repo} if isinstance(repo, str) and repo else {}
        config = TaskConfig(
            metadata={"source_layout": "swe", "instance_id": item.original_id, **labels},
            agent={"timeout_sec": float(limits["agent_timeout_sec"])},
            verifier={"timeout_sec": float(limits["verifier_timeout_sec"])},
            environment={
                "build_timeout_sec": float(limits["build_timeout_sec"]),
                "cpus": int(limits["cpus"]),
                "memory_mb": int(limits["memory_mb"]),
            },
        )
        dockerfile = fill("swe_dockerfile", instance_id=item.original_id, image=image,
                          workdir=WORKDIR)  # fmt: skip
        instruction = statement if statement.endswith("\n") else statement + "\n"
        task = Task(
            name=item.original_id,
            instruction=instruction,
            config=config,
            environment={"Dockerfile": text_file(dockerfile), "bug.patch": text_file(patch)},
            tests={
                "test.sh": text_file(fill("swe_test_sh", workdir=WORKDIR), True),
                "test_ids.txt": text_file(ids),
            },
            solution={
                "solve.sh": text_file(fill("swe_solve_sh", workdir=WORKDIR), True),
                "bug.patch": text_file(patch),
            },
        )
        task.validate(item.original_id)
        return Converted(instruction, task, labels)
