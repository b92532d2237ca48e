"""The easy tier (generation.tier: easy): one- and two-command file tasks drawn from the
sampler's specs, three families over the nine domains, deterministic, recorded honestly,
each operation's oracle passing and its no-op failing in a real sandbox."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.generate.test_procedural import spec_for
from tmax.config import load_config
from tmax.generate.families.easy import EASY_FAMILIES, OPERATIONS, VOCABULARY, easy_family_for
from tmax.generate.family import FAMILIES, LEVELS, RenderContext
from tmax.generate.procedural import GenerationError, _rng, choose_family, render_task
from tmax.generate.validate import check_task
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, TaskSpec, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parents[2]
EASY = EASY_FAMILIES[0]
VERBS = {"echo", "wc", "sort", "head", "tail", "grep", "cp", "mkdir", "grep -c", "grep -v",
         "cut -f1", "cut -f2", "sort -n"}  # fmt: skip
"""One per operation: a command's program, with the option that tells operations apart."""


def verb(line: str) -> str:
    words = line.replace("-d' ' ", "").split()
    options = {"grep": ("-c", "-v"), "sort": ("-n",), "cut": ("-f1", "-f2")}
    return " ".join(words[:2]) if words[1] in options.get(words[0], ()) else words[0]


def specs(n: int, level: str = "short") -> list[TaskSpec]:
    domains = sorted(VOCABULARY)
    return [
        spec_for(FAMILIES[domains[i % len(domains)]][0], level=level, command="bash_code",
                 index=i)
        for i in range(n)
    ]  # fmt: skip


def solution(spec: TaskSpec) -> list[str]:
    task = render_task(spec, seed=5, tier="easy")
    body = task.solution["solve.sh"].data.decode()  # type: ignore[index]
    return body.split("set -euo pipefail\n", 1)[1].strip().splitlines()


def test_every_operation_appears_and_levels_set_the_number_of_steps() -> None:
    assert len(OPERATIONS) == len(VERBS)
    verbs = {verb(line) for spec in specs(90) for line in solution(spec)}
    assert verbs == VERBS
    # The names are fixed (what a tiny model can learn to read); the domain picks words.
    lines = [line for spec in specs(60, "complex") for line in solution(spec)]
    paths = {word for line in lines for word in line.split() if word.startswith("/app/")}
    files = {p for p in paths if p.endswith(".txt")}
    assert files == {"/app/input.txt", "/app/answer.txt", "/app/result.txt"}, files
    assert {p.removeprefix("/app/") for p in paths - files} <= set(sum(VOCABULARY.values(), ()))
    for level in LEVELS:
        steps = {len(solution(spec)) for spec in specs(12, level)}
        assert steps == ({1} if LEVELS[level] <= 2 else {2}), level


def test_three_families_split_the_nine_domains() -> None:
    covered = [domain for family in EASY_FAMILIES for domain in family.domains]
    assert sorted(covered) == sorted(FAMILIES) and len(covered) == 9  # each domain once
    assert len(EASY_FAMILIES) == 3 and all(len(f.domains) == 3 for f in EASY_FAMILIES)
    for spec in specs(18):
        family, _ = choose_family(spec, seed=1, tier="easy")
        assert family is easy_family_for(spec.domain) and spec.domain in family.domains
        assert render_task(spec, seed=1, tier="easy").meta.generator["family"] == family.name
    operations = [{op.__name__ for op in family.operations} for family in EASY_FAMILIES]
    for family, names in zip(EASY_FAMILIES, operations, strict=True):
        assert {rule.id for rule in family.rules} == names  # each family audits its own


def test_the_tier_chooses_the_family_and_records_what_it_cannot_honour() -> None:
    spec = specs(1)[0]
    family, realised = choose_family(spec, seed=1, tier="easy")
    assert family is easy_family_for(spec.domain) and realised["command_complexity"] == "bash_only"
    full, _ = choose_family(spec, seed=1)
    assert full.domain == spec.domain and full not in EASY_FAMILIES
    task = render_task(spec, seed=1, tier="easy")
    assert task.meta is not None and task.meta.generator["family"] == family.name
    assert task.meta.generator["realised"]["command_complexity"] == "bash_only"
    assert task.meta.axes["command_complexity"] == "bash_code"  # the spec as drawn
    assert "persona" not in task.meta.generator["realised"]  # kept as drawn (personas.yaml)
    assert task.instruction.startswith("I'm a platform engineer")
    with pytest.raises(GenerationError, match="unknown generation tier 'tiny'"):
        choose_family(spec, seed=1, tier="tiny")


def test_instructions_are_byte_identical_to_those_the_default_was_measured_on() -> None:
    """The easy tier opens with the spec's persona as drawn (personas.yaml: as_drawn),
    exactly as before personas were fitted to families: the embedded default's learning
    benchmark was measured on these texts."""
    config = load_config(ROOT / "config.yaml")
    assert config["generation"]["tier"] == "easy"
    taxonomy = load_taxonomy(config.get("taxonomy"))
    specs = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy), 0, 300)
    for spec in specs:
        task = render_task(spec, config["seed"], tier="easy")
        family, realised = choose_family(spec, config["seed"], tier="easy")
        draft = family.render(RenderContext(
            spec=spec, rng=_rng(spec, config["seed"], family.name),
            verifier_kind=realised.get("verifier_kind", spec.verifier_kind),
            fixture_kind=realised.get("fixture_kind", spec.fixture_kind),
            language=realised.get("language", spec.language),
        ))  # fmt: skip
        persona = spec.persona.rstrip(".")  # the opening as it was built before
        old = "I'm " + persona[0].lower() + persona[1:] + ".\n\n" + draft.instruction.strip() + "\n"
        assert task.instruction == old, spec.spec_id
        assert task.meta is not None and "persona" not in task.meta.generator["realised"]


def test_same_spec_and_seed_give_the_same_task(tmp_path: Path) -> None:
    from tmax.generate.procedural import task_digest

    for spec in specs(5, "complex"):
        a = write_task(render_task(spec, seed=3, tier="easy"), tmp_path / "a")
        b = write_task(render_task(spec, seed=3, tier="easy"), tmp_path / "b")
        assert task_digest(a) == task_digest(b)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None,
                    reason="needs root and bwrap (./setup.sh installs them)")  # fmt: skip
def test_each_operation_s_oracle_passes_and_its_no_op_fails(tmp_path: Path) -> None:
    chosen: dict[str, TaskSpec] = {}
    for spec in specs(90, "complex"):
        for name in (verb(line) for line in solution(spec)):
            chosen.setdefault(name, spec)
    assert set(chosen) == VERBS
    for spec in {s.spec_id: s for s in chosen.values()}.values():
        task_dir = write_task(render_task(spec, seed=5, tier="easy"), tmp_path)
        check = check_task(task_dir, "bwrap", run_id="pytest-easy")
        assert check.ok, (solution(spec), check)


def test_the_generation_stage_reads_the_tier_from_the_config(tmp_path: Path) -> None:
    from tmax.generate.stage import generate_for_backend
    from tmax.tasks import read_task
    from tmax.taxonomy.sampler import write_specs

    write_specs(specs(4), tmp_path / "specs.parquet")
    for tier, easy in (("easy", True), ("full", False)):
        out = tmp_path / tier
        config = {"generation": {"backend": "procedural", "tier": tier}}
        assert generate_for_backend("procedural", tmp_path / "specs.parquet", out, 1, config) == 4
        families = {read_task(d).meta.generator["family"] for d in out.iterdir() if d.is_dir()}
        assert (families <= {f.name for f in EASY_FAMILIES}) is easy, families
