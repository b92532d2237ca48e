"""One spec through the LLM generator (paper §3.1), as one conversation:

(a) the task and its privileged truth (with a reference solution),
(b) initial-state tests, (c) final-state tests for the spec's verifier kind,
(d) the container definition; then the image is built in a sandbox and the initial
tests must pass in it, with build or test errors fed back up to ``build_retries``
times. The result is a Harbor task directory of the same shape as the procedural
generator's. Any breach (a bad section, a Dockerfile that never builds, tests that
keep failing) quarantines the spec with its reason and the whole transcript; it never
stops the shard. An endpoint that keeps failing does stop it (see ``SpecRun.ask``).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmax.generate.llm.check import INITIAL_TESTS, CheckResult, EnvironmentCheck, lint_dockerfile
from tmax.generate.llm.endpoint import GeneratorClient, UsageTotals
from tmax.generate.llm.prompts import (
    STAGE_SECTIONS,
    STAGES,
    command_range,
    feedback_prompt,
    prompt_hashes,
    stage_prompt,
    system_prompt,
)
from tmax.generate.llm.sections import SectionError, Sections, parse_sections
from tmax.generate.llm.settings import GENERATOR_VERSION, LLMSettings
from tmax.generate.procedural import PYTEST_VERDICT, TEST_SH, count_commands
from tmax.io import write_json
from tmax.models.client import ContextLengthExceeded
from tmax.tasks import Task, TaskConfig, TaskFile, TaskFormatError, TaskMeta, write_task
from tmax.taxonomy import TaskSpec

log = logging.getLogger("tmax.generate.llm")

QUARANTINE_DIR = ".quarantine"
"""Per shard, ``.quarantine/<spec_id>/`` keeps a rejected spec's reason and transcript
(hidden, so validation and export never mistake it for a task)."""


class Quarantine(Exception):
    """Stop generating this spec; ``kind`` is the countable reason."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


@dataclass
class Draft:
    """What the model has written so far for one spec."""

    instruction: str = ""
    truth: str = ""
    solution: str = ""
    initial_tests: str = ""
    final_tests: str = ""
    dockerfile: str = ""
    files: dict[str, str] = field(default_factory=dict)

    def take(self, stage: str, sections: Sections) -> None:
        """Record a stage's (or a feedback answer's) sections."""
        for name in (
            "instruction",
            "truth",
            "solution",
            "initial_tests",
            "final_tests",
            "dockerfile",
        ):
            value = sections.get(name)
            if value is not None:
                setattr(self, name, value if value.endswith("\n") else value + "\n")
        for path, body in sections.files():
            self.files[_environment_path(path)] = body


def _environment_path(path: str) -> str:
    """A model-given file path inside ``environment/`` (``./`` prefixes dropped; hidden
    names such as ``.env`` kept as they are)."""
    clean = path.strip()
    while clean.startswith("./"):
        clean = clean[2:]
    parts = Path(clean).parts
    if not clean or clean.startswith("/") or ".." in parts or clean == "Dockerfile":
        raise Quarantine(
            "bad file path", f"file section path {path!r} is not a plain relative path"
        )
    return clean


@dataclass
class SpecOutcome:
    """How one spec ended, for the shard's summary."""

    spec_id: str
    ok: bool
    reason: str | None
    usage: UsageTotals
    build_attempts: int
    seconds: float


@dataclass
class SpecRun:
    """One spec's conversation, accounting and timings while it is generated."""

    spec: TaskSpec
    client: GeneratorClient
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: UsageTotals = field(default_factory=UsageTotals)
    timings: dict[str, float] = field(default_factory=dict)
    build_attempts: int = 0

    def ask(self, prompt: str, stage: str, timing: str | None = None) -> Sections:
        """Send one user turn and parse the answer against the stage's sections."""
        self.messages.append({"role": "user", "content": prompt})
        started = time.monotonic()
        try:
            reply = self.client.chat(self.messages)
        except ContextLengthExceeded as error:
            raise Quarantine("context length exceeded", str(error)) from None
        # A ModelError (the endpoint kept failing after its retries) is not the spec's
        # fault: it stops the shard, so Snakemake marks the job failed and a rerun
        # resumes from the call cache instead of keeping a shard of quarantines.
        key = timing or stage
        self.timings[key] = round(self.timings.get(key, 0.0) + time.monotonic() - started, 3)
        self.usage.add(reply, self.client.settings)
        self.messages.append({"role": "assistant", "content": reply.content})
        try:
            return parse_sections(reply.content, STAGE_SECTIONS[stage])
        except SectionError as error:
            detail = str(error).removeprefix(f"{error.kind}: ")
            raise Quarantine(error.kind, f"{detail} in the {stage} answer") from None


def _agent_timeout(spec: TaskSpec) -> float:
    """A minute per command at the top of the spec's complexity range, at least 10 minutes."""
    _, most = command_range(spec.task_complexity) or (0, 10)
    return float(max(600, 60 * most))


def _script(body: str) -> str:
    return body if body.startswith("#!") else "#!/bin/bash\nset -euo pipefail\n" + body


def assemble(spec: TaskSpec, draft: Draft, generator: dict[str, Any]) -> Task:
    """The Harbor task directory, in memory, shaped like the procedural generator's."""
    environment = {"Dockerfile": TaskFile(draft.dockerfile.encode())}
    for rel, body in sorted(draft.files.items()):
        environment[rel] = TaskFile(body.encode(), executable=body.startswith("#!"))
    config = TaskConfig(
        task={"name": f"tmax/{spec.spec_id}", "keywords": [spec.domain, spec.skill_type]},
        metadata={
            "generator": GENERATOR_VERSION,
            "model": generator.get("model", ""),
            "pytest_verdict": PYTEST_VERDICT,
        },
        verifier={"timeout_sec": 300.0},
        agent={"timeout_sec": _agent_timeout(spec)},
        environment={"cpus": 1, "memory_mb": 2048, "network_mode": "no-network"},
    )
    return Task(
        name=spec.spec_id,
        instruction=draft.instruction,
        config=config,
        environment=environment,
        tests={
            "test.sh": TaskFile(TEST_SH.encode(), executable=True),
            "test_task.py": TaskFile(draft.final_tests.encode()),
            INITIAL_TESTS: TaskFile(draft.initial_tests.encode()),
        },
        solution={
            "solve.sh": TaskFile(_script(draft.solution).encode(), executable=True),
            "truth.md": TaskFile(draft.truth.encode()),
        },
        meta=TaskMeta.from_spec(spec, **generator),
    )


@dataclass
class Pipeline:
    """The per-spec generator, shared by the worker threads of a shard."""

    client: GeneratorClient
    check: EnvironmentCheck
    output_dir: Path
    build_slots: AbstractContextManager[Any] | threading.Semaphore = field(
        default_factory=nullcontext
    )

    @property
    def settings(self) -> LLMSettings:
        return self.client.settings

    def run(self, spec: TaskSpec) -> SpecOutcome:
        """Generate one spec; on success its task directory is in ``output_dir``."""
        started = time.monotonic()
        run = SpecRun(spec, self.client)
        try:
            task = self._generate(run)
            write_task(task, self.output_dir)
            shutil.rmtree(self.output_dir / QUARANTINE_DIR / spec.spec_id, ignore_errors=True)
            reason = None
        except Quarantine as stop:
            reason = str(stop)
            self._quarantine(run, stop)
        finally:
            shutil.rmtree(self._staging(spec), ignore_errors=True)
        return SpecOutcome(
            spec.spec_id,
            reason is None,
            reason,
            run.usage,
            run.build_attempts,
            round(time.monotonic() - started, 3),
        )

    def _generate(self, run: SpecRun) -> Task:
        draft = Draft()
        run.messages.append({"role": "system", "content": system_prompt(run.spec)})
        for stage in STAGES:
            draft.take(stage, run.ask(stage_prompt(stage, run.spec), stage))
        attempts = self.settings.build_retries + 1
        for attempt in range(1, attempts + 1):
            task = assemble(run.spec, draft, self._generator_block(run, draft))
            result = self._check(run, task, draft)
            if result.ok:
                return assemble(run.spec, draft, self._generator_block(run, draft))
            if attempt == attempts:
                raise Quarantine(
                    f"{result.step} failed",
                    f"still failing after {self.settings.build_retries} retries: "
                    f"{result.log.strip()[-500:]}",
                )
            log.info(
                "%s: %s failed (attempt %d/%d); feeding the error back",
                run.spec.spec_id,
                result.step,
                attempt,
                attempts,
            )
            prompt = feedback_prompt(result.step, result.log, attempt, attempts)
            draft.take("feedback", run.ask(prompt, "feedback", timing="feedback"))
        raise AssertionError("unreachable")

    def _check(self, run: SpecRun, task: Task, draft: Draft) -> CheckResult:
        run.build_attempts += 1
        problems = lint_dockerfile(draft.dockerfile, set(draft.files))
        if problems:
            return CheckResult(False, "Dockerfile check", "\n".join(problems))
        started = time.monotonic()
        try:
            task_dir = write_task(task, self._staging(run.spec))
        except TaskFormatError as error:
            raise Quarantine("malformed task", str(error)) from None
        with self.build_slots:
            result = self.check(task_dir)
        run.timings["checks"] = round(
            run.timings.get("checks", 0.0) + time.monotonic() - started, 3
        )
        return result

    def _generator_block(self, run: SpecRun, draft: Draft) -> dict[str, Any]:
        return {
            "backend": "llm",
            "version": GENERATOR_VERSION,
            "family": "llm",
            "model": self.settings.model,
            "prompt_hashes": prompt_hashes(),
            "usage": run.usage.to_dict(),
            "build_attempts": run.build_attempts,
            "retries": max(0, run.build_attempts - 1),
            "timings_sec": dict(run.timings),
            "solution_commands": count_commands(draft.solution),
        }

    def _staging(self, spec: TaskSpec) -> Path:
        return self.output_dir / ".staging" / spec.spec_id

    def _quarantine(self, run: SpecRun, stop: Quarantine) -> None:
        """Keep the reason and every message (the raw responses included)."""
        target = self.output_dir / QUARANTINE_DIR / run.spec.spec_id
        write_json(target / "transcript.json", run.messages)
        write_json(
            target / "reason.json",
            {
                "spec_id": run.spec.spec_id,
                "reason": stop.kind,
                "detail": stop.detail,
                "axes": run.spec.axes(),
                "usage": run.usage.to_dict(),
                "build_attempts": run.build_attempts,
                "timings_sec": dict(run.timings),
            },
        )
        log.warning("quarantined %s: %s", run.spec.spec_id, stop)
