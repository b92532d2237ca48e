"""Planted leaks: proof, on every run, that the check finds what it should.

Spans of 20–40 words are cut from benchmark texts, disguised the way a leak would be
(case changed, punctuation swapped, lines re-wrapped) and pasted into copies of task
texts. Every copy must be flagged against the item it came from, and the untouched
originals must keep their verdicts: recall on leaks, no new false hits.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tmax.decontam.check import BenchmarkSide, check_tasks
from tmax.decontam.ngrams import word_spans
from tmax.decontam.texts import Text

_PUNCTUATION = [", ", "; ", " - ", ". ", " / ", ":\n", " ... ", "\t"]


def disguise(span: str, rng: random.Random) -> str:
    """The same words, with case, separators and line breaks changed."""
    tokens = re.findall(r"[A-Za-z0-9]+", span)
    out = []
    for index, token in enumerate(tokens):
        style = rng.random()
        token = token.upper() if style < 0.3 else token.capitalize() if style < 0.6 else token
        out.append(token)
        if index + 1 < len(tokens):
            out.append("\n" if (index + 1) % rng.randint(5, 9) == 0 else rng.choice(_PUNCTUATION))
    return "".join(out)


@dataclass
class PlantedLeak:
    task_id: str
    key: tuple[str, str, str]
    words: int


def plant_leaks(
    task_texts: Sequence[Text], side: BenchmarkSide, count: int, seed: int
) -> tuple[list[Text], list[PlantedLeak]]:
    """Copies of ``count`` task texts, each carrying a disguised benchmark span."""
    rng = random.Random(seed)
    shortest, longest = max(20, side.n + 2), max(40, side.n + 20)
    sources = [
        (key, text) for key, text in sorted(side.texts.items()) if len(word_spans(text)) >= shortest
    ]
    if not sources or not task_texts:
        return [], []
    planted_texts, leaks = [], []
    for index in range(count):
        key, source = rng.choice(sources)
        spans = word_spans(source)
        length = rng.randint(shortest, min(longest, len(spans)))
        start = rng.randint(0, len(spans) - length)
        span = source[spans[start][0] : spans[start + length - 1][1]]
        host = rng.choice(task_texts)
        cut = rng.randint(0, len(host.text))
        task_id = f"planted-{index:03d}"
        body = f"{host.text[:cut]}\n{disguise(span, rng)}\n{host.text[cut:]}"
        planted_texts.append(Text(task_id, host.field, body))
        leaks.append(PlantedLeak(task_id, key, length))
    return planted_texts, leaks


def self_test(
    task_texts: Sequence[Text],
    side: BenchmarkSide,
    *,
    count: int = 20,
    seed: int = 0,
    workers: int = 1,
) -> dict[str, Any]:
    """Plant ``count`` leaks and check them; the result goes into the report.

    A leak is found when its task is flagged against the item it was cut from (or,
    when that span is boilerplate-only, the check at least reports the boilerplate).
    """
    planted, leaks = plant_leaks(task_texts, side, count, seed)
    if not leaks:
        return {"planted": 0, "found": 0, "missed": [], "passed": True}
    results = check_tasks(planted, side, workers=workers)
    missed = []
    for leak in leaks:
        benchmark, item, _ = leak.key
        result = results.get(leak.task_id)  # absent: no shared n-gram at all
        found = result is not None and (
            item in result.items.get(benchmark, set()) or bool(result.boilerplate.get(benchmark))
        )
        if not found:
            missed.append({"task": leak.task_id, "benchmark": benchmark, "item": item})
    return {
        "planted": len(leaks),
        "found": len(leaks) - len(missed),
        "missed": missed,
        "passed": not missed,
    }
