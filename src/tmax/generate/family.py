"""Task families: parametrised generators that turn one spec into one verifiable task.

A family knows one kind of job in one domain (say, "reconcile two ledgers" in
data_processing). Given a :class:`RenderContext` — the spec, a seeded random
generator and what the axes ask for — it returns a :class:`Draft`: the request in a
user's words, the fixture files, the checks, and a reference solution. The
procedural generator (``tmax.generate.procedural``) turns drafts into Harbor task
directories; the validator proves every solution scores 1 and a no-op scores 0.

How the axes reach a family:

- ``level`` (1–4, from task complexity) must change the task for real: more input
  files, more deliverables, more constraints; level 4 is a multi-stage job that
  takes tens of commands.
- ``needs_code`` / ``needs_service`` (from command complexity): the solution must
  include a program in ``language`` (``bash_code``) or a running service
  (``bash_code_services``).
- ``verifier_kind`` and ``fixture_kind`` choose how the result is checked and what
  the inputs look like; a family declares which ones it can realise, and the
  generator records what was realised when it differs from the spec.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from tmax.generate.audit import TEST_FUNCTIONS, Rule, Units
from tmax.taxonomy import TaskSpec

LEVELS = {"short": 1, "moderate": 2, "complex": 3, "intricate": 4}
CODE_LANGUAGES = ("python", "bash", "c")
"""Languages the procedural families write reference programs in. Other languages
of the axis (cpp, rust, go, ...) are realised as the nearest of these and recorded."""


@dataclass(frozen=True)
class RenderContext:
    """Everything a family needs to render one task deterministically."""

    spec: TaskSpec
    rng: random.Random
    verifier_kind: str
    fixture_kind: str
    language: str
    """The language the task's code must be written in (one of CODE_LANGUAGES)."""

    @property
    def level(self) -> int:
        return LEVELS[self.spec.task_complexity]

    @property
    def needs_code(self) -> bool:
        return self.spec.command_complexity != "bash_only"

    @property
    def needs_service(self) -> bool:
        return self.spec.command_complexity == "bash_code_services"

    def pick(self, options: list[str] | tuple[str, ...]) -> str:
        return self.rng.choice(list(options))


@dataclass
class Draft:
    """One rendered task before it becomes a directory.

    ``files`` land in ``/app`` (``environment/app/…`` + ``COPY app/ /app/``);
    ``tests`` in ``/tests`` next to the generated ``test.sh``, which runs
    ``pytest`` on ``test_task.py`` (the toolbox's pytest, stdlib only) and writes
    a binary reward; ``solution`` is the body of ``solution/solve.sh``.
    """

    instruction: str
    solution: str
    tests: Mapping[str, str | bytes]
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    executable: frozenset[str] = frozenset()
    """Paths in ``files`` that must be executable."""
    dockerfile_steps: tuple[str, ...] = ()
    """Extra Dockerfile instructions after the COPY (e.g. building a stripped binary)."""
    network: bool = False
    keep_agent_processes: bool = False
    """Set when the tests talk to a service the agent leaves running."""
    memory_mb: int = 1024
    agent_timeout_sec: float = 900.0
    verifier_timeout_sec: float = 180.0


class Family(ABC):
    """A parametrised task generator for one domain."""

    name: ClassVar[str]
    domain: ClassVar[str]
    verifier_kinds: ClassVar[frozenset[str]] = frozenset({"exact_text"})
    fixture_kinds: ClassVar[frozenset[str]] = frozenset({"text_only"})
    languages: ClassVar[frozenset[str]] = frozenset(CODE_LANGUAGES)
    services: ClassVar[bool] = False
    """Whether the family can make the solution run a service (bash_code_services)."""
    rules: ClassVar[tuple[Rule, ...]] = ()
    """The rules its instructions state and its tests check, per level
    (:mod:`tmax.generate.audit`); none declared: the family is not audited."""
    units: ClassVar[Units] = TEST_FUNCTIONS
    """What counts as one check in its tests (the audit's ``tested but not stated``)."""
    skills: ClassVar[Mapping[str, str]] = {}
    """The domain's primitive skills (the taxonomy's exact text) this family can make a
    requirement of, each with the id of the rule (in ``rules``) that states and tests
    it. A sampled skill is realised in a task exactly when its rule applies there and
    passes the audit (:func:`tmax.generate.audit.realised_skills`); any other sampled
    skill is recorded as not realised."""

    @abstractmethod
    def render(self, ctx: RenderContext) -> Draft:
        """Render the task for ``ctx``; must depend only on ``ctx`` (determinism)."""


FAMILIES: dict[str, list[Family]] = {}
"""Registered families by domain, in registration order."""


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: add a family to :data:`FAMILIES` (names must be unique)."""
    for families in FAMILIES.values():
        if any(f.name == cls.name for f in families):
            raise ValueError(f"two task families are named {cls.name!r}")
    FAMILIES.setdefault(cls.domain, []).append(cls())
    return cls
