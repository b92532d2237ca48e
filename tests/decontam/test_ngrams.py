"""The n-gram core: TMAX's tokenisation, and an index whose fast path is exact."""

from __future__ import annotations

import logging
import random
from itertools import pairwise
from pathlib import Path

import pytest

from tmax.decontam import native
from tmax.decontam.ngrams import NgramIndex, baseline_find, ngrams, word_spans, words

VOCABULARY = ["ls", "cat", "grep", "the", "file", "usr", "bin", "python3", "x86", "64", "é", "na"]
SEPARATORS = [" ", " ", "\n", ", ", "/", "_", "-", "\t", "é", "\0", "İ", "\ud800", "东"]


@pytest.fixture
def lib() -> native.ScanLibrary:
    loaded = native.load()
    if loaded is None:
        pytest.skip("native scanner unavailable (no gcc?)")
    return loaded


@pytest.fixture
def fresh_native(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """An empty cache and no loaded library; the real one is restored afterwards."""
    monkeypatch.setenv("TMAX_CACHE", str(tmp_path))
    monkeypatch.setenv(native.ENV_SWITCH, "1")
    native.reset()
    yield tmp_path
    native.reset()


def random_text(rng: random.Random, count: int) -> str:
    pieces = []
    for _ in range(count):
        word = rng.choice(VOCABULARY)
        pieces.append(rng.choice((word, word.upper(), word.capitalize())))
        pieces.append(rng.choice(SEPARATORS))
    return "".join(pieces)


def random_case(seed: int, n: int) -> tuple[list[tuple[str, str]], list[str]]:
    """Benchmark items and dataset texts over a small vocabulary, with copied spans so
    that hits are frequent, and texts shorter than n."""
    rng = random.Random(seed)
    items = [(f"item-{k}", random_text(rng, rng.randint(0, 60))) for k in range(8)]
    texts = []
    for _ in range(60):
        text = random_text(rng, rng.randint(0, 40))
        if rng.random() < 0.5:
            source = words(rng.choice(items)[1])
            start = rng.randrange(len(source) + 1)
            copied = source[start : start + n + rng.randint(-1, 4)]
            text += rng.choice(SEPARATORS) + " ".join(w.upper() for w in copied)
        texts.append(text)
    texts.append("")
    return items, texts


def index_grams(items: list[tuple[str, str]], n: int) -> set[tuple[str, ...]]:
    return {gram for _, text in items for gram in ngrams(words(text), n)}


# --- normalisation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("snake_case and kebab-case", ["snake", "case", "and", "kebab", "case"]),
        ("/usr/bin/python3 --version", ["usr", "bin", "python3", "version"]),
        ("v2.0 x86_64 1e-5", ["v2", "0", "x86", "64", "1e", "5"]),
        ("café naïve Straße", ["caf", "na", "ve", "stra", "e"]),
        ("東京 ٣ ３ Ａb", ["b"]),  # non-ASCII letters and digits only separate
        ("a\0b\tc\r\nd", ["a", "b", "c", "d"]),
        ("", []),
        ("?!", []),
    ],
)
def test_words_are_lowercase_ascii_alphanumeric_runs(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_unicode_lowercasing_that_yields_ascii() -> None:
    # The Kelvin sign lowercases to 'k'; 'İ' to 'i' plus a combining dot (a separator).
    assert words("5\u212a") == ["5k"]
    assert words("İNDEX") == ["i", "ndex"]
    assert words("xİy") == ["xi", "y"]


@pytest.mark.parametrize(
    "text", ["Hello, World!", "xİy \u212aelvin", "İİ ab", "ÀİÁ a_b", "σΣ ok", "", "a"]
)
def test_word_spans_index_the_original_text(text: str) -> None:
    spans = word_spans(text)
    assert len(spans) == len(words(text))
    for (start, end), word in zip(spans, words(text), strict=True):
        assert words(text[start:end]) == [word]
    assert spans == sorted(spans)


def test_word_spans_with_expanding_lowercase() -> None:
    text = "xİy \u212aelvin"  # 'İ' lowers to two code points, so positions shift by one
    assert [text[s:e] for s, e in word_spans(text)] == ["xİ", "y", "\u212aelvin"]


def test_ngrams_stride_one_and_none_below_n() -> None:
    assert list(ngrams(["a", "b", "c"], 2)) == [("a", "b"), ("b", "c")]
    assert list(ngrams(["a", "b"], 3)) == []
    with pytest.raises(ValueError):
        ngrams(["a"], 0)


# --- the index ----------------------------------------------------------------------


def test_index_maps_ngrams_to_their_keys() -> None:
    index = NgramIndex(2, [("a", "Run ls -la"), ("b", "ls LA now"), ("c", "one")])
    assert len(index) == 3  # run ls, ls la (in both items), la now
    assert ("ls", "la") in index
    assert ("la", "ls") not in index
    assert index.keys_of(("ls", "la")) == {"a", "b"}
    assert index.keys_of(("no", "such")) == set()


@pytest.mark.parametrize("native_on", ["1", "0"])
def test_find_is_per_text_and_needs_n_words(native_on: str, monkeypatch) -> None:
    monkeypatch.setenv(native.ENV_SWITCH, native_on)
    index = NgramIndex(3, [("item", "alpha beta gamma delta")])
    texts = ["x alpha beta", "gamma delta", "ALPHA-beta", "Alpha, BETA\ngamma!", "gamma"]
    # N-grams never span two texts, so only the fourth text matches.
    assert index.find(texts) == [[], [], [], [0], []]
    assert index.find(texts, workers=3) == [[], [], [], [0], []]
    assert index.find([]) == []


@pytest.mark.parametrize("n", [1, 3, 8, 13])
@pytest.mark.parametrize("seed", [0, 1])
def test_native_python_and_baseline_agree(lib, monkeypatch, n: int, seed: int) -> None:
    items, texts = random_case(seed, n)
    expected = baseline_find(index_grams(items, n), texts, n)
    assert sum(map(len, expected)) > 0  # the case exercises hits
    index = NgramIndex(n, items)
    assert index.find(texts) == expected
    assert index.find(texts, workers=2) == expected
    assert index.find(texts, workers=7) == expected
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    assert native.load() is None
    assert index.find(texts) == expected


@pytest.mark.parametrize("n", [3, 8, 13])
def test_exact_under_forced_hash_collisions(lib, n: int) -> None:
    items, texts = random_case(7, n)
    expected = baseline_find(index_grams(items, n), texts, n)
    weak = NgramIndex(n, items, hash_bits=8)
    assert weak.find(texts) == expected
    assert weak.find(texts, workers=2) == expected
    # The weak hash really collides: far more candidates than true hits.
    scanner = native.NativeScanner(lib, n, list(index_grams(items, n)), hash_bits=8)
    candidates, _ = scanner.candidates(texts)
    assert len(candidates) > 3 * sum(map(len, expected))


def test_candidate_buffer_grows_and_resumes(lib, monkeypatch) -> None:
    # Tiny output buffers force the scan to stop mid-way, resume, and grow.
    monkeypatch.setattr(native, "_FIRST_CAP", 2)
    items, texts = random_case(3, 3)
    texts.append(" ".join(words(items[0][1])) * 3)  # one text with many hits
    expected = baseline_find(index_grams(items, 3), texts, 3)
    assert NgramIndex(3, items, hash_bits=4).find(texts) == expected


def test_ngram_hashes_agree_between_index_and_scan(lib) -> None:
    # The same words hash the same whatever the case, separators and position.
    mask = native.hash_mask(64)
    alone = lib.ngram_hashes(native.encode(["grep the file"]), 3, mask)
    inside = lib.ngram_hashes(native.encode(["LS usr\nGREP_the/file, cat"]), 3, mask)
    assert list(alone) == [inside[2]]  # (ls usr grep), (usr grep the), (grep the file)


def test_split_by_bytes_covers_every_text_in_order() -> None:
    encoded = native.encode(["a" * size for size in (5, 100, 1, 1, 50, 0, 30)])
    for parts in (1, 2, 3, 7, 20):
        chunks = native.split_by_bytes(encoded, parts)
        assert chunks[0][0] == 0 and chunks[-1][1] == 7
        assert all(a < b for a, b in chunks)
        assert all(prev[1] == cur[0] for prev, cur in pairwise(chunks))
        assert len(chunks) <= parts


# --- building and loading the library ------------------------------------------------


def test_library_is_compiled_once_and_cached(fresh_native: Path, monkeypatch) -> None:
    if native.shutil.which(native.COMPILER) is None:
        pytest.skip("no gcc")
    path = native.build()
    assert path.is_file() and path.parent == fresh_native / "native"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]

    def no_compiling(*args, **kwargs):
        raise AssertionError("recompiled although the library was cached")

    monkeypatch.setattr(native, "_compile", no_compiling)
    assert native.build() == path
    assert native.load() is not None  # a fresh process-level load uses the cached file


def test_missing_compiler_warns_once_and_falls_back(fresh_native, monkeypatch, caplog) -> None:
    monkeypatch.setattr(native, "COMPILER", "no-such-compiler-tmax")
    items, texts = random_case(5, 3)
    with caplog.at_level(logging.WARNING, logger="tmax.decontam.native"):
        assert native.load() is None
        found = NgramIndex(3, items).find(texts, workers=2)
        assert native.load() is None
    assert len([r for r in caplog.records if "unavailable" in r.getMessage()]) == 1
    assert found == baseline_find(index_grams(items, 3), texts, 3)


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="n must be"):
        NgramIndex(0, [])
    with pytest.raises(ValueError, match="hash_bits"):
        NgramIndex(3, [], hash_bits=0)
    with pytest.raises(ValueError, match="workers"):
        NgramIndex(3, []).find(["a"], workers=0)
