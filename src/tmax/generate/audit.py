"""Instruction–test consistency: every rule a task states is tested, every test is stated.

A family declares its rules (:class:`Rule`, on the family class as ``rules``): which
task complexity levels a rule applies to, the sentence that states it in the
instruction and the code that checks it in the tests. :func:`audit_task` reads one
rendered task against those declarations, mechanically:

- a rule that applies must be stated (``stated nowhere``) and tested (``not tested``:
  its test marker is missing, or lies only in an ``if level >= N:`` block for a higher
  level);
- a rule that does not apply must not be stated (``stated but not tested at this
  level``): a sentence promising a rule the tests do not check misleads the agent;
- every test function (``def test_…``, or each entry of the family's ``units``) must be
  claimed by the test marker of a rule that applies (``tested but not stated``).

The collect stage (:func:`tmax.generate.stage.collect`) quarantines a task that fails,
with the reason, and counts the audit per family in the generation report. Families
without declarations are counted as not audited, never quarantined.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ALL_LEVELS = frozenset({1, 2, 3, 4})

_TEST_DEF = re.compile(r"^def (test_\w+)\(", re.MULTILINE)
_TOP_LEVEL = re.compile(r"^(?:def |class |@|[A-Za-z_]\w* = )", re.MULTILINE)
_GUARD = re.compile(r'[^\n]*\n\s+(?:""".*?"""\s+)?if not CFG\["(\w+)"\]:\s*\n\s+return\b', re.S)
_LEVEL_GUARD = re.compile(r'^( *)if (?:level|CFG\["level"\]) >= (\d):\s*$', re.MULTILINE)
_SETTINGS = re.compile(r"^CFG_JSON = (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Rule:
    """One rule of a family's task, as the instruction states it and the tests check it.

    ``stated`` and ``tested`` are regular expressions. Each match of the first
    ``stated`` pattern is one statement of the rule; its named groups fill ``{name}``
    placeholders in the ``tested`` patterns (escaped), so a test marker can name the
    path or word the sentence asked for (``tested`` goes through ``str.format``: a
    literal brace is ``{{`` or ``}}``). The audit reads level gates written as
    ``if CFG["level"] >= N:`` blocks and switches as ``if not CFG[key]: return``; a
    test skipped any other way (``pytest.mark.skipif``) still counts as a check.
    """

    id: str
    stated: tuple[str, ...]
    tested: tuple[str, ...]
    levels: frozenset[int] = ALL_LEVELS
    """The task complexity levels (1–4) where the rule applies."""
    when: Mapping[str, Any] = field(default_factory=dict)
    """Task settings (the tests' ``CFG``) that must hold too, e.g. ``{"code": True}``."""
    drawn: bool = False
    """The family draws the rule at random at its levels: it applies exactly when it is
    stated (then it must be tested); outside its levels it must not be stated."""


@dataclass(frozen=True)
class Units:
    """What counts as one checked behaviour in a family's tests: the test functions by
    default; a family whose single parametrised test walks a table of expectations
    names the table's entries instead."""

    pattern: str = _TEST_DEF.pattern
    flags: int = re.MULTILINE


TEST_FUNCTIONS = Units()


def task_settings(tests: str) -> dict[str, Any]:
    """The ``CFG`` a family's tests carry (``CFG_JSON = '…'``), or ``{}``."""
    match = _SETTINGS.search(tests)
    if not match:
        return {}
    try:
        return dict(json.loads(eval_string_literal(match.group(1))))
    except (ValueError, SyntaxError):
        return {}


def eval_string_literal(text: str) -> str:
    """The value of a Python string literal (``repr`` of a str), without ``eval``."""
    value = ast.literal_eval(text.strip())
    if not isinstance(value, str):
        raise ValueError("not a string literal")
    return value


def _applies(rule: Rule, level: int, settings: Mapping[str, Any]) -> bool:
    return level in rule.levels and all(settings.get(k) == v for k, v in rule.when.items())


def dead_spans(tests: str, level: int) -> list[tuple[int, int]]:
    """Blocks of the tests that check nothing at ``level``: the body of each
    ``if level >= N:`` (or ``CFG["level"]``) with N above it."""
    spans = []
    for match in _LEVEL_GUARD.finditer(tests):
        if int(match.group(2)) <= level:
            continue
        indent, end = len(match.group(1)), match.end()
        for line in re.finditer(r"^( *)\S.*$", tests[match.end() :], re.MULTILINE):
            if len(line.group(1)) <= indent:
                break
            end = match.end() + line.end()
        spans.append((match.start(), end))
    return spans


def _inside(start: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= start < b for a, b in spans)


def _units(
    tests: str, units: Units, settings: Mapping[str, Any], dead: list[tuple[int, int]]
) -> list[tuple[str, int, int]]:
    """(name, start, end) of each behaviour the tests check. A test function checks
    nothing, and is left out, when it returns at once because its ``CFG`` switch is off
    (``if not CFG["code"]: return``) or when all its asserts lie in dead blocks."""
    if units is not TEST_FUNCTIONS:
        found = re.finditer(units.pattern, tests, units.flags)
        return [(m.group(1) if m.groups() else m.group(0), m.start(), m.end()) for m in found]
    tops = [m.start() for m in _TOP_LEVEL.finditer(tests)] + [len(tests)]
    spans = []
    for match in _TEST_DEF.finditer(tests):
        end = next(t for t in tops if t > match.start())
        guard = _GUARD.match(tests, match.start(), end)
        if guard and not settings.get(guard.group(1)):
            continue
        asserts = [m.start() for m in re.finditer(r"\bassert\b", tests[match.start() : end])]
        if _inside(match.start(), dead) or (
            asserts
            and any(match.start() <= a < end for a, _ in dead)
            and all(_inside(match.start() + a, dead) for a in asserts)
        ):
            continue
        spans.append((match.group(1), match.start(), end))
    return spans


def audit_task(
    instruction: str, tests: str, rules: tuple[Rule, ...], level: int, units: Units = TEST_FUNCTIONS
) -> list[str]:
    """The audit's findings for one task, ``"<rule id>: <what>"`` each (empty: passed).

    ``tests`` is the tests' source (all files), ``level`` the task complexity (1–4).
    """
    return _audit(instruction, tests, rules, level, units)[0]


def checked_rules(instruction: str, tests: str, rules: tuple[Rule, ...], level: int) -> set[str]:
    """The ids of the rules that apply to this task and are both stated and tested in it
    (no finding of the audit names them)."""
    findings, applied = _audit(instruction, tests, rules, level, TEST_FUNCTIONS)
    failed = {finding.split(":", 1)[0] for finding in findings}
    return {rule for rule in applied if rule not in failed}


def _audit(
    instruction: str, tests: str, rules: tuple[Rule, ...], level: int, units: Units
) -> tuple[list[str], list[str]]:
    """The findings, and the ids of the rules that apply to the task."""
    settings = task_settings(tests)
    dead = dead_spans(tests, level)
    findings: list[str] = []
    applied: list[str] = []
    claimed: list[tuple[int, int]] = []
    for rule in rules:
        statements = list(re.finditer(rule.stated[0], instruction))
        stated_any = bool(statements) or any(re.search(p, instruction) for p in rule.stated[1:])
        applies = _applies(rule, level, settings) and (stated_any or not rule.drawn)
        if not applies:
            if stated_any:
                findings.append(f"{rule.id}: stated but not tested at this level")
            continue
        applied.append(rule.id)
        if not statements or not all(re.search(p, instruction) for p in rule.stated[1:]):
            findings.append(f"{rule.id}: stated nowhere")
            continue
        for statement in statements:
            values = {k: re.escape(v) for k, v in statement.groupdict().items() if v is not None}
            for pattern in rule.tested:
                found = [
                    m
                    for m in re.finditer(pattern.format(**values), tests)
                    if not _inside(m.start(), dead)
                ]
                if not found:
                    findings.append(f"{rule.id}: not tested")
                    break
                claimed += [(m.start(), m.end()) for m in found]
    for name, start, end in _units(tests, units, settings, dead):
        if not any(a < end and start < b for a, b in claimed):
            findings.append(f"{name}: tested but not stated")
    return list(dict.fromkeys(findings)), applied


def family_rules(family_name: str) -> tuple[tuple[Rule, ...], Units] | None:
    """The rules a family declares (and what its tests count as checks), or None when
    it declares none (not audited)."""
    from tmax.generate.procedural import GenerationError, family_by_name

    try:
        family = family_by_name(family_name)
    except GenerationError:
        return None
    rules = getattr(family, "rules", None)
    if not rules:
        return None
    return tuple(rules), getattr(family, "units", TEST_FUNCTIONS)


def audit_rendered(family_name: str, instruction: str, tests: str, level: int) -> list[str] | None:
    """:func:`audit_task` for a family by name; None when the family is not audited."""
    declared = family_rules(family_name)
    if declared is None:
        return None
    rules, units = declared
    return audit_task(instruction, tests, rules, level, units)


def realised_skills(
    family: Any, sampled: tuple[str, ...] | list[str], instruction: str, tests: str, level: int
) -> dict[str, Any]:
    """How a task of ``family`` realised the primitive skills its spec sampled, for
    ``tmax.json``: ``{"realised": {skill: rule id}, "not_realised": [skill, ...]}``. A
    skill is realised when the family maps it to a rule (``Family.skills``) and that
    rule is stated and tested in this task; every other sampled skill is not."""
    mapping = getattr(family, "skills", {}) or {}
    wanted = [skill for skill in sampled if skill in mapping]
    checked = checked_rules(instruction, tests, tuple(family.rules), level) if wanted else set()
    realised = {skill: mapping[skill] for skill in wanted if mapping[skill] in checked}
    return {"realised": realised, "not_realised": [s for s in sampled if s not in realised]}


def skill_declaration_errors(family: Any, domain_skills: tuple[str, ...]) -> list[str]:
    """What is wrong with a family's ``skills``: a skill the domain's taxonomy does not
    list, or a rule id the family does not declare."""
    rule_ids = {rule.id for rule in getattr(family, "rules", ())}
    errors = []
    for skill, rule in (getattr(family, "skills", {}) or {}).items():
        if skill not in domain_skills:
            errors.append(f"{family.name}: {skill!r} is not a primitive skill of {family.domain}")
        if rule not in rule_ids:
            errors.append(f"{family.name}: skill {skill!r} names rule {rule!r}, not declared")
    return errors
