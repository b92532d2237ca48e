"""exp(H)/N against hand-computed values."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tmax.taxonomy import SamplerSettings, Taxonomy, balance_report, balance_score, sample_specs
from tmax.taxonomy.balance import entropy, render_markdown


def test_even_counts_score_one() -> None:
    assert balance_score([5, 5, 5, 5]) == pytest.approx(1.0)


def test_one_category_scores_one_over_n() -> None:
    assert balance_score([12, 0, 0]) == pytest.approx(1 / 3)
    assert balance_score({"a": 7}, n_categories=9) == pytest.approx(1 / 9)


def test_hand_computed_case() -> None:
    # p = (1/2, 1/4, 1/4): H = 1.5 ln 2, exp(H) = 2^1.5 = 2.8284, / 3 = 0.9428
    assert entropy([2, 1, 1]) == pytest.approx(1.5 * math.log(2))
    assert balance_score([2, 1, 1]) == pytest.approx(2**1.5 / 3)


def test_unobserved_categories_count_towards_n() -> None:
    assert balance_score({"a": 1, "b": 1}, n_categories=4) == pytest.approx(0.5)


def test_empty_and_invalid() -> None:
    assert balance_score([0, 0]) == 0.0
    with pytest.raises(ValueError):
        balance_score([], n_categories=0)


def test_report_counts_every_axis(config: dict[str, Any], taxonomy: Taxonomy) -> None:
    specs = sample_specs(taxonomy, SamplerSettings.from_config(config, taxonomy))
    report = balance_report(specs, taxonomy)
    for axis, body in report["axes"].items():
        assert sum(body["counts"].values()) == len(specs), axis
        assert list(body["counts"])[: body["categories"]] == list(taxonomy.categories(axis))
    assert sum(report["primitive_skills"]["per_spec"].values()) == len(specs)
    text = render_markdown(report)
    assert "| domain | 9 | 9 |" in text
    assert f"({len(specs):,} specs)" in text
