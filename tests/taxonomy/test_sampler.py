"""The 9-axis sampler: distributions, determinism, stable ids, independent shards."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tmax.config import validate_config
from tmax.taxonomy import (
    SamplerError,
    SamplerSettings,
    Taxonomy,
    balance_report,
    read_specs,
    sample_specs,
    shard_bounds,
    write_specs,
)

PAPER_N = 14600


def settings_for(config: dict[str, Any], taxonomy: Taxonomy, **sampler: Any) -> SamplerSettings:
    raw = {**config, "sampler": {**config["sampler"], **sampler}}
    return SamplerSettings.from_config(validate_config(raw), taxonomy)


@pytest.fixture(scope="module")
def paper_specs(taxonomy: Taxonomy, _default_raw: dict[str, Any]):
    raw = {**_default_raw, "sampler": {**_default_raw["sampler"], "n_specs": PAPER_N}}
    return sample_specs(taxonomy, SamplerSettings.from_config(validate_config(raw), taxonomy))


def test_domain_balance_at_paper_scale(paper_specs, taxonomy: Taxonomy) -> None:
    report = balance_report(paper_specs, taxonomy)
    assert report["n_specs"] == PAPER_N
    assert report["axes"]["domain"]["balance"] >= 0.995
    # Skill types are uniform within a domain, not across: the paper reports 0.732.
    assert 0.65 < report["axes"]["skill_type"]["balance"] < 0.85


def test_languages_follow_their_weights(paper_specs, taxonomy: Taxonomy) -> None:
    counts = Counter(spec.language for spec in paper_specs)
    for language, weight in taxonomy.language_weights.items():
        assert counts[language] / PAPER_N == pytest.approx(weight, abs=0.015), language


def test_uniform_axes_are_uniform(paper_specs, taxonomy: Taxonomy) -> None:
    for axis in ("domain", "task_complexity", "command_complexity"):
        counts = Counter(getattr(spec, axis) for spec in paper_specs)
        expected = PAPER_N / len(taxonomy.categories(axis))
        for value in taxonomy.categories(axis):
            assert abs(counts[value] - expected) < 0.08 * expected, (axis, value)


def test_skill_type_is_uniform_within_domain(paper_specs, taxonomy: Taxonomy) -> None:
    security = [s for s in paper_specs if s.domain == "security"]
    counts = Counter(spec.skill_type for spec in security)
    labels = [st.label for st in taxonomy.domains["security"].skill_types.values()]
    assert set(counts) == set(labels)
    expected = len(security) / len(labels)
    assert all(abs(c - expected) < 0.15 * expected for c in counts.values())


def test_fixture_and_verifier_mix(paper_specs) -> None:
    fixtures = Counter(spec.fixture_kind for spec in paper_specs)
    verifiers = Counter(spec.verifier_kind for spec in paper_specs)
    assert fixtures["text_only"] / PAPER_N == pytest.approx(0.67, abs=0.015)
    assert verifiers["exact_text"] / PAPER_N == pytest.approx(0.67, abs=0.015)
    assert len(fixtures) == 7 and len(verifiers) == 5


def test_each_spec_is_consistent_with_its_domain(paper_specs, taxonomy: Taxonomy) -> None:
    for spec in paper_specs[:2000]:
        domain = taxonomy.domains[spec.domain]
        assert 3 <= len(spec.primitive_skills) <= 5
        assert len(set(spec.primitive_skills)) == len(spec.primitive_skills)
        assert set(spec.primitive_skills) <= set(domain.primitive_skills)
        assert spec.persona in domain.personas
        assert spec.skill_type in [st.label for st in domain.skill_types.values()]


def test_skill_scope_restricts_skills_to_the_skill_type(
    config: dict[str, Any], taxonomy: Taxonomy
) -> None:
    settings = settings_for(
        config, taxonomy, primitive_skills={"min": 3, "max": 4, "scope": "skill_type"}
    )
    for spec in sample_specs(taxonomy, settings):
        domain = taxonomy.domains[spec.domain]
        (skill_type,) = [st for st in domain.skill_types.values() if st.label == spec.skill_type]
        assert set(spec.primitive_skills) <= set(skill_type.primitive_skills)


def test_zero_weight_is_never_drawn(config: dict[str, Any], taxonomy: Taxonomy) -> None:
    settings = settings_for(
        config, taxonomy, domain_weights={"security": 1}, verifier_mix={"fuzz_equivalence": 2}
    )
    specs = sample_specs(taxonomy, settings)
    assert {s.domain for s in specs} == {"security"}
    assert {s.verifier_kind for s in specs} == {"fuzz_equivalence"}


def test_unknown_category_in_a_mix_is_named(config: dict[str, Any], taxonomy: Taxonomy) -> None:
    with pytest.raises(SamplerError, match=r"sampler.fixture_mix.*\['pdf'\].*allowed: text_only"):
        settings_for(config, taxonomy, fixture_mix={"pdf": 1})


def test_too_many_skills_for_a_pool(config: dict[str, Any], taxonomy: Taxonomy) -> None:
    with pytest.raises(SamplerError, match="primitive-skill pool"):
        settings_for(
            config, taxonomy, primitive_skills={"min": 3, "max": 12, "scope": "skill_type"}
        )


def test_same_config_and_seed_give_identical_bytes(
    config: dict[str, Any], taxonomy: Taxonomy, tmp_path: Path
) -> None:
    settings = settings_for(config, taxonomy)
    write_specs(sample_specs(taxonomy, settings), tmp_path / "a.parquet")
    write_specs(sample_specs(taxonomy, settings_for(config, taxonomy)), tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert read_specs(tmp_path / "a.parquet") == sample_specs(taxonomy, settings)


def test_another_seed_gives_other_specs(config: dict[str, Any], taxonomy: Taxonomy) -> None:
    first = sample_specs(taxonomy, settings_for(config, taxonomy))
    other = sample_specs(taxonomy, settings_for({**config, "seed": 7}, taxonomy))
    assert [s.spec_id for s in first] != [s.spec_id for s in other]


def test_ids_are_unique_and_content_derived(paper_specs) -> None:
    ids = [spec.spec_id for spec in paper_specs]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("spec-") and len(i) == 17 for i in ids)


def test_shards_and_growth_leave_earlier_specs_unchanged(
    config: dict[str, Any], taxonomy: Taxonomy
) -> None:
    small = sample_specs(taxonomy, settings_for(config, taxonomy, n_specs=250))
    large = settings_for(config, taxonomy, n_specs=400)
    assert sample_specs(taxonomy, large)[:250] == small
    assert sample_specs(taxonomy, large, 100, 200) == sample_specs(taxonomy, large)[100:200]


def test_shard_bounds() -> None:
    assert shard_bounds(250, 100) == [(0, 100), (100, 200), (200, 250)]
    assert shard_bounds(100, 100) == [(0, 100)]
