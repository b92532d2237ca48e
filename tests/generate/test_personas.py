"""Personas that fit (issue 26): every procedural task opens with a persona its family's
story fits; a fitting spec persona is kept, any other replaced (seeded by the spec id,
recorded as realised), and the personas file fails loudly when it goes stale."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.generate.test_procedural import spec_for
from tmax.config import load_config
from tmax.generate.families.easy import EASY_FAMILIES
from tmax.generate.family import FAMILIES
from tmax.generate.personas import (
    PERSONAS_FILE,
    PersonaError,
    family_personas,
    fitting_persona,
    load_family_personas,
    persona_fits,
)
from tmax.generate.procedural import family_by_name, render_task
from tmax.generate.stage import _row, generation_report, render_report
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, TaskSpec, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parents[2]
FULL_NAMES = [f.name for families in FAMILIES.values() for f in families]
ALL_NAMES = FULL_NAMES + [f.name for f in EASY_FAMILIES]
MISFIT = "A platform engineer at a logistics company who needs this done today."
"""A persona listed for no family."""


def opening(persona: str) -> str:
    """The instruction's first paragraph for ``persona``, as the generator writes it."""
    return f"I'm {persona[0].lower()}{persona[1:].rstrip('.')}.\n\n"


def with_persona(spec: TaskSpec, persona: str) -> TaskSpec:
    return dataclasses.replace(spec, persona=persona)


def edited_file(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = yaml.safe_load(PERSONAS_FILE.read_text())
    edit(data["families"])
    path = tmp_path / "personas.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_reworded_taxonomy_persona_names_the_family_and_the_persona(tmp_path: Path) -> None:
    stale = "A junior security analyst at a regional bank triaging alerts from the IDS."

    def edit(families: dict[str, Any]) -> None:
        families["security.auth_log_triage"]["taxonomy"][0] = stale

    with pytest.raises(PersonaError) as error:
        load_family_personas(edited_file(tmp_path, edit))
    message = str(error.value)
    assert "security.auth_log_triage" in message and stale in message
    assert "did you mean 'A junior security analyst at a regional bank triaging" in message


def test_an_unknown_family_or_a_family_left_without_personas_is_an_error(
    tmp_path: Path,
) -> None:
    def typo(families: dict[str, Any]) -> None:
        families["security.auth_log_triag"] = families.pop("security.auth_log_triage")

    expected = (
        "'security.auth_log_triag' is not a task family; did you mean 'security.auth_log_triage'"
    )
    with pytest.raises(PersonaError, match=re.escape(expected)):
        load_family_personas(edited_file(tmp_path, typo))

    def empty(families: dict[str, Any]) -> None:
        families["data_science.slide_stats"] = {"own": []}

    with pytest.raises(PersonaError, match=r"no fitting persona for the family.*slide_stats"):
        load_family_personas(edited_file(tmp_path, empty))

    def unexplained(families: dict[str, Any]) -> None:
        families["easy.file_basics"] = {"persona": "as_drawn"}

    with pytest.raises(PersonaError, match=r"easy\.file_basics: .*'persona: as_drawn' plus"):
        load_family_personas(edited_file(tmp_path, unexplained))

    def misplaced(families: dict[str, Any]) -> None:
        families["data_science.slide_stats"]["own"].append(
            "A Kaggle competitor tuning a tabular model late at night before the submission "
            "deadline."
        )

    with pytest.raises(PersonaError, match=r"slide_stats: own persona .* is a taxonomy persona"):
        load_family_personas(edited_file(tmp_path, misplaced))
    with pytest.raises(PersonaError, match=re.escape("unknown task family 'no.such_family'")):
        persona_fits("no.such_family", MISFIT)


def test_every_full_tier_family_has_eight_distinct_fitting_personas() -> None:
    """At least eight per family, so that fitting personas keeps instructions varied."""
    entries = family_personas()
    assert set(entries) == set(ALL_NAMES)
    for name in FULL_NAMES:
        personas = entries[name].personas
        assert not entries[name].as_drawn and len(personas) >= 8, (name, len(personas))
        assert all(persona_fits(name, p) for p in personas)
        assert not persona_fits(name, MISFIT)
        for a, b in itertools.combinations(personas, 2):  # no near-identical pair
            assert difflib.SequenceMatcher(None, a, b).ratio() < 0.8, (name, a, b)
    # Taxonomy personas are listed by their exact text; a family's own are new ones.
    taxonomy = {p for d in load_taxonomy().domains.values() for p in d.personas}
    assert taxonomy & set(entries["security.auth_log_triage"].personas)


def test_the_easy_tier_keeps_every_persona_as_drawn_by_declaration() -> None:
    """The documented exception: its instructions stay those the embedded default's
    learning benchmark was measured on (test_easy_tier checks them byte for byte)."""
    entry = family_personas()["easy.file_basics"]
    assert entry.as_drawn and "re-measured" in entry.as_drawn_reason and not entry.personas
    assert persona_fits("easy.file_basics", MISFIT)
    spec = with_persona(spec_for(EASY_FAMILIES[0]), MISFIT)
    assert fitting_persona("easy.file_basics", spec) == MISFIT
    task = render_task(spec, seed=7, tier="easy")
    assert task.meta is not None and "persona" not in task.meta.generator["realised"]
    assert task.instruction.startswith(opening(MISFIT))


def test_the_full_tier_opens_every_task_with_a_fitting_persona() -> None:
    """The audit's check on a sample of the paper config's specs (its tier: full)."""
    config = load_config(ROOT / "configs/paper.yaml")
    taxonomy = load_taxonomy(config.get("taxonomy"))
    specs = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, 400)
    tier = config.get("generation", {}).get("tier", "full")
    kept = replaced = 0
    for spec in specs:
        task = render_task(spec, config["seed"], tier=tier)
        assert task.meta is not None
        family = task.meta.generator["family"]
        realised = task.meta.generator.get("realised", {})
        persona = realised.get("persona", spec.persona)
        assert task.instruction.startswith(opening(persona)), (family, task.instruction[:200])
        assert persona_fits(family, persona), (family, persona)
        if persona_fits(family, spec.persona):
            assert "persona" not in realised  # a fitting persona is kept as drawn
            kept += 1
        else:
            assert realised["persona"] != spec.persona
            replaced += 1
        assert task.meta.axes["persona"] == spec.persona  # the spec is recorded as drawn
    assert kept and replaced, (kept, replaced)


def test_realised_is_recorded_exactly_when_the_persona_changed() -> None:
    family = family_by_name("security.auth_log_triage")
    fitting = family_personas()[family.name].personas[1]
    spec = with_persona(spec_for(family, index=3), fitting)
    task = render_task(spec, seed=7, family_name=family.name)
    assert task.meta is not None and "persona" not in task.meta.generator.get("realised", {})
    assert task.instruction.startswith(opening(fitting))

    misfit = with_persona(spec, MISFIT)
    task = render_task(misfit, seed=7, family_name=family.name)
    assert task.meta is not None
    chosen = task.meta.generator["realised"]["persona"]
    assert chosen != MISFIT and persona_fits(family.name, chosen)
    assert task.instruction.startswith(opening(chosen))
    # The replacement depends on the spec id, not on the generation seed.
    again = render_task(misfit, seed=8, family_name=family.name)
    assert again.meta is not None and again.meta.generator["realised"]["persona"] == chosen


def test_the_replacement_is_seeded_by_the_spec_id_in_every_process() -> None:
    family = family_by_name("file_operations.dupe_hunt")
    specs = [spec_for(family, index=i) for i in range(60)]
    here = [fitting_persona(family.name, spec) for spec in specs]
    assert set(here) == set(family_personas()[family.name].personas)  # spread over all
    script = (
        "import json, sys\n"
        "from tests.generate.test_procedural import spec_for\n"
        "from tmax.generate.personas import fitting_persona\n"
        "from tmax.generate.procedural import family_by_name\n"
        "family = family_by_name('file_operations.dupe_hunt')\n"
        "print(json.dumps([fitting_persona(family.name, spec_for(family, index=i))"
        " for i in range(60)]))\n"
    )
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert json.loads(out.stdout) == here


def test_the_report_counts_replaced_personas_per_family(tmp_path: Path) -> None:
    family = family_by_name("security.auth_log_triage")
    fitting = family_personas()[family.name].personas[0]
    specs = [with_persona(spec_for(family, index=i), MISFIT if i < 2 else fitting)
             for i in range(3)]  # fmt: skip
    rows = [_row(write_task(render_task(s, 7, family.name), tmp_path)) for s in specs]
    checks = [{"task": r["task_id"], "ok": True, "reason": ""} for r in rows]
    report = generation_report(rows, checks, load_taxonomy())
    assert report["personas_replaced"] == {family.name: 2}
    assert "persona" not in report["realised_differently"]  # no table of sentences
    markdown = render_report(report)
    assert "| security.auth_log_triage | 2 |" in markdown.split("## Personas replaced", 1)[1]
    assert MISFIT not in markdown and fitting not in markdown
