"""The instruction–test audit: every rule a task states is tested and every test is
stated; tasks that fail are quarantined by the collect stage, with the reason."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq
import pytest

from tmax.config import load_config
from tmax.generate.audit import (
    Rule,
    audit_rendered,
    audit_task,
    realised_skills,
    skill_declaration_errors,
)
from tmax.generate.families.easy import EASY_FAMILIES
from tmax.generate.family import FAMILIES, LEVELS
from tmax.generate.procedural import choose_family, render_task
from tmax.generate.stage import _row, collect, generation_report, render_report
from tmax.tasks import Task, write_task
from tmax.taxonomy import SamplerSettings, TaskSpec, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parents[2]
DECLARED = [f for families in FAMILIES.values() for f in families if f.rules]

TESTS = """CFG_JSON = '{"code": false, "level": 1}'


def test_totals():
    assert read("totals.csv") == want


def test_duplicates():
    if level >= 2:
        assert read("duplicates.txt") == "3"


def test_program():
    if not CFG["code"]:
        return
    assert run_program()
"""
RULES = (
    Rule("totals", (r"`totals\.csv`",), (r"def test_totals\(",)),
    Rule("duplicates", (r"`duplicates\.txt`",), (r'read\("duplicates\.txt"\)',),
         levels=frozenset({2, 3, 4})),
    Rule("program", (r"a program",), (r"def test_program\(",), when={"code": True}),
)  # fmt: skip


def source_of(task: Task) -> str:
    return "".join(f.data.decode() for rel, f in sorted(task.tests.items()) if rel.endswith(".py"))


def audit(task: Task) -> list[str] | None:
    assert task.meta is not None
    level = LEVELS[task.meta.axes["task_complexity"]]
    return audit_rendered(task.meta.generator["family"], task.instruction, source_of(task), level)


def test_a_consistent_task_passes_at_each_level() -> None:
    assert audit_task("Write `totals.csv`.", TESTS, RULES, 1) == []
    level2 = TESTS.replace('"level": 1', '"level": 2')
    assert audit_task("Write `totals.csv` and `duplicates.txt`.", level2, RULES, 2) == []


def test_each_kind_of_inconsistency_is_found() -> None:
    # a rule that applies but is not in the instruction
    assert audit_task("Write the file.", TESTS, RULES, 1) == [
        "totals: stated nowhere",
        "test_totals: tested but not stated",
    ]
    # a rule stated at a level where it does not apply (the example)
    assert audit_task("Write `totals.csv`; `duplicates.txt` too.", TESTS, RULES, 1) == [
        "duplicates: stated but not tested at this level"
    ]
    # a rule that applies but whose check is missing, or only runs at a higher level
    untested = TESTS.replace('read("duplicates.txt")', 'read("other.txt")')
    text = "Write `totals.csv` and `duplicates.txt`."
    assert "duplicates: not tested" in audit_task(text, untested, RULES, 2)
    gated = TESTS.replace("if level >= 2:", "if level >= 3:")
    assert "duplicates: not tested" in audit_task(text, gated, RULES, 2)
    # a check that no stated rule claims; a switched-off test checks nothing
    switched_on = TESTS.replace('"code": false', '"code": true')
    assert audit_task("Write `totals.csv`.", switched_on, RULES[:1], 1) == [
        "test_program: tested but not stated"
    ]
    assert audit_task("Write `totals.csv`.", switched_on, RULES, 1) == [
        "program: stated nowhere",
        "test_program: tested but not stated",
    ]
    assert audit_task("Write `totals.csv` with a program.", switched_on, RULES, 1) == []


def test_drawn_rules_apply_when_stated() -> None:
    drawn = (Rule("word", (r"Write `(?P<word>\w+)`",), (r"'{word}'",), drawn=True),)
    assert audit_task("Nothing here.", "", drawn, 1) == []
    assert audit_task("Write `abc`.", "EXPECTED = ['abc']", drawn, 1) == []
    assert audit_task("Write `abc`.", "EXPECTED = ['abd']", drawn, 1) == ["word: not tested"]


def test_families_without_declarations_are_not_audited(monkeypatch: pytest.MonkeyPatch) -> None:
    assert audit_rendered("no.such_family", "text", "", 1) is None
    family = FAMILIES["data_processing"][0]
    assert audit_rendered(family.name, "text", "", 1) is not None
    monkeypatch.setattr(type(family), "rules", ())
    assert audit_rendered(family.name, "text", "", 1) is None


def test_every_family_is_audited() -> None:
    assert [f.name for fs in FAMILIES.values() for f in fs if not f.rules] == []


def easy_specs(n: int) -> tuple[list[TaskSpec], int]:
    config = load_config(ROOT / "config.yaml")
    taxonomy = load_taxonomy(config.get("taxonomy"))
    return sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, n), int(
        config["seed"]
    )


def test_every_easy_tier_task_passes() -> None:
    specs, seed = easy_specs(300)
    for spec in specs:
        task = render_task(spec, seed, tier="easy")
        assert audit(task) == [], task.instruction


def test_the_easy_audit_catches_an_untested_or_unstated_step() -> None:
    specs, seed = easy_specs(60)
    tasks = [render_task(spec, seed, tier="easy") for spec in specs]
    basics = [t for t in tasks if t.meta.generator["family"] == EASY_FAMILIES[0].name]
    assert len(basics) >= 10
    for task in basics:
        source = source_of(task)
        extra = task.instruction + " Write the word `zebra` to `/app/extra.txt`.\n"
        assert audit_rendered(EASY_FAMILIES[0].name, extra, source, 1) == ["write_word: not tested"]
        unstated = source.replace("EXPECTED = {", "EXPECTED = {'/app/more.txt': 'x\\n', ")
        assert audit_rendered(EASY_FAMILIES[0].name, task.instruction, unstated, 1) == [
            "/app/more.txt: tested but not stated"
        ]


@pytest.fixture(scope="module")
def paper_specs() -> tuple[list[TaskSpec], int]:
    config = load_config(ROOT / "configs/paper.yaml")
    taxonomy = load_taxonomy(config.get("taxonomy"))
    specs = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, 4000)
    return specs, int(config["seed"])


@pytest.mark.parametrize("family", DECLARED, ids=lambda f: f.name)
def test_declared_families_pass_on_paper_config_specs(
    family: object, paper_specs: tuple[list[TaskSpec], int]
) -> None:
    specs, seed = paper_specs
    name = family.name  # type: ignore[attr-defined]
    domain = family.domain  # type: ignore[attr-defined]
    mine = [s for s in specs if s.domain == domain][:200]
    assert len(mine) == 200
    for spec in mine:
        task = render_task(spec, seed, family_name=name)
        assert audit(task) == [], task.instruction


def test_collect_quarantines_a_failing_task(tmp_path: Path) -> None:
    specs, seed = easy_specs(40)
    shard = tmp_path / "shard"
    rendered = [render_task(spec, seed, tier="easy") for spec in specs]
    tasks = [t for t in rendered if t.meta.generator["family"] == EASY_FAMILIES[0].name][:4]
    # an instruction that promises a step the tests do not check
    tasks[0] = dataclasses.replace(
        tasks[0], instruction=tasks[0].instruction + "Create the folder `/app/extra`.\n"
    )
    for task in tasks:
        write_task(task, shard)
    checks = [{"task": t.name, "ok": True, "reason": ""} for t in tasks]
    validation = tmp_path / "validation.json"
    validation.write_text(json.dumps({"checks": checks}))
    report = collect(
        [shard], [validation], tmp_path / "tasks.parquet", tmp_path / "r.json", tmp_path / "r.md"
    )
    exported = pq.read_table(tmp_path / "tasks.parquet").column("task_id").to_pylist()
    assert tasks[0].name not in exported and len(exported) == 3
    assert report["quarantined"] == 1
    assert report["quarantine_reasons"] == {"audit: make_folder: not tested": 1}
    assert report["audit"] == {
        EASY_FAMILIES[0].name: {"audited": 4, "passed": 3, "failed": 1, "not_audited": 0}
    }
    assert "## Instruction–test audit" in (tmp_path / "r.md").read_text()


# --------------------------------------------------------------------------------------------
# Primitive skills realised (issue 26, part 2)


class SkillFamily:
    name = "test.skills"
    rules = RULES
    skills: ClassVar[dict[str, str]] = {
        "deduplicate records by a key": "duplicates",
        "write a totals report": "totals",
    }


def test_a_sampled_skill_is_realised_only_where_its_rule_is_stated_and_tested() -> None:
    sampled = ("deduplicate records by a key", "write a totals report", "tune a kernel")
    level2 = TESTS.replace('"level": 1', '"level": 2')
    text = "Write `totals.csv` and `duplicates.txt`."
    both = realised_skills(SkillFamily, sampled, text, level2, 2)
    assert both == {
        "realised": {"deduplicate records by a key": "duplicates",
                     "write a totals report": "totals"},
        "not_realised": ["tune a kernel"],
    }  # fmt: skip
    # the duplicates rule does not apply at level 1: its skill is not realised there
    one = realised_skills(SkillFamily, sampled, "Write `totals.csv`.", TESTS, 1)
    assert one["realised"] == {"write a totals report": "totals"}
    # stated but its check is gone: not realised either
    untested = level2.replace('read("duplicates.txt")', 'read("other.txt")')
    assert (
        "deduplicate records by a key"
        in realised_skills(SkillFamily, sampled, text, untested, 2)["not_realised"]
    )
    # a skill is realised only if it was sampled
    assert realised_skills(SkillFamily, ("tune a kernel",), text, level2, 2)["realised"] == {}


def test_every_family_maps_real_skills_of_its_domain_to_its_own_rules() -> None:
    taxonomy = load_taxonomy(None)
    errors = [
        error
        for families in FAMILIES.values()
        for family in families
        for error in skill_declaration_errors(
            family, taxonomy.domains[family.domain].primitive_skills
        )
    ]
    assert errors == []
    bad = type("Bad", (SkillFamily,), {"name": "bad", "domain": "security",
                                       "skills": {"knit a scarf": "nope"}})  # fmt: skip
    assert len(skill_declaration_errors(bad, taxonomy.domains["security"].primitive_skills)) == 2


def test_the_family_is_chosen_for_the_sampled_skills_and_the_task_records_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Among families that realise the other axes equally, the one that can make more
    of the sampled skills a requirement is chosen; tmax.json, the exported row and the
    report say which skills were realised."""
    first, second = FAMILIES["data_processing"][:2]
    verifier = sorted(first.verifier_kinds & second.verifier_kinds)[0]
    fixture = sorted(first.fixture_kinds & second.fixture_kinds)[0]
    spec = dataclasses.replace(
        easy_specs(1)[0][0], domain="data_processing", primitive_skills=("skill a", "skill b"),
        verifier_kind=verifier, fixture_kind=fixture, command_complexity="bash_only",
        task_complexity="short",
    )  # fmt: skip
    rule = next(r.id for r in first.rules if 1 in r.levels and not r.when and not r.drawn)
    monkeypatch.setattr(type(second), "skills", {})
    monkeypatch.setattr(type(first), "skills", {})
    chosen = {choose_family(spec, seed)[0].name for seed in range(16)}
    assert {first.name, second.name} <= chosen  # no skill mapped: either, at random
    monkeypatch.setattr(type(first), "skills", {"skill a": rule})
    assert {choose_family(spec, seed)[0].name for seed in range(16)} == {first.name}
    task = render_task(spec, 1)
    assert task.meta is not None
    assert task.meta.generator["skills"] == {"realised": {"skill a": rule},
                                             "not_realised": ["skill b"]}  # fmt: skip
    row = _row(write_task(task, tmp_path))
    assert row["skills_realised"] == ["skill a"]
    report = generation_report([row, {**row, "skills_realised": None}], [], load_taxonomy(None))
    assert report["primitive_skills"][first.name] == {
        "realised": 1, "not_realised": 1, "not_recorded": 2
    }  # fmt: skip
    assert "## Primitive skills" in render_report(report)
