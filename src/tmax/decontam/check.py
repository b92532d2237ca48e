"""The contamination check: which tasks share word n-grams with which benchmark items.

Paper §3.3: lowercase, split on runs outside [a-z0-9], word 13-grams with stride 1;
a task counts as overlapping if any of its n-grams appears in a benchmark. Here the
comparison is field by field (every text of a task against every text of every
benchmark item), exact (hash hits are verified against the n-gram itself), and
explained: each hit names the benchmark item and both fields, with character spans in
both texts. An n-gram found in at least ``boilerplate_min_items`` items of a benchmark
(licence headers, "write the result to /app/output.txt") is boilerplate: reported, but
not counted as contamination, as GPT-3 ignored n-grams common to many documents.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmax.decontam.ngrams import NgramIndex, word_spans, words
from tmax.decontam.texts import Text

log = logging.getLogger("tmax.decontam")

Key = tuple[str, str, str]
"""(benchmark, item, field) of a benchmark text."""

MAX_MATCHES_PER_TASK = 50
"""Matches listed per task and n (all are counted); a leak is one match, not one per n-gram."""


@dataclass
class Match:
    """A run of consecutive overlapping n-grams between one task field and one item field."""

    benchmark: str
    item: str
    item_field: str
    task_field: str
    ngrams: int
    text: str
    task_span: tuple[int, int]
    item_span: tuple[int, int] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "item": self.item,
            "item_field": self.item_field,
            "task_field": self.task_field,
            "ngrams": self.ngrams,
            "text": self.text,
            "task_span": list(self.task_span),
            "item_span": list(self.item_span) if self.item_span else None,
        }


@dataclass
class TaskResult:
    """One task at one n: its contaminating matches per benchmark, and boilerplate."""

    task_id: str
    n: int
    total_ngrams: int = 0
    hit_ngrams: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    """benchmark → the distinct non-boilerplate n-grams shared with it"""
    items: dict[str, set[str]] = field(default_factory=dict)
    """benchmark → the items touched"""
    boilerplate: dict[str, int] = field(default_factory=dict)
    matches: list[Match] = field(default_factory=list)

    def flagged(self, benchmark: str | None = None) -> bool:
        if benchmark is None:
            return any(self.hit_ngrams.values())
        return bool(self.hit_ngrams.get(benchmark))

    def count(self) -> int:
        return len(set().union(*self.hit_ngrams.values())) if self.hit_ngrams else 0

    def fraction(self) -> float:
        return self.count() / self.total_ngrams if self.total_ngrams else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "n": self.n,
            "total_ngrams": self.total_ngrams,
            "hit_ngrams": {b: len(g) for b, g in sorted(self.hit_ngrams.items())},
            "count": self.count(),
            "fraction": self.fraction(),
            "items": {b: sorted(i) for b, i in sorted(self.items.items())},
            "boilerplate_ngrams": dict(sorted(self.boilerplate.items())),
            "matches": [m.to_dict() for m in self.matches[:MAX_MATCHES_PER_TASK]],
            "matches_total": len(self.matches),
        }


class BenchmarkSide:
    """The benchmark texts of one n: the exact index plus what explaining a hit needs."""

    def __init__(self, n: int, texts: Mapping[str, Sequence[Text]], boilerplate_min_items: int):
        self.n = n
        self.texts: dict[Key, str] = {
            (benchmark, t.owner, t.field): t.text
            for benchmark, items in texts.items()
            for t in items
        }
        self.items_per_benchmark = {b: len({t.owner for t in ts}) for b, ts in texts.items()}
        self.index = NgramIndex(n, self.texts.items())
        self.boilerplate_min_items = boilerplate_min_items
        self._positions: dict[Key, dict[tuple[str, ...], int]] = {}

    def is_boilerplate(self, gram: tuple[str, ...], benchmark: str) -> bool:
        items = {item for b, item, _ in self.index.keys_of(gram) if b == benchmark}
        return len(items) >= self.boilerplate_min_items

    def item_span(self, key: Key, gram: tuple[str, ...], length: int) -> tuple[int, int] | None:
        """Character span in the item's text of ``length`` words starting with ``gram``."""
        positions = self._positions.get(key)
        if positions is None:
            tokens = words(self.texts[key])
            positions = {}
            for i in range(len(tokens) - self.n + 1):
                positions.setdefault(tuple(tokens[i : i + self.n]), i)
            self._positions[key] = positions
        start = positions.get(gram)
        if start is None:
            return None
        spans = word_spans(self.texts[key])
        end = min(start + length, len(spans)) - 1
        return spans[start][0], spans[end][1]


def check_tasks(
    task_texts: Sequence[Text], side: BenchmarkSide, *, workers: int = 1
) -> dict[str, TaskResult]:
    """Scan every task text against the benchmark side; results for the tasks that
    share any n-gram with it (contamination or boilerplate).

    Only those tasks' texts are tokenised in Python (to explain hits and count the
    task's n-grams): the scan itself is the native one, so clean tasks cost no more.
    """
    n = side.n
    started = time.perf_counter()
    positions = side.index.find([t.text for t in task_texts], workers=workers)
    scanned = time.perf_counter() - started
    hit_owners = {text.owner for text, hits in zip(task_texts, positions, strict=True) if hits}
    results: dict[str, TaskResult] = {}
    for text, hits in zip(task_texts, positions, strict=True):
        if text.owner not in hit_owners:
            continue
        result = results.setdefault(text.owner, TaskResult(text.owner, n))
        tokens = words(text.text)
        result.total_ngrams += max(0, len(tokens) - n + 1)
        if hits:
            _explain(text, tokens, hits, side, result)
    size = sum(len(t.text) for t in task_texts)
    log.info(
        "n=%d: %d task text(s), %.1f MB scanned in %.2fs; %d task(s) overlap",
        n, len(task_texts), size / 1e6, scanned, sum(r.flagged() for r in results.values()),
    )  # fmt: skip
    return results


def _explain(
    text: Text, tokens: list[str], hits: list[int], side: BenchmarkSide, result: TaskResult
) -> None:
    """Turn hit positions into matches: consecutive hits against the same item field
    merge into one match whose spans cover them all."""
    n = side.n
    spans = word_spans(text.text)
    open_runs: dict[Key, list[int]] = {}  # key → [first word, last word, n-grams]
    finished: list[tuple[Key, list[int], tuple[str, ...]]] = []
    first_gram: dict[Key, tuple[str, ...]] = {}
    previous = -2
    for position in hits:
        gram = tuple(tokens[position : position + n])
        keys = side.index.keys_of(gram)
        if position != previous + 1:  # a gap closes every run
            finished += [(k, run, first_gram[k]) for k, run in open_runs.items()]
            open_runs = {}
        previous = position
        current: set[Key] = set()
        # Sorted: set order varies between processes (string hashing), and the report
        # lists matches in the order their runs open.
        for benchmark in sorted({k[0] for k in keys}):
            if side.is_boilerplate(gram, benchmark):
                result.boilerplate[benchmark] = result.boilerplate.get(benchmark, 0) + 1
                continue
            result.hit_ngrams.setdefault(benchmark, set()).add(gram)
            for key in sorted(k for k in keys if k[0] == benchmark):
                current.add(key)
                result.items.setdefault(benchmark, set()).add(key[1])
                run = open_runs.get(key)
                if run is None:
                    open_runs[key] = [position, position, 1]
                    first_gram[key] = gram
                else:
                    run[1], run[2] = position, run[2] + 1
        # A run ends where its item field stops matching.
        finished += [(k, run, first_gram[k]) for k, run in open_runs.items() if k not in current]
        open_runs = {k: run for k, run in open_runs.items() if k in current}
    finished += [(k, run, first_gram[k]) for k, run in open_runs.items()]
    for key, (first, last, count), gram in finished:
        length = last - first + n
        result.matches.append(
            Match(
                benchmark=key[0],
                item=key[1],
                item_field=key[2],
                task_field=text.field,
                ngrams=count,
                text=" ".join(tokens[first : first + length])[:500],
                task_span=(spans[first][0], spans[first + length - 1][1]),
                item_span=side.item_span(key, gram, length),
            )
        )


def removal_reason(entry: Mapping[str, Any], rule: str, threshold: float) -> str | None:
    """Why a flagged task (a ``TaskResult.to_dict()``) is removed under the configured
    rule, or None when it stays.

    ``any``: one shared n-gram (the paper's and GPT-3's rule); ``fraction``: at least
    ``threshold`` of the task's n-grams are shared; ``count``: at least ``threshold``
    distinct shared n-grams. Boilerplate never counts.
    """
    count, fraction, n = entry["count"], entry["fraction"], entry["n"]
    if count == 0:
        return None
    if rule == "fraction" and fraction < threshold:
        return None
    if rule == "count" and count < threshold:
        return None
    matches = entry["matches"]
    best = max(matches, key=lambda m: m["ngrams"]) if matches else None
    where = (
        f"; largest match: {best['benchmark']} item {best['item']!r} ({best['item_field']}) "
        f"in the task's {best['task_field']}, {best['ngrams']} n-gram(s): "
        f"{best['text'][:120]!r}"
        if best
        else ""
    )
    benchmarks = ", ".join(sorted(b for b, c in entry["hit_ngrams"].items() if c))
    return (
        f"{count} distinct {n}-gram(s) ({100 * fraction:.2f}% of the task's) shared with "
        f"{benchmarks}{where}"
    )


def summary_rows(
    results: Mapping[int, Mapping[str, TaskResult]],
    side_items: Mapping[str, int],
    n_tasks: int,
) -> list[dict[str, Any]]:
    """One row per (benchmark, n): % of tasks with any overlap, % of items touched."""
    rows = []
    for n, by_task in sorted(results.items(), reverse=True):
        for benchmark, items in sorted(side_items.items()):
            flagged = [r for r in by_task.values() if r.flagged(benchmark)]
            touched: set[str] = set()
            for r in flagged:
                touched |= r.items.get(benchmark, set())
            rows.append(
                {
                    "benchmark": benchmark,
                    "n": n,
                    "tasks": n_tasks,
                    "tasks_flagged": len(flagged),
                    "tasks_flagged_pct": 100 * len(flagged) / n_tasks if n_tasks else 0.0,
                    "items": items,
                    "items_touched": len(touched),
                    "items_touched_pct": 100 * len(touched) / items if items else 0.0,
                    "boilerplate_hits": sum(
                        r.boilerplate.get(benchmark, 0) for r in by_task.values()
                    ),
                }
            )
    return rows


def boilerplate_ngrams(side: BenchmarkSide, limit: int = 200) -> dict[str, list[dict[str, Any]]]:
    """Per benchmark, the n-grams common to at least ``boilerplate_min_items`` items."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for gram in side.index.grams():
        by_benchmark: dict[str, set[str]] = defaultdict(set)
        for benchmark, item, _ in side.index.keys_of(gram):
            by_benchmark[benchmark].add(item)
        for benchmark, items in by_benchmark.items():
            if len(items) >= side.boilerplate_min_items:
                found[benchmark].append({"ngram": " ".join(gram), "items": len(items)})
    return {
        b: sorted(grams, key=lambda g: (-g["items"], g["ngram"]))[:limit]
        for b, grams in sorted(found.items())
    }
