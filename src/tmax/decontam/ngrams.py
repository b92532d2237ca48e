"""Word n-grams as TMAX defines them, and an exact index of a benchmark's n-grams.

TMAX (``rl_data/decontamination/ngram.py``) lowercases a text and splits it on
``[^a-z0-9]+``; a dataset task is contaminated if any of its word 13-grams (stride 1)
occurs in a benchmark. This module is that definition in plain Python — the reference
the fast path is tested against, and the code that explains a hit — plus
:class:`NgramIndex`, which answers the same question through the C scanner in
:mod:`tmax.decontam.native` and verifies every hash hit against the exact n-gram tuples.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from tmax.decontam import native

# A word is a maximal run of [a-z0-9] in the lowercased text; everything else —
# punctuation, '_', '/', whitespace, and non-ASCII letters and digits — separates words.
WORD = re.compile(r"[a-z0-9]+")

Key = TypeVar("Key", bound=Hashable)


def words(text: str) -> list[str]:
    """The words of ``text``: ``[a-z0-9]+`` runs of ``text.lower()`` (full Unicode lowering)."""
    return WORD.findall(text.lower())


def word_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` character span of each word of :func:`words`, in ``text`` itself.

    Words are found in ``text.lower()``, which can be longer than ``text``: a few
    characters lowercase to several code points ('İ' → 'i' + U+0307). Every character
    lowers to at least one code point, so when the lengths are equal the positions
    coincide. Otherwise each position of the lowered string is mapped back to the
    original character it came from (lowering character by character gives the same
    lengths: the one context-dependent rule, final sigma, maps one code point to one),
    and a span covers every original character any of its code points came from.
    """
    lowered = text.lower()
    spans = [m.span() for m in WORD.finditer(lowered)]
    if len(lowered) == len(text):
        return spans
    origin = [i for i, char in enumerate(text) for _ in range(len(char.lower()))]
    return [(origin[start], origin[end - 1] + 1) for start, end in spans]


def ngrams(words: Sequence[str], n: int) -> Iterator[tuple[str, ...]]:
    """The word n-grams of ``words`` with stride 1; none if there are fewer than n words."""
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    return zip(*(words[k:] for k in range(n)), strict=False)


def baseline_find(
    index_grams: set[tuple[str, ...]], texts: Iterable[str], n: int
) -> list[list[int]]:
    """TMAX's method, kept plain as the benchmark's baseline and the tests' oracle: for each
    text, regex-tokenise, build every n-gram tuple, test it against a set."""
    found = []
    for text in texts:
        tokens = WORD.findall(text.lower())
        found.append(
            [i for i in range(len(tokens) - n + 1) if tuple(tokens[i : i + n]) in index_grams]
        )
    return found


class NgramIndex(Generic[Key]):
    """The exact word n-grams of a benchmark's texts, each with the keys it came from.

    ``texts`` yields ``(key, text)`` pairs; the key is anything hashable (the pipeline
    uses ``(benchmark, item_id, field)``). The exact map ``n-gram tuple → keys`` is
    kept in memory (the benchmark side is small). :meth:`find` scans dataset texts with
    the native scanner when it is available and verifies each hash hit against that
    map, so a result never depends on hashing: it equals :func:`baseline_find`.

    ``hash_bits`` < 64 truncates the native hashes to force collisions; it exists so
    tests can show that collisions cost time, never correctness.
    """

    def __init__(self, n: int, texts: Iterable[tuple[Key, str]], *, hash_bits: int = 64) -> None:
        if n < 1:
            raise ValueError(f"n must be ≥ 1, got {n}")
        native.hash_mask(hash_bits)  # validates the range
        self.n = n
        self.hash_bits = hash_bits
        self._keys: dict[tuple[str, ...], set[Key]] = {}
        for key, text in texts:
            for gram in ngrams(words(text), n):
                self._keys.setdefault(gram, set()).add(key)
        self._scanner: native.NativeScanner | None = None
        self._scanner_lock = threading.Lock()

    def __len__(self) -> int:
        """The number of unique n-grams."""
        return len(self._keys)

    def __contains__(self, gram: object) -> bool:
        return gram in self._keys

    def grams(self) -> Iterator[tuple[str, ...]]:
        """The unique n-grams, in first-seen order."""
        return iter(self._keys)

    def keys_of(self, gram: tuple[str, ...]) -> set[Key]:
        """The keys of the texts containing ``gram`` (empty if none)."""
        return set(self._keys.get(gram, ()))

    def find(self, texts: Sequence[str], *, workers: int = 1) -> list[list[int]]:
        """For each text, the sorted word indices i whose n-gram ``words[i : i + n]`` is in
        the index. N-grams never span two texts.

        With the native scanner, ``workers`` threads scan chunks of the texts (the C call
        releases the GIL); the pure-Python fallback ignores ``workers``. Every path gives
        the same answer.
        """
        if workers < 1:
            raise ValueError(f"workers must be ≥ 1, got {workers}")
        scanner = self._native_scanner()
        if scanner is None:
            return self._find_python(texts)
        text_ids, word_ids = scanner.candidates(texts, workers)
        return self._verify(texts, text_ids, word_ids)

    def _native_scanner(self) -> native.NativeScanner | None:
        lib = native.load()
        if lib is None or self.n > native.MAX_N:
            return None
        with self._scanner_lock:
            if self._scanner is None or self._scanner.lib is not lib:
                self._scanner = native.NativeScanner(lib, self.n, list(self._keys), self.hash_bits)
            return self._scanner

    def _verify(
        self, texts: Sequence[str], text_ids: list[int], word_ids: list[int]
    ) -> list[list[int]]:
        """Keep the candidates whose exact n-gram is in the index. Candidates come in text
        order, so each text with candidates is tokenised once."""
        found: list[list[int]] = [[] for _ in texts]
        n, grams = self.n, self._keys
        current, tokens = -1, []
        for t, i in zip(text_ids, word_ids, strict=True):
            if t != current:
                current, tokens = t, words(texts[t])
            if tuple(tokens[i : i + n]) in grams:
                found[t].append(i)
        return found

    def _find_python(self, texts: Sequence[str]) -> list[list[int]]:
        grams = self._keys
        return [
            [i for i, gram in enumerate(ngrams(words(text), self.n)) if gram in grams]
            for text in texts
        ]
