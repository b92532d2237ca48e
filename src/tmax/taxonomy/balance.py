"""How evenly a set of specs covers each axis (paper §B.3, Table 1).

The balance score of a categorical axis is the normalised effective number of
categories, exp(H) / N, with H = −Σ p_i log p_i over the observed frequencies and N
the number of categories the taxonomy allows. It lies in [1/N, 1]: 1 when every
category is equally frequent, 1/N when one category takes everything.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tmax.taxonomy.model import Taxonomy
from tmax.taxonomy.sampler import TaskSpec

BALANCE_AXES = ("domain", "skill_type")
COUNTED_AXES = (
    "domain",
    "skill_type",
    "language",
    "task_complexity",
    "command_complexity",
    "fixture_kind",
    "verifier_kind",
)


def entropy(counts: Iterable[int]) -> float:
    """Shannon entropy H = −Σ p_i log p_i (natural log) of the non-zero counts."""
    positive = [c for c in counts if c > 0]
    total = sum(positive)
    if total == 0:
        return 0.0
    return -sum((c / total) * math.log(c / total) for c in positive)


def balance_score(
    counts: Mapping[str, int] | Sequence[int], n_categories: int | None = None
) -> float:
    """exp(H) / N, with N = ``n_categories`` (default: the number of counts given).

    Categories the taxonomy allows but the data never uses count towards N, so pass
    ``n_categories`` when ``counts`` lists only observed categories.
    """
    values = list(counts.values()) if isinstance(counts, Mapping) else list(counts)
    n = len(values) if n_categories is None else n_categories
    if n <= 0:
        raise ValueError("balance_score needs at least one category")
    if sum(values) == 0:
        return 0.0
    return math.exp(entropy(values)) / n


def balance_report(specs: Sequence[TaskSpec], taxonomy: Taxonomy) -> dict[str, Any]:
    """Counts per axis value and the balance score of every categorical axis."""
    axes: dict[str, Any] = {}
    for axis in COUNTED_AXES:
        categories = taxonomy.categories(axis)
        counter = Counter(getattr(spec, axis) for spec in specs)
        counts = {name: counter.get(name, 0) for name in categories}
        extra = sorted(set(counter) - set(categories))
        counts.update({name: counter[name] for name in extra})
        axes[axis] = {
            "categories": len(categories),
            "observed": sum(1 for c in counts.values() if c),
            "balance": balance_score(counts, max(len(categories), len(counts))),
            "counts": counts,
        }
    skills_per_spec = Counter(len(spec.primitive_skills) for spec in specs)
    distinct_skills = {skill for spec in specs for skill in spec.primitive_skills}
    all_skills = sum(len(d.primitive_skills) for d in taxonomy.domains.values())
    return {
        "n_specs": len(specs),
        "taxonomy_digest": taxonomy.digest,
        "axes": axes,
        "primitive_skills": {
            "per_spec": {str(k): skills_per_spec[k] for k in sorted(skills_per_spec)},
            "distinct_used": len(distinct_skills),
            "in_taxonomy": all_skills,
        },
    }


def render_markdown(report: Mapping[str, Any]) -> str:
    """The balance report as Markdown tables: a summary, then counts per axis."""
    n = report["n_specs"]
    lines = [
        f"# Spec balance ({n:,} specs)",
        "",
        "Balance is exp(H)/N over the taxonomy's N categories (1 = perfectly even).",
        "",
        "| axis | categories | observed | exp(H)/N |",
        "|---|---:|---:|---:|",
    ]
    for axis, body in report["axes"].items():
        lines.append(
            f"| {axis} | {body['categories']} | {body['observed']} | {body['balance']:.4f} |"
        )
    skills = report["primitive_skills"]
    per_spec = ", ".join(f"{k}: {v}" for k, v in skills["per_spec"].items())
    lines += [
        "",
        f"Primitive skills per spec: {per_spec}; "
        f"{skills['distinct_used']} of {skills['in_taxonomy']} skills used.",
    ]
    for axis, body in report["axes"].items():
        lines += ["", f"## {axis}", "", "| value | count | share |", "|---|---:|---:|"]
        for name, count in body["counts"].items():
            share = count / n if n else 0.0
            lines.append(f"| {name} | {count} | {share:.1%} |")
    return "\n".join(lines) + "\n"
