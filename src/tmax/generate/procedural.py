"""The offline procedural generator: spec → family → Harbor task directory.

No model and no network: the embedded default and CI generate with this, and every
task it makes carries a reference solution. Same spec and seed → byte-identical
task directory.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tmax.generate import families as _families  # noqa: F401  (registers the families)
from tmax.generate.audit import realised_skills
from tmax.generate.families.easy import EASY_FAMILIES, easy_family_for
from tmax.generate.family import CODE_LANGUAGES, FAMILIES, Draft, Family, RenderContext
from tmax.generate.personas import fitting_persona
from tmax.sandbox.images import domain_definition
from tmax.tasks import Task, TaskConfig, TaskFile, TaskMeta
from tmax.taxonomy import TaskSpec

log = logging.getLogger("tmax.generate")

GENERATOR_VERSION = "procedural/1"
LANGUAGE_FALLBACK = {
    "cpp": "c",
    "rust": "c",
    "go": "c",
    "multi_language": "python",
    "any": "python",
}
"""Axis languages without reference programs, mapped to the nearest one we write."""
TIERS = ("full", "easy")
"""``generation.tier``: the families of the paper's tasks, or the easy tier of one- and
two-command tasks for the embedded default's miniature (tmax.generate.families.easy)."""

PYTEST_VERDICT = ["test_task.py"]
"""``[metadata] pytest_verdict`` of every generated task: in our sandboxes the reward is
pytest's exit status on these files, seen by the verifier's own process (no reward file
that a program under test could write); ``test.sh`` says the same for Harbor."""

TEST_SH = """#!/bin/bash
# Verifier: reward 1 exactly when every check in test_task.py passes.
mkdir -p /logs/verifier
if python3 -m pytest -q -p no:cacheprovider /tests/test_task.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


class GenerationError(RuntimeError):
    """A spec no family can render, or a family that broke its contract."""


def _rng(spec: TaskSpec, seed: int, salt: str) -> random.Random:
    return random.Random(f"tmax-task/{seed}/{spec.spec_id}/{salt}")


def family_by_name(name: str) -> Family:
    for families in [*FAMILIES.values(), EASY_FAMILIES]:
        for family in families:
            if family.name == name:
                return family
    raise GenerationError(f"no task family named {name!r}")


def choose_family(
    spec: TaskSpec, seed: int, family_name: str | None = None, tier: str = "full"
) -> tuple[Family, dict[str, str]]:
    """The family for a spec, preferring one that realises every axis as asked
    (among the ``tier``'s families: :data:`TIERS`).

    Returns the family and the axes it realises differently from the spec (empty
    when it matches); those are recorded in ``tmax.json`` and the report. The persona
    is one of them when the spec's does not fit the family's story
    (:mod:`tmax.generate.personas`).
    """
    if tier not in TIERS:
        raise GenerationError(f"unknown generation tier {tier!r}; use one of {TIERS}")
    if tier == "easy":
        try:
            families: list[Family] | None = [easy_family_for(spec.domain)]
        except KeyError as error:
            raise GenerationError(str(error.args[0])) from None
    else:
        families = FAMILIES.get(spec.domain)
    if not families:
        raise GenerationError(f"no procedural task family for domain {spec.domain!r}")
    needs_service = spec.command_complexity == "bash_code_services"

    def score(family: Family) -> tuple[int, int]:
        """The axes it realises as asked; then, among equals, how many of the sampled
        primitive skills it can make a tested requirement of (``Family.skills``)."""
        return (
            4 * (spec.verifier_kind in family.verifier_kinds)
            + 2 * (spec.fixture_kind in family.fixture_kinds)
            + (not needs_service or family.services),
            sum(skill in family.skills for skill in spec.primitive_skills),
        )

    if family_name is not None:
        family = family_by_name(family_name)
    else:
        best = max(score(f) for f in families)
        candidates = [f for f in families if score(f) == best]
        family = _rng(spec, seed, "family").choice(candidates)
    realised: dict[str, str] = {}
    if spec.verifier_kind not in family.verifier_kinds:
        realised["verifier_kind"] = sorted(family.verifier_kinds)[0]
    if spec.fixture_kind not in family.fixture_kinds:
        realised["fixture_kind"] = sorted(family.fixture_kinds)[0]
    if needs_service and not family.services:
        realised["command_complexity"] = "bash_code"
    if tier == "easy" and spec.command_complexity != "bash_only":
        realised["command_complexity"] = "bash_only"  # the easy tier asks for no program
    language = LANGUAGE_FALLBACK.get(spec.language, spec.language)
    if language not in family.languages:
        language = next(lang for lang in CODE_LANGUAGES if lang in family.languages)
    if language != spec.language:
        realised["language"] = language
    persona = fitting_persona(family.name, spec)
    if persona != spec.persona:
        realised["persona"] = persona
    return family, realised


def _instruction(persona: str, body: str) -> str:
    persona = persona.rstrip(".")
    persona = persona[0].lower() + persona[1:] if persona else persona
    return f"I'm {persona}.\n\n{body.strip()}\n"


@functools.cache
def _base_dockerfile(domain: str) -> str:
    """The domain's base Dockerfile without its comments (read once per process)."""
    definition = domain_definition(domain)
    lines = [line for line in definition.read_text().splitlines() if not line.startswith("#")]
    return "\n".join(lines).strip() + "\n"


def _dockerfile(domain: str, draft: Draft) -> str:
    text = _base_dockerfile(domain)
    if draft.files:
        text += "COPY app/ /app/\n"
    for step in draft.dockerfile_steps:
        text += step.rstrip() + "\n"
    return text


def _text(content: str | bytes) -> str:
    return content if isinstance(content, str) else content.decode("utf-8", "replace")


def _as_file(content: str | bytes, executable: bool = False) -> TaskFile:
    data = content.encode("utf-8") if isinstance(content, str) else content
    return TaskFile(data, executable)


def render_task(
    spec: TaskSpec, seed: int, family_name: str | None = None, tier: str = "full"
) -> Task:
    """Render one spec into an in-memory :class:`Task` (deterministic); ``family_name``
    forces a family (tests), otherwise the best fit for the spec among the ``tier``'s
    families is chosen."""
    family, realised = choose_family(spec, seed, family_name, tier)
    ctx = RenderContext(
        spec=spec,
        rng=_rng(spec, seed, family.name),
        verifier_kind=realised.get("verifier_kind", spec.verifier_kind),
        fixture_kind=realised.get("fixture_kind", spec.fixture_kind),
        language=realised.get("language", spec.language),
    )
    try:
        draft = family.render(ctx)
    except Exception as error:  # a family bug must name the family and the spec
        raise GenerationError(
            f"family {family.name} failed on {spec.spec_id}: {error!r}"
        ) from error
    if "test_task.py" not in draft.tests:
        raise GenerationError(f"family {family.name} wrote no tests/test_task.py")
    instruction = _instruction(realised.get("persona", spec.persona), draft.instruction)
    test_source = "".join(_text(content) for rel, content in sorted(draft.tests.items())
                          if rel.endswith(".py"))  # fmt: skip
    skills = realised_skills(family, spec.primitive_skills, instruction, test_source, ctx.level)
    environment = {"Dockerfile": _as_file(_dockerfile(spec.domain, draft))}
    for rel, content in sorted(draft.files.items()):
        environment[f"app/{rel}"] = _as_file(content, rel in draft.executable)
    tests = {"test.sh": _as_file(TEST_SH, True)}
    tests.update({rel: _as_file(content) for rel, content in sorted(draft.tests.items())})
    solution = "#!/bin/bash\nset -euo pipefail\n" + draft.solution.strip() + "\n"
    metadata: dict[str, Any] = {
        "generator": GENERATOR_VERSION,
        "family": family.name,
        "pytest_verdict": PYTEST_VERDICT,
    }
    if draft.keep_agent_processes:
        metadata["keep_agent_processes"] = True
    config = TaskConfig(
        task={"name": f"tmax/{spec.spec_id}", "keywords": [spec.domain, spec.skill_type]},
        metadata=metadata,
        verifier={"timeout_sec": draft.verifier_timeout_sec},
        agent={"timeout_sec": draft.agent_timeout_sec},
        environment={
            "cpus": 1,
            "memory_mb": draft.memory_mb,
            "network_mode": "public" if draft.network else "no-network",
        },
    )
    return Task(
        name=spec.spec_id,
        instruction=instruction,
        config=config,
        environment=environment,
        tests=tests,
        solution={"solve.sh": _as_file(solution, True)},
        meta=TaskMeta.from_spec(
            spec,
            backend="procedural",
            version=GENERATOR_VERSION,
            family=family.name,
            seed=seed,
            realised=realised,
            skills=skills,
            solution_commands=count_commands(draft.solution),
        ),
    )


def count_commands(script: str) -> int:
    """Commands in a shell script: non-empty, non-comment lines outside heredocs."""
    count, heredoc = 0, None
    for raw in script.splitlines():
        line = raw.strip()
        if heredoc is not None:
            if line == heredoc:
                heredoc = None
            continue
        if not line or line.startswith("#"):
            continue
        count += 1
        if "<<" in line:
            marker = line.split("<<", 1)[1].strip().lstrip("-").strip("'\"")
            heredoc = marker.split()[0].strip("'\"") if marker else None
    return count


def task_digest(task_dir: Path) -> str:
    """sha256 over a task directory's files (for determinism checks and caching)."""
    hasher = hashlib.sha256()
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file()):
        hasher.update(path.relative_to(task_dir).as_posix().encode() + b"\0")
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


def render_all(specs: Sequence[TaskSpec], seed: int, tier: str = "full") -> list[Task]:
    return [render_task(spec, seed, tier=tier) for spec in specs]
