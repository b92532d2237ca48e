"""Shared pieces of the LLM generator tests: specs, a well-behaved scripted model
answering stage by stage, and a fake environment check."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tmax.generate.llm.check import CheckResult
from tmax.generate.llm.prompts import base_dockerfile
from tmax.generate.llm.settings import LLMSettings
from tmax.models.scripted_server import Reply
from tmax.taxonomy import TaskSpec

BASE_SPEC = TaskSpec(
    spec_id="spec-llm000000",
    index=0,
    domain="file_operations",
    skill_type="Navigation",
    primitive_skills=(
        "count lines in text files",
        "redirect command output into files",
        "locate files with find",
    ),
    persona="A lab manager tidying a shared drive.",
    language="bash",
    task_complexity="short",
    command_complexity="bash_only",
    fixture_kind="text_only",
    verifier_kind="exact_text",
)


def make_spec(number: int, persona: str | None = None) -> TaskSpec:
    return replace(
        BASE_SPEC,
        spec_id=f"spec-llm{number:06d}",
        index=number,
        persona=persona or f"A lab manager tidying shared drive number {number}.",
    )


TASK = """Here is the task.
<instruction>
I need the number of lines in /app/data/input.txt written to /app/out.txt.
</instruction>
<truth>
The input has exactly 3 lines, so /app/out.txt must contain "3".
</truth>
<solution>
wc -l < /app/data/input.txt > /app/out.txt
</solution>
"""

INITIAL_TESTS = """<initial_tests>
```python
import os


def test_input_present():
    with open("/app/data/input.txt") as handle:
        assert len(handle.read().splitlines()) == 3


def test_output_absent():
    assert not os.path.exists("/app/out.txt")
```
</initial_tests>
"""

FINAL_TESTS = """<final_tests>
def test_count():
    with open("/app/data/input.txt") as handle:
        expected = len(handle.read().splitlines())
    with open("/app/out.txt") as handle:
        assert handle.read().strip() == str(expected), "the line count of the input"
</final_tests>
"""


def environment_answer(domain: str = "file_operations", extra: str = "") -> str:
    dockerfile = base_dockerfile(domain) + "\nRUN mkdir -p /app/data\nCOPY app/data/ /app/data/\n"
    return (
        f"<dockerfile>\n{dockerfile}{extra}</dockerfile>\n"
        '<file path="app/data/input.txt">\nalpha\nbeta\ngamma\n</file>\n'
    )


def stage_of(request: dict[str, Any]) -> str:
    """Which generation stage a request belongs to, from its last user message."""
    last = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    for marker, stage in (
        ("Step 1 of 4", "task"),
        ("Step 2 of 4", "initial_tests"),
        ("Step 3 of 4", "final_tests"),
        ("Step 4 of 4", "environment"),
        ("container check failed", "feedback"),
    ):
        if marker in last:
            return stage
    raise AssertionError(f"unrecognised request: {last[:200]}")


def persona_of(request: dict[str, Any]) -> str:
    first = next(m for m in request["messages"] if m["role"] == "user")["content"]
    return first.split("The person asking: ", 1)[1].splitlines()[0]


GOOD = {
    "task": TASK,
    "initial_tests": INITIAL_TESTS,
    "final_tests": FINAL_TESTS,
    "environment": environment_answer(),
    "feedback": environment_answer(),
}


def stage_responder(
    overrides: dict[str, dict[str, str]] | None = None, delay_sec: float = 0.0
) -> Callable[[dict[str, Any]], Reply]:
    """Good answers per stage; ``overrides[persona][stage]`` replaces one for one spec."""
    overrides = overrides or {}

    def respond(request: dict[str, Any]) -> Reply:
        stage = stage_of(request)
        content = overrides.get(persona_of(request), {}).get(stage, GOOD[stage])
        return Reply(content=content, delay_sec=delay_sec, prompt_tokens=100, completion_tokens=20)

    return respond


class FakeCheck:
    """Returns scripted verdicts in order (then passes); records the task dirs."""

    def __init__(self, results: list[CheckResult] | None = None) -> None:
        self.results = list(results or [])
        self.calls: list[Path] = []
        self._lock = threading.Lock()

    def __call__(self, task_dir: Path) -> CheckResult:
        with self._lock:
            self.calls.append(task_dir)
            return self.results.pop(0) if self.results else CheckResult(True)


def settings_for(base_url: str, cache_dir: Path, **changes: Any) -> LLMSettings:
    values: dict[str, Any] = {
        "model": "scripted-generator",
        "base_url": base_url,
        "api_key_env": None,
        "concurrency": 2,
        "timeout_sec": 5.0,
        "max_retries": 2,
        "backoff_sec": 0.01,
        "temperature": 0.0,
        "max_tokens": 512,
        "cache_dir": str(cache_dir),
        "cost_per_mtok_input": 1.0,
        "cost_per_mtok_output": 2.0,
    }
    values.update(changes)
    return LLMSettings(**values)
