"""Diversity measured on the generated tasks (issue 26): distinct-n by hand, the
near-duplicate rate at its edges, MinHash/LSH's candidates, the family and skill
counts, the split by backend, and the section the generation report gains."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tmax.generate.diversity import (
    MinHashLSH,
    distinct_n,
    find_near_duplicates,
    jaccard,
    shingle_sets,
    stable_hash,
    task_diversity,
    words,
)
from tmax.generate.procedural import render_task
from tmax.generate.stage import _row, generation_report, render_report
from tmax.tasks import write_task
from tmax.taxonomy import TaskSpec, Taxonomy


def row(
    task_id: str,
    instruction: str,
    *,
    domain: str = "security",
    family: str = "security.audit",
    skills: tuple[str, ...] = ("hash a file",),
    backend: str = "procedural",
) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "instruction": instruction,
        "domain": domain,
        "family": family,
        "primitive_skills": list(skills),
        "backend": backend,
    }


def numbered(count: int, prefix: str) -> list[str]:
    """``count`` distinct words, none shared with another prefix."""
    return [f"{prefix}{i}" for i in range(count)]


def test_words_are_lowercased_alphanumeric_runs() -> None:
    assert words("Fix `/app/Run_2.sh`, NOW!") == ["fix", "app", "run", "2", "sh", "now"]


def test_distinct_n_by_hand() -> None:
    texts = [words("a b a b"), words("a c")]
    # unigrams a b a b a c: 3 of 6; bigrams ab ba ab ac: 3 of 4; trigrams aba bab: 2 of 2
    assert distinct_n(texts, 1)["ratio"] == pytest.approx(0.5)
    assert distinct_n(texts, 2)["ratio"] == pytest.approx(0.75)
    assert distinct_n(texts, 3)["ratio"] == pytest.approx(1.0)
    assert (distinct_n(texts, 2)["distinct"], distinct_n(texts, 2)["total"]) == (3, 4)


def test_distinct_n_is_a_fixed_size_sample_so_it_does_not_fall_with_corpus_size() -> None:
    # Each group of two reads "a b" / "c d": 4 distinct unigrams of 4.
    small = distinct_n([words("a b"), words("c d")] * 2, 1, group_size=2)
    large = distinct_n([words("a b"), words("c d")] * 50, 1, group_size=2)
    assert small["ratio"] == large["ratio"] == 1.0
    assert (small["groups"], large["groups"]) == (2, 50)
    assert large["distinct"] / large["total"] < small["distinct"] / small["total"]


def test_a_short_tail_group_is_left_out_of_the_mean() -> None:
    texts = [words("a b"), words("c d"), words("a a")]
    figures = distinct_n(texts, 1, group_size=2)
    assert figures["ratio"] == 1.0  # the tail "a a" (1 of 2) would pull it to 0.75
    assert (figures["groups"], figures["tasks_sampled"]) == (1, 2)
    # Fewer tasks than one group: that one short group is the sample.
    assert distinct_n(texts[2:], 1, group_size=2)["ratio"] == 0.5


def test_identical_instructions_are_all_near_duplicates() -> None:
    text = " ".join(numbered(30, "w"))
    report = task_diversity([row(f"t{i}", text) for i in range(3)])
    assert report["overall"]["near_duplicates"] == {"tasks": 3, "rate": 1.0}


def test_disjoint_instructions_have_no_near_duplicates() -> None:
    rows = [row(f"t{i}", " ".join(numbered(30, f"d{i}x"))) for i in range(4)]
    assert task_diversity(rows)["overall"]["near_duplicates"] == {"tasks": 0, "rate": 0.0}


@pytest.mark.parametrize(
    ("replaced", "expected", "near"),
    [(11, 89 / 111, True), (12, 88 / 112, False)],  # just above / just below 0.8
)
def test_the_threshold_is_applied_to_the_exact_jaccard(
    replaced: int, expected: float, near: bool
) -> None:
    # 104 distinct words give 100 five-word shingles; replacing the last k words keeps
    # 100 - k of them and adds k new ones: J = (100 - k) / (100 + k).
    first = numbered(104, "w")
    second = first[: 104 - replaced] + numbered(replaced, "new")
    sets, _ = shingle_sets([" ".join(first), " ".join(second)])
    assert jaccard(sets[0], sets[1]) == pytest.approx(expected)
    found = find_near_duplicates([" ".join(first), " ".join(second)], threshold=0.8)
    assert [(a, b) for a, b, _ in found.pairs] == ([(0, 1)] if near else [])
    if near:
        assert found.pairs[0][2] == pytest.approx(expected)
    rows = [row("t1", " ".join(first)), row("t2", " ".join(second))]
    assert task_diversity(rows)["overall"]["near_duplicates"]["rate"] == (1.0 if near else 0.0)


def _sets_with_jaccard(
    similarity: float, size: int, rng: random.Random
) -> tuple[list[int], list[int]]:
    common = round(size * similarity)
    shared = [rng.getrandbits(64) for _ in range(common)]
    own = (size - common) // 2
    extra = [rng.getrandbits(64) for _ in range(2 * own)]
    return shared + extra[:own], shared + extra[own:]


def test_minhash_lsh_finds_a_pair_at_jaccard_0_9_deterministically() -> None:
    first, second = _sets_with_jaccard(0.9, 200, random.Random(7))  # 180 / 200
    assert jaccard(frozenset(first), frozenset(second)) == pytest.approx(0.9)
    lsh = MinHashLSH()
    assert lsh.masks == MinHashLSH().masks  # seeded: the same hash functions every time
    assert lsh.masks != MinHashLSH(seed=1).masks
    signatures = [lsh.signature(first), lsh.signature(second)]
    assert lsh.candidate_pairs(signatures) == {(0, 1)}
    far = _sets_with_jaccard(0.1, 200, random.Random(7))
    assert lsh.candidate_pairs([lsh.signature(s) for s in far]) == set()


def test_lsh_finds_pairs_at_the_threshold_as_often_as_it_says() -> None:
    lsh, rng = MinHashLSH(), random.Random(3)
    found = 0
    for _ in range(300):
        first, second = _sets_with_jaccard(0.7, 200, rng)
        found += bool(lsh.candidate_pairs([lsh.signature(s) for s in (first, second)]))
    assert lsh.candidate_probability(0.7) == pytest.approx(0.974, abs=1e-3)
    assert found / 300 == pytest.approx(lsh.candidate_probability(0.7), abs=0.03)


def test_shingle_hashes_are_the_same_in_every_process() -> None:
    assert stable_hash("a b c d e") == 0x43A8410FBB4EFB52


def test_a_domain_counts_only_its_own_near_duplicates() -> None:
    text = " ".join(numbered(30, "w"))
    rows = [row("t1", text, domain="security"), row("t2", text, domain="debugging")]
    report = task_diversity(rows)
    assert report["overall"]["near_duplicates"]["rate"] == 1.0
    assert report["domains"]["security"]["near_duplicates"]["rate"] == 0.0
    assert report["domains"]["debugging"]["near_duplicates"]["rate"] == 0.0


def test_families_and_family_skill_sets_are_counted_per_domain() -> None:
    rows = [
        row("t1", "one", family="f1", skills=("a", "b")),
        row("t2", "two", family="f1", skills=("b", "a")),  # the same set, drawn in another order
        row("t3", "three", family="f2", skills=("a", "b")),
        row("t4", "four", family="f3", skills=("c",), domain="debugging"),
    ]
    report = task_diversity(rows)
    assert (report["domains"]["security"]["families"],
            report["domains"]["security"]["family_skill_sets"]) == (2, 2)  # fmt: skip
    assert (report["overall"]["families"], report["overall"]["family_skill_sets"]) == (3, 3)


def test_backends_are_measured_side_by_side_only_when_both_are_present() -> None:
    text = " ".join(numbered(30, "w"))
    one = [row("t1", text), row("t2", text)]
    assert "backends" not in task_diversity(one)
    both = [*one, row("t3", text, backend="llm"), row("t4", "something else", backend="llm")]
    split = task_diversity(both)["backends"]
    assert sorted(split) == ["llm", "procedural"]
    assert split["procedural"]["overall"]["near_duplicates"]["rate"] == 1.0
    assert split["llm"]["overall"]["near_duplicates"]["rate"] == 0.0  # t3's twins are procedural


def _spec(index: int) -> TaskSpec:
    return TaskSpec(
        spec_id=f"spec-{index:012d}",
        index=index,
        domain="security",
        skill_type="Systems",
        primitive_skills=("one skill", "another skill", "a third skill"),
        persona="A platform engineer at a logistics company who needs this done today.",
        language="python",
        task_complexity="short",
        command_complexity="bash_only",
        fixture_kind="text_only",
        verifier_kind="exact_text",
    )


def test_the_exported_row_says_which_backend_made_the_task(tmp_path: Path) -> None:
    task_dir = write_task(render_task(_spec(1), 7), tmp_path)
    assert _row(task_dir)["backend"] == "procedural"


def test_the_generation_report_has_a_diversity_section(tmp_path: Path, taxonomy: Taxonomy) -> None:
    rows = [_row(write_task(render_task(_spec(i), 7), tmp_path)) for i in range(3)]
    rows.append({**rows[0], "task_id": "spec-llm", "backend": "llm", "domain": "debugging"})
    checks = [{"task": r["task_id"], "ok": True, "reason": ""} for r in rows]
    report = generation_report(rows, checks, taxonomy)
    assert report["diversity"]["overall"]["tasks"] == 4
    assert report["families"]  # the existing keys stay
    markdown = render_report(report)
    section = markdown.split("## Diversity of the tasks themselves", 1)[1]
    assert "| security | 3 |" in section and "| debugging | 1 |" in section
    assert "| **overall** | 4 |" in section
    assert "### Generator backend: llm" in section
    assert "## Families" in markdown.split("## Diversity", 1)[0]


def test_an_empty_report_still_renders(taxonomy: Taxonomy) -> None:
    report = generation_report([], [], taxonomy)
    assert report["diversity"]["overall"]["tasks"] == 0
    assert "| **overall** | 0 |" in render_report(report)
