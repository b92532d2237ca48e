"""N-gram decontamination throughput: TMAX's set-of-tuples method against NgramIndex.find.

Run: .venv/bin/python benchmarks/decontam.py [--quick] [--n 13] [--seed 0]

Builds a seeded synthetic corpus (~100 MB of task-like text: Zipf pseudo-words, paths,
flags, numbers, one line per ~12 words; ~15,000 documents; --quick: 10 MB), a ~1 MB
benchmark of 120 items, and plants 60 leaks (20–40-word spans of benchmark items with
case, punctuation and line wrapping changed) into random documents. Then, in one run,
it scans the corpus with (a) the baseline, (b) NgramIndex.find on one worker and (c) on
os.cpu_count() workers, checks that all three return identical results and find every
leak, and prints CPU time (process_time, all threads) and wall time for each: the
machine may be shared, so per-core throughput is MB per CPU-second.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from tmax.decontam import native
from tmax.decontam.ngrams import NgramIndex, baseline_find, ngrams, words

VOCABULARY = 60_000
ZIPF_EXPONENT = 1.15
WORDS_PER_LINE = 12
BENCHMARK_ITEMS = 120
BENCHMARK_BYTES = 1_000_000
LEAKS = 60


def pseudo_words(rng: random.Random, count: int) -> list[str]:
    """Distinct lowercase pseudo-words of 1–3 syllables (~6.8 bytes per word in text)."""
    onsets = ["", *"bcdfghjklmnprstvwz", "st", "tr", "pl", "ch", "sh", "gr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "", "n", "r", "s", "t", "x", "ng", "ck"]
    seen: set[str] = set()
    vocabulary: list[str] = []
    while len(vocabulary) < count:
        syllables = rng.choices((1, 2, 3), weights=(10, 5, 1))[0]
        word = "".join(
            rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            vocabulary.append(word)
    return vocabulary


class TextMaker:
    """Task-like text: Zipf-distributed words, some paths, flags, file names and numbers."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = pseudo_words(rng, VOCABULARY)
        weights = [1 / rank**ZIPF_EXPONENT for rank in range(1, VOCABULARY + 1)]
        self.cumulative = list(accumulate(weights))

    def _special(self) -> str:
        rng, word = self.rng, self.rng.choice(self.vocabulary[:2000])
        kind = rng.randrange(6)
        if kind == 0:
            return f"/usr/{rng.choice(('bin', 'lib', 'local/share'))}/{word}"
        if kind == 1:
            return f"--{word}-{rng.choice(self.vocabulary[:500])}"
        if kind == 2:
            return f"{word}_{rng.randrange(100)}.{rng.choice(('py', 'sh', 'json', 'c'))}"
        if kind == 3:
            return str(rng.randrange(70_000))
        if kind == 4:
            return f"`{word}`,"
        return f"{word.capitalize()}."

    def document(self, target_bytes: int) -> str:
        rng = self.rng
        count = max(WORDS_PER_LINE, target_bytes * 10 // 74)  # ~7.4 bytes per token
        tokens = rng.choices(self.vocabulary, cum_weights=self.cumulative, k=count)
        for position in rng.sample(range(count), count // 10):
            tokens[position] = self._special()
        lines = []
        for start in range(0, count, WORDS_PER_LINE):
            line = " ".join(tokens[start : start + WORDS_PER_LINE])
            lines.append(line[:1].upper() + line[1:])
        return "\n".join(lines)


def perturb(rng: random.Random, span: list[str]) -> str:
    """Re-render words with other case, punctuation and line breaks (same TMAX words)."""
    separators = (" ", " ", " ", ", ", "\n", " - ", "; ", "_", " (", ") ", "/")
    shaped = [rng.choice((word, word.upper(), word.capitalize(), word)) for word in span]
    pieces = [shaped[0]]
    for word in shaped[1:]:
        pieces.append(rng.choice(separators))
        pieces.append(word)
    return "".join(pieces)


def build_data(corpus_bytes: int, seed: int) -> tuple[list[str], list[tuple[Any, str]], set[int]]:
    rng = random.Random(seed)
    maker = TextMaker(rng)
    documents = round(15_000 * corpus_bytes / 100_000_000)
    per_document = corpus_bytes // documents
    corpus = [maker.document(int(per_document * rng.uniform(0.3, 1.7))) for _ in range(documents)]
    items = [
        (
            ("synthetic-bench", f"item-{k:03d}", "instruction"),
            maker.document(BENCHMARK_BYTES // BENCHMARK_ITEMS),
        )
        for k in range(BENCHMARK_ITEMS)
    ]
    planted = set(rng.sample(range(documents), LEAKS))
    for doc in planted:
        item_words = words(rng.choice(items)[1])
        length = rng.randint(20, 40)
        start = rng.randrange(len(item_words) - length)
        leak = perturb(rng, item_words[start : start + length])
        lines = corpus[doc].split("\n")
        cut = rng.randrange(len(lines) + 1)
        corpus[doc] = "\n".join([*lines[:cut], leak, *lines[cut:]])
    return corpus, items, planted


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 MB corpus instead of 100 MB")
    parser.add_argument("--n", type=int, default=13, help="n-gram length (TMAX: 13)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    corpus_bytes = 10_000_000 if args.quick else 100_000_000
    workers = os.cpu_count() or 1

    (corpus, items, planted), _, gen_wall = timed(lambda: build_data(corpus_bytes, args.seed))
    megabytes = sum(len(doc) for doc in corpus) / 1e6  # all ASCII: characters = bytes
    bench_mb = sum(len(text) for _, text in items) / 1e6
    print(
        f"corpus: {len(corpus):,} documents, {megabytes:.1f} MB; benchmark: {len(items)} items, "
        f"{bench_mb:.2f} MB; {len(planted)} planted leaks; n={args.n} "
        f"(generated in {gen_wall:.1f} s)"
    )

    if native.load() is None:
        sys.exit("native scanner unavailable (gcc missing or TMAX_DECONTAM_NATIVE=0)")
    index, index_cpu, _ = timed(lambda: NgramIndex(args.n, items))
    _, table_cpu, _ = timed(lambda: index.find([]))  # builds the hash table
    grams = {gram for _, text in items for gram in ngrams(words(text), args.n)}
    print(
        f"index: {len(index):,} unique {args.n}-grams; exact map {index_cpu:.2f} cpu-s, "
        f"hash table {table_cpu:.3f} cpu-s"
    )

    runs = {
        "(a) baseline set-of-tuples": lambda: baseline_find(grams, corpus, args.n),
        "(b) NgramIndex.find, 1 worker": lambda: index.find(corpus, workers=1),
        f"(c) NgramIndex.find, {workers} workers": lambda: index.find(corpus, workers=workers),
    }
    results = {}
    print(f"{'method':34} {'cpu s':>7} {'MB/cpu-s':>9} {'wall s':>7} {'MB/s wall':>9}")
    for name, run in runs.items():
        results[name], cpu, wall = timed(run)
        results[name] = (results[name], cpu, wall)
        print(f"{name:34} {cpu:7.2f} {megabytes / cpu:9.1f} {wall:7.2f} {megabytes / wall:9.1f}")

    (base, base_cpu, base_wall), (one, one_cpu, one_wall), (many, _, many_wall) = results.values()
    assert one == base, "NgramIndex.find (1 worker) differs from the baseline"
    assert many == base, f"NgramIndex.find ({workers} workers) differs from the baseline"
    flagged = {doc for doc, hits in enumerate(base) if hits}
    missed = planted - flagged
    assert not missed, f"planted leaks not found in documents {sorted(missed)}"
    print(
        f"identical results from all three; flagged {len(flagged)} documents "
        f"({len(flagged & planted)}/{len(planted)} planted, {len(flagged - planted)} other); "
        f"{sum(map(len, base)):,} hit {args.n}-grams"
    )
    print(f"speed-up vs baseline, 1 worker      : {base_cpu / one_cpu:5.1f}x per CPU-second")
    print(
        f"{workers} workers: {megabytes / many_wall:.1f} MB/s wall, "
        f"{one_wall / many_wall:.2f}x the 1-worker wall time, "
        f"{base_wall / many_wall:.1f}x the baseline's wall time"
    )


if __name__ == "__main__":
    main()
