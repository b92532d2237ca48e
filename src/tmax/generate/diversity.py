"""How diverse the generated tasks are, read from the tasks themselves (issue 26).

The balance score of the generation report, exp(H)/N over the spec axes, measures
the sampler: how evenly the specs were drawn. It cannot see two tasks that read
alike because one family rendered both from the same template. The figures here read
the exported rows (``tmax.generate.stage._row``), per domain and over all tasks:

- **distinct-n** (n = 1, 2, 3) of the instructions: distinct word n-grams over all
  n-grams. The ratio falls as a corpus grows (common n-grams repeat), so it is taken
  on a fixed-size sample: the instructions, ordered by task id (a content hash, so
  the order is unrelated to domain or family), are cut into consecutive groups of
  ``group_size``, the ratio is computed within each group and averaged over the full
  groups; a scope with fewer tasks than that is one short group, and the number of
  tasks sampled says so. The whole scope's raw counts are reported beside it.
- **near-duplicate rate**: the share of tasks whose instruction has a near-duplicate
  among the other tasks — Jaccard similarity of their sets of word 5-gram shingles at
  least ``threshold`` (0.8). Candidate pairs come from MinHash signatures banded for
  locality-sensitive hashing (:class:`MinHashLSH`), and every candidate is confirmed
  with the exact Jaccard of the shingle sets, so each pair reported is exact and a
  pair above the threshold is missed only with the probability the method reports
  (``candidate_recall_at_threshold``). Within a domain only partners in the same
  domain count; overall, any partner does.
- **families** and **family × skill sets**: distinct task families, and distinct
  (family, set of primitive skills) combinations, twice: with the skills the spec
  sampled (``axes.primitive_skills``; an upper bound) and with the skills the task
  made a stated and tested requirement of (``generator.skills.realised`` in
  ``tmax.json``, the ``skills_realised`` column; :func:`tmax.generate.audit.realised_skills`).
  Tasks whose generator records no realisation (the LLM backend) are left out of the
  second count.

Words are ``[a-z0-9]+`` runs of the lowercased text, the definition the
decontamination stage uses for its n-grams.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rich.progress import track

log = logging.getLogger("tmax.generate")

WORD = re.compile(r"[a-z0-9]+")
DISTINCT_N = (1, 2, 3)
GROUP_SIZE = 100
"""Instructions per distinct-n sample: small enough that a domain of the embedded
default fills one group, large enough for the ratio to settle."""
SHINGLE_WORDS = 5
NEAR_DUPLICATE_THRESHOLD = 0.8
UNKNOWN_BACKEND = "unknown"
"""A row without a ``backend`` (one exported before the column existed)."""
EXAMPLE_PAIRS = 5


def words(text: str) -> list[str]:
    """The words of ``text``: ``[a-z0-9]+`` runs of ``text.lower()``."""
    return WORD.findall(text.lower())


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """Word n-grams with stride 1; none when there are fewer than ``n`` words."""
    return list(zip(*(tokens[k:] for k in range(n)), strict=False))


def distinct_count(word_lists: Iterable[Sequence[str]], n: int) -> tuple[int, int]:
    """(distinct n-grams, all n-grams) over the texts together."""
    seen: set[tuple[str, ...]] = set()
    total = 0
    for tokens in word_lists:
        grams = ngrams(tokens, n)
        seen.update(grams)
        total += len(grams)
    return len(seen), total


def distinct_n(
    word_lists: Sequence[Sequence[str]], n: int, group_size: int = GROUP_SIZE
) -> dict[str, Any]:
    """distinct-n as the mean over consecutive groups of ``group_size`` texts (the short
    tail is left out unless it is the only group), with the raw counts of all texts."""
    groups = [word_lists[i : i + group_size] for i in range(0, len(word_lists), group_size)]
    if len(groups) > 1 and len(groups[-1]) < group_size:
        groups.pop()
    ratios = []
    for group in groups:
        distinct, total = distinct_count(group, n)
        ratios.append(distinct / total if total else 0.0)
    distinct, total = distinct_count(word_lists, n)
    return {
        "ratio": sum(ratios) / len(ratios) if ratios else 0.0,
        "groups": len(groups),
        "tasks_sampled": sum(len(g) for g in groups),
        "distinct": distinct,
        "total": total,
    }


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|A ∩ B| / |A ∪ B|; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def shingle_sets(
    texts: Sequence[str], size: int = SHINGLE_WORDS
) -> tuple[list[frozenset[int]], list[int]]:
    """Each text's set of word ``size``-gram shingles, as ids into one shared table
    (so equal ids are equal shingles, and the Jaccard of id sets is exact), and each
    id's 64-bit hash for MinHash. A text shorter than ``size`` words is one shingle."""
    ids: dict[tuple[str, ...], int] = {}
    hashes: list[int] = []
    sets = []
    for text in texts:
        tokens = words(text)
        grams = ngrams(tokens, size) if len(tokens) >= size else [tuple(tokens)] * bool(tokens)
        members = set()
        for gram in grams:
            if gram not in ids:
                ids[gram] = len(hashes)
                hashes.append(stable_hash(" ".join(gram)))
            members.add(ids[gram])
        sets.append(frozenset(members))
    return sets, hashes


def stable_hash(text: str) -> int:
    """A 64-bit hash that is the same in every process (``hash()`` is salted)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class MinHashLSH:
    """MinHash signatures cut into bands for locality-sensitive hashing.

    Signature entry i is min over the shingles s of h_i(s) = H(s) ⊕ m_i, with H the
    64-bit :func:`stable_hash` and m_i a 64-bit mask drawn from ``seed``. XOR with a
    fixed mask is a bijection, and H's values behave as independent uniform draws, so
    for each i, P[the entries of A and B agree] = J(A, B). Two texts become a candidate
    pair when all ``rows`` entries of at least one of the ``bands`` bands agree, which
    happens with probability 1 − (1 − J^rows)^bands (:meth:`candidate_probability`):
    ≈ 0.9996 at J = 0.8 for 20 × 5, and 0.05 at J = 0.3, so few dissimilar pairs reach
    the exact check. (XOR masks over one strong hash rather than (a·x + b) mod p: five
    times faster in pure Python, which keeps 15k tasks under a minute.)
    """

    bands: int = 20
    rows: int = 5
    seed: int = 0

    @cached_property
    def masks(self) -> list[int]:
        """The m_i, one per signature entry (the same for the same seed)."""
        rng = random.Random(f"tmax-minhash/{self.seed}")
        return [rng.getrandbits(64) for _ in range(self.bands * self.rows)]

    def signature(self, shingle_hashes: Sequence[int]) -> tuple[int, ...]:
        """min over the shingles of H(s) ⊕ m_i, for each i (``shingle_hashes``: the H(s))."""
        return tuple(min(h ^ mask for h in shingle_hashes) for mask in self.masks)

    def candidate_pairs(self, signatures: Sequence[tuple[int, ...]]) -> set[tuple[int, int]]:
        """Index pairs (i < j) whose signatures agree on every row of some band."""
        pairs: set[tuple[int, int]] = set()
        for band in range(self.bands):
            span = slice(band * self.rows, (band + 1) * self.rows)
            buckets: dict[tuple[int, ...], list[int]] = defaultdict(list)
            for index, signature in enumerate(signatures):
                buckets[signature[span]].append(index)
            for members in buckets.values():
                pairs.update((a, b) for k, a in enumerate(members) for b in members[k + 1 :])
        return pairs

    def candidate_probability(self, similarity: float) -> float:
        """P[a pair of Jaccard ``similarity`` becomes a candidate] = 1 − (1 − s^r)^b."""
        return 1.0 - (1.0 - similarity**self.rows) ** self.bands

    def describe(self) -> str:
        return (
            f"MinHash ({self.bands * self.rows} hash functions H(s) xor m_i, seed {self.seed}) "
            f"+ LSH ({self.bands} bands x {self.rows} rows); candidates confirmed by exact Jaccard"
        )


@dataclass(frozen=True)
class NearDuplicates:
    """The near-duplicate pairs of a list of texts.

    Texts with the same shingle set are one ``group`` (their Jaccard is 1); ``pairs``
    join distinct groups, with their exact Jaccard. Kept at group level so that a
    thousand copies of one instruction cost one signature, not half a million pairs.
    """

    groups: list[list[int]]
    pairs: list[tuple[int, int, float]]
    candidates_checked: int

    def with_partner(self, members: Iterable[int]) -> set[int]:
        """The texts among ``members`` that have a near-duplicate among ``members``."""
        inside = set(members)
        present = [[t for t in group if t in inside] for group in self.groups]
        found = {t for group in present if len(group) > 1 for t in group}
        for a, b, _ in self.pairs:
            if present[a] and present[b]:
                found.update(present[a])
                found.update(present[b])
        return found

    def closest(self, limit: int) -> list[tuple[int, int, float]]:
        """Up to ``limit`` near-duplicate text pairs, most similar first (examples)."""
        same = [(g[0], g[1], 1.0) for g in self.groups if len(g) > 1]
        across = [(self.groups[a][0], self.groups[b][0], s) for a, b, s in self.pairs]
        return sorted(same + across, key=lambda p: (-p[2], p[0], p[1]))[:limit]


def find_near_duplicates(
    texts: Sequence[str],
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
    lsh: MinHashLSH | None = None,
    shingle_words: int = SHINGLE_WORDS,
) -> NearDuplicates:
    """Pairs of texts whose shingle sets have Jaccard ≥ ``threshold``: MinHash/LSH
    candidates, each confirmed with the exact Jaccard."""
    lsh = lsh or MinHashLSH()
    sets, hashes = shingle_sets(texts, shingle_words)
    by_set: dict[frozenset[int], list[int]] = defaultdict(list)
    for index, shingles in enumerate(sets):
        by_set[shingles].append(index)
    unique = list(by_set)
    hashed = [i for i, shingles in enumerate(unique) if shingles]  # empty sets have no minimum
    signatures = [
        lsh.signature([hashes[s] for s in unique[i]])
        for i in track(hashed, description="MinHash signatures", disable=len(hashed) < 2000)
    ]
    candidates = lsh.candidate_pairs(signatures)
    pairs = []
    for a, b in sorted(candidates):
        similarity = jaccard(unique[hashed[a]], unique[hashed[b]])
        if similarity >= threshold:
            pairs.append((hashed[a], hashed[b], similarity))
    log.info(
        "near duplicates: %d texts, %d distinct shingle sets, %d candidate pairs, %d confirmed",
        len(texts), len(unique), len(candidates), len(pairs),
    )  # fmt: skip
    return NearDuplicates(list(by_set.values()), pairs, len(candidates))


def _measure(
    rows: Sequence[Mapping[str, Any]],
    members: Sequence[int],
    word_lists: Sequence[list[str]],
    duplicates: NearDuplicates,
    group_size: int,
) -> dict[str, Any]:
    """The figures of one scope (a domain, a backend, or everything)."""
    scope = [rows[i] for i in members]
    with_partner = duplicates.with_partner(members)
    return {
        "tasks": len(members),
        "distinct_n": {
            str(n): distinct_n([word_lists[i] for i in members], n, group_size) for n in DISTINCT_N
        },
        "near_duplicates": {
            "tasks": len(with_partner),
            "rate": len(with_partner) / len(members) if members else 0.0,
        },
        "families": len({row["family"] for row in scope}),
        "family_skill_sets": len(
            {(row["family"], frozenset(row["primitive_skills"])) for row in scope}
        ),
        "family_realised_skill_sets": len(
            {
                (row["family"], frozenset(row["skills_realised"]))
                for row in scope
                if row.get("skills_realised") is not None
            }
        ),
    }


def _scopes(
    rows: Sequence[Mapping[str, Any]],
    members: Sequence[int],
    word_lists: Sequence[list[str]],
    duplicates: NearDuplicates,
    group_size: int,
) -> dict[str, Any]:
    """``overall`` and per-``domains`` figures of the rows at ``members``."""
    by_domain: dict[str, list[int]] = defaultdict(list)
    for i in members:
        by_domain[rows[i]["domain"]].append(i)
    return {
        "overall": _measure(rows, members, word_lists, duplicates, group_size),
        "domains": {
            domain: _measure(rows, by_domain[domain], word_lists, duplicates, group_size)
            for domain in sorted(by_domain)
        },
    }


def task_diversity(
    rows: Sequence[Mapping[str, Any]],
    group_size: int = GROUP_SIZE,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
    lsh: MinHashLSH | None = None,
) -> dict[str, Any]:
    """The diversity figures of exported task rows (keys ``task_id``, ``domain``,
    ``family``, ``primitive_skills``, ``instruction``, and ``backend`` when known),
    overall and per domain, and per generator backend when more than one is present."""
    lsh = lsh or MinHashLSH()
    rows = sorted(rows, key=lambda row: row["task_id"])
    word_lists = [words(row["instruction"]) for row in rows]
    duplicates = find_near_duplicates([row["instruction"] for row in rows], threshold, lsh)
    everything = list(range(len(rows)))
    report: dict[str, Any] = {
        "method": {
            "words": "[a-z0-9]+ runs of the lowercased instruction",
            "distinct_n": f"mean over groups of {group_size} instructions in task-id order",
            "group_size": group_size,
            "near_duplicates": lsh.describe(),
            "shingle_words": SHINGLE_WORDS,
            "threshold": threshold,
            "candidate_recall_at_threshold": round(lsh.candidate_probability(threshold), 6),
            "candidates_checked": duplicates.candidates_checked,
            "skills": "sampled: axes.primitive_skills of tmax.json (the spec's); realised: "
            "generator.skills.realised (those the task states and tests)",
        },
        **_scopes(rows, everything, word_lists, duplicates, group_size),
        "closest_pairs": [
            {"tasks": [rows[a]["task_id"], rows[b]["task_id"]], "jaccard": round(s, 4)}
            for a, b, s in duplicates.closest(EXAMPLE_PAIRS)
        ],
    }
    by_backend: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_backend[row.get("backend") or UNKNOWN_BACKEND].append(i)
    if len(by_backend) > 1:
        report["backends"] = {
            backend: _scopes(rows, members, word_lists, duplicates, group_size)
            for backend, members in sorted(by_backend.items())
        }
    return report


def _table_row(label: str, figures: Mapping[str, Any]) -> str:
    ratios = " | ".join(f"{figures['distinct_n'][str(n)]['ratio']:.3f}" for n in DISTINCT_N)
    return (
        f"| {label} | {figures['tasks']} | {ratios} | "
        f"{figures['near_duplicates']['rate']:.3f} | {figures['families']} | "
        f"{figures['family_skill_sets']} | {figures.get('family_realised_skill_sets', 0)} |"
    )


def _table(scopes: Mapping[str, Any], prefix: str = "") -> list[str]:
    lines = [
        "| scope | tasks | distinct-1 | distinct-2 | distinct-3 | near-duplicate rate "
        "| families | family × sampled skill sets | family × realised skill sets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_table_row(f"{prefix}{d}", f) for d, f in scopes["domains"].items()]
    lines.append(_table_row(f"{prefix}**overall**", scopes["overall"]))
    return lines


def diversity_markdown(diversity: Mapping[str, Any]) -> list[str]:
    """The report's "Diversity of the tasks themselves" section, as Markdown lines."""
    method = diversity["method"]
    lines = [
        "## Diversity of the tasks themselves",
        "",
        f"distinct-n: distinct word n-grams / all n-grams of the instructions, "
        f"{method['distinct_n']}. Near-duplicate rate: share of tasks whose instruction has "
        f"another at Jaccard ≥ {method['threshold']} of word {method['shingle_words']}-gram "
        f"shingles (within the domain; overall: anywhere), found by "
        f"{method['near_duplicates']} (recall at the threshold "
        f"{method['candidate_recall_at_threshold']:.4f}). Skills: {method['skills']}.",
        "",
        *_table(diversity),
    ]
    for backend, scopes in diversity.get("backends", {}).items():
        lines += ["", f"### Generator backend: {backend}", "", *_table(scopes)]
    return lines
