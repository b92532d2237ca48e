"""The build-and-check step: build a generated task's image in a sandbox and run
its initial-state tests there (paper §3.1: the initial tests must pass before a task
is kept; failures are fed back to the generator).

The sandbox layer does the building (tmax.sandbox.episode.sandbox_for_task): under
bwrap a Dockerfile that extends a domain base is applied step by step on the cached
domain root file system, anything else is built with podman; under apptainer the
Dockerfile is converted to a definition and built as a SIF.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tmax.io import write_text
from tmax.sandbox.base import SandboxError
from tmax.sandbox.episode import dockerfile_instructions, sandbox_for_task
from tmax.sandbox.images import ImageError
from tmax.tasks import TaskFormatError

log = logging.getLogger("tmax.generate.llm")

INITIAL_TESTS = "test_initial_state.py"
"""Where a generated task keeps its initial-state tests (beside the final-state ones,
which ``tests/test.sh`` runs; the initial ones are for this check and for audits)."""

ALLOWED_INSTRUCTIONS = ("FROM", "RUN", "COPY", "WORKDIR", "ENV")
ERROR_LEVEL = -3  # spython's logger level that shows errors only
_SPYTHON_QUIET = threading.Lock()

_INITIAL_TEST_SH = f"""#!/bin/bash
mkdir -p /logs/verifier
if python3 -m pytest -q -p no:cacheprovider /tests/{INITIAL_TESTS}; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


@dataclass(frozen=True)
class CheckResult:
    """The verdict on a task's environment; ``step`` names what failed."""

    ok: bool
    step: str = ""
    log: str = ""


EnvironmentCheck = Callable[[Path], CheckResult]
"""Builds a written task directory's image and runs its initial-state tests."""


def lint_dockerfile(text: str, files: set[str]) -> list[str]:
    """Problems a build would hit late, found early: the first instruction must be
    FROM, only simple instructions are allowed (they layer under bwrap), COPY may only
    name files the generator supplied, and spython must convert the whole file to an
    Apptainer definition."""
    problems: list[str] = []
    steps = dockerfile_instructions(text)
    if not steps or not steps[0].upper().startswith("FROM "):
        problems.append("the first instruction must be FROM")
    for step in steps:
        keyword, _, argument = step.partition(" ")
        if keyword.upper() not in ALLOWED_INSTRUCTIONS:
            problems.append(
                f"instruction {keyword} is not allowed; use {', '.join(ALLOWED_INSTRUCTIONS)}"
            )
        elif keyword.upper() == "COPY":
            *sources, _ = argument.split() or [""]
            for source in sources:
                if source.startswith("--"):
                    problems.append(f"COPY option {source} is not supported")
                    continue
                stem = source.rstrip("/")
                if not any(f == stem or f.startswith(stem + "/") for f in files):
                    problems.append(f"COPY source {source} is not among the supplied files")
    if not problems:
        problems += _apptainer_problems(text)
    return problems


def _apptainer_problems(text: str) -> list[str]:
    """The same definition must build under Apptainer on a cluster: convert it now."""
    try:
        from spython.logger import bot

        from tmax.sandbox.apptainer import dockerfile_to_definition
    except ImportError:  # spython not installed: the cluster build will tell
        return []
    # spython warns on stderr that COPY sources are missing from the current directory
    # (they are in the task's build context): quiet its warnings while converting.
    with _SPYTHON_QUIET:
        level, bot.level = bot.level, ERROR_LEVEL
        try:
            dockerfile_to_definition(text)
        except ValueError as error:
            return [f"the Dockerfile does not convert to an Apptainer definition: {error}"]
        finally:
            bot.level = level
    return []


class SandboxCheck:
    """The real check, on one of our sandbox backends."""

    def __init__(self, backend: str, run_id: str = "llm-generate") -> None:
        self.backend = backend
        self.run_id = run_id

    def __call__(self, task_dir: Path) -> CheckResult:
        initial = task_dir / "tests" / INITIAL_TESTS
        with tempfile.TemporaryDirectory(prefix="tmax-initial-") as tmp:
            tests = Path(tmp)
            write_text(tests / INITIAL_TESTS, initial.read_text(encoding="utf-8"))
            write_text(tests / "test.sh", _INITIAL_TEST_SH)
            (tests / "test.sh").chmod(0o755)
            try:
                # pytest's verdict on the initial tests (not the task's test_task.py)
                with sandbox_for_task(task_dir, self.backend, run_id=self.run_id,
                                      pytest_verdict=(INITIAL_TESTS,)) as box:  # fmt: skip
                    result = box.verify(tests)
            except (SandboxError, ImageError, TaskFormatError) as error:
                return CheckResult(False, "image build", str(error))
        if result.reward == 1.0:
            return CheckResult(True)
        return CheckResult(False, "initial-state tests", result.output or result.reason or "")
