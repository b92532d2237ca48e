"""The fast path of the n-gram scan: ``_scan.c``, compiled on first use and loaded with ctypes.

The C code hashes every word n-gram of the texts (FNV-1a per word, a rolling polynomial
over the last n word hashes, a 64-bit finaliser) and reports the n-grams whose hash is in
an open-addressing table behind a bitmap prefilter. A reported n-gram is only a
*candidate*: :class:`tmax.decontam.ngrams.NgramIndex` verifies each against the exact
tuples, so a hash collision never becomes a hit. The index side is hashed by the same C
function, so the two sides agree by construction.

The library is cached under ``tmax.io.cache_dir() / "native"``, keyed by the source,
compiler flags and platform; building takes a file lock and renames atomically, so
parallel jobs neither race nor load a half-written file. Without gcc (or with
``TMAX_DECONTAM_NATIVE=0``) :func:`load` returns ``None`` and callers take the
pure-Python path, which gives identical results.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import threading
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate, pairwise
from pathlib import Path

from tmax.io import atomic_path, cache_dir, file_lock

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("_scan.c")
COMPILER = "gcc"
# No -march=native: the cache directory may be shared between machines.
CFLAGS = ("-O3", "-funroll-loops", "-shared", "-fPIC")
ENV_SWITCH = "TMAX_DECONTAM_NATIVE"
MAX_N = 1024  # the C ring buffer of word hashes (MAX_N in _scan.c)
_FIRST_CAP = 1 << 16  # candidate slots per scan call before growing

_P = ctypes.c_void_p
_I32, _I64, _U64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64


class NativeUnavailable(RuntimeError):
    """The C scanner cannot be built or loaded here."""


def _platform_tag() -> str:
    libc = "-".join(platform.libc_ver())
    return f"{sys.platform}-{platform.machine()}-{libc}"


def library_path() -> Path:
    """Where the shared library for this source, these flags and this platform lives."""
    key = hashlib.sha256()
    key.update(SOURCE.read_bytes())
    key.update(" ".join((COMPILER, *CFLAGS)).encode())
    key.update(_platform_tag().encode())
    return cache_dir() / "native" / f"scan-{key.hexdigest()[:16]}.so"


def _compile(compiler: str, target: Path) -> None:
    with atomic_path(target) as tmp:
        proc = subprocess.run(
            [compiler, *CFLAGS, "-o", str(tmp), str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise NativeUnavailable(f"{compiler} failed: {proc.stderr.strip()[-2000:]}")


def build() -> Path:
    """Compile ``_scan.c`` unless the cache already holds it; return the library's path."""
    target = library_path()
    if target.exists():
        return target
    compiler = shutil.which(COMPILER)
    if compiler is None:
        raise NativeUnavailable(f"{COMPILER} not found on PATH")
    with file_lock(target.with_name(target.name + ".lock")):
        if not target.exists():  # another process may have built it while we waited
            log.info("compiling %s -> %s", SOURCE.name, target)
            _compile(compiler, target)
    return target


@dataclass(frozen=True)
class Encoded:
    """Texts ready for C: one ``bytes`` per text (kept alive here), an array of pointers
    to their buffers, and their lengths. Nothing is concatenated or copied again: C reads
    each ``bytes`` object's own buffer, which CPython always ends with a 0x00."""

    parts: list[bytes]
    pointers: ctypes.Array  # const uint8_t *[len(parts)]
    lengths: array  # int64

    def __len__(self) -> int:
        return len(self.parts)

    def pointers_at(self, index: int) -> int:
        """The address of ``pointers[index]`` (C scans from there)."""
        return ctypes.addressof(self.pointers) + index * ctypes.sizeof(ctypes.c_char_p)


def encode(texts: Sequence[str]) -> Encoded:
    """Encode texts for the scanner.

    ASCII texts go as they are (C lowercases A–Z). Other texts are lowercased here with
    Python's full Unicode ``str.lower`` (so 'İ' and the Kelvin sign become ASCII letters)
    and sent as UTF-8; every byte ≥ 0x80 is a separator in C, as every non-[a-z0-9]
    character is for the regex. Lone surrogates pass through ``surrogatepass`` as
    separator bytes. A 0x00 inside a text stays: it is a separator, and texts are
    delimited by their lengths, not by the byte.
    """
    parts = [
        t.encode("ascii") if t.isascii() else t.lower().encode("utf-8", "surrogatepass")
        for t in texts
    ]
    pointers = (ctypes.c_char_p * len(parts))(*parts)  # the bytes' own buffers, no copy
    return Encoded(parts, pointers, array("q", map(len, parts)))


@dataclass(frozen=True)
class HashTable:
    """Open-addressing set of n-gram hashes (0 = empty) plus its bitmap prefilter."""

    slots: array  # uint64, 2**slot_bits
    slot_bits: int
    bitmap: array  # uint64 words, 2**bitmap_bits bits
    bitmap_bits: int
    mask: int  # hashes are masked to this (the hash_bits test knob)
    distinct: int


def hash_mask(hash_bits: int) -> int:
    """The mask applied to every n-gram hash; fewer bits force collisions (tests only)."""
    if not 1 <= hash_bits <= 64:
        raise ValueError(f"hash_bits must be in 1..64, got {hash_bits}")
    return (1 << hash_bits) - 1


def _zeros(typecode: str, count: int) -> array:
    return array(typecode, bytes(array(typecode).itemsize * count))


def _addr(values: array, index: int = 0) -> int:
    return values.buffer_info()[0] + index * values.itemsize


class ScanLibrary:
    """Typed wrappers around the three C entry points."""

    def __init__(self, path: Path) -> None:
        if sys.implementation.name != "cpython":
            # encode() relies on CPython ending every bytes buffer with a 0x00.
            raise NativeUnavailable(f"needs CPython, not {sys.implementation.name}")
        self.path = path
        lib = ctypes.CDLL(str(path))
        lib.tmax_init.argtypes = []
        lib.tmax_init.restype = None
        lib.tmax_ngram_hashes.argtypes = [_P, _P, _I64, _I32, _U64, _P, _I64]
        lib.tmax_ngram_hashes.restype = _I64
        lib.tmax_table_insert.argtypes = [_P, _I64, _P, _I32, _P, _I32]
        lib.tmax_table_insert.restype = _I64
        lib.tmax_scan.argtypes = [_P, _P, _I64, _I32, _U64, _P, _I32, _P, _I32]
        lib.tmax_scan.argtypes += [_P, _P, _I64, ctypes.POINTER(_I64)]
        lib.tmax_scan.restype = _I64
        lib.tmax_init()  # fills the byte table once, before any thread scans
        self._lib = lib

    def ngram_hashes(self, encoded: Encoded, n: int, mask: int) -> array:
        """Every n-gram hash of every text, in order (uint64)."""
        _check_n(n)
        # One per text fits the index side (each text is one n-gram); else call again
        # with the exact count, which C returns even when the buffer is too small.
        cap = len(encoded) + 1
        while True:
            out = _zeros("Q", cap)
            found = self._lib.tmax_ngram_hashes(
                encoded.pointers_at(0),
                _addr(encoded.lengths),
                len(encoded),
                n,
                mask,
                _addr(out),
                cap,
            )
            if found <= cap:
                return out[:found]
            cap = found

    def build_table(self, hashes: array, mask: int) -> HashTable:
        """A table holding ``hashes``: ≥ 2 slots per hash, and a bitmap of ~16 bits per
        hash (2^16..2^23 bits, so it stays in L2) that rejects most misses in one load."""
        count = max(len(hashes), 1)
        slot_bits = max(4, (2 * count - 1).bit_length())
        bitmap_bits = min(23, max(16, (16 * count - 1).bit_length()))
        slots = _zeros("Q", 1 << slot_bits)
        bitmap = _zeros("Q", (1 << bitmap_bits) // 64)
        distinct = self._lib.tmax_table_insert(
            _addr(hashes), len(hashes), _addr(slots), slot_bits, _addr(bitmap), bitmap_bits
        )
        return HashTable(slots, slot_bits, bitmap, bitmap_bits, mask, distinct)

    def scan(
        self, encoded: Encoded, start: int, stop: int, n: int, table: HashTable
    ) -> tuple[list[int], list[int]]:
        """Candidate hits in texts ``start..stop``: (text index, first word index) pairs,
        as two lists, in text then word order. Releases the GIL while C runs."""
        _check_n(n)
        texts_out: list[int] = []
        words_out: list[int] = []
        cap = _FIRST_CAP
        hit_text, hit_word = _zeros("i", cap), _zeros("i", cap)
        done = _I64(0)
        pos = start
        while pos < stop:
            found = self._lib.tmax_scan(
                encoded.pointers_at(pos),
                _addr(encoded.lengths, pos),
                stop - pos,
                n,
                table.mask,
                _addr(table.slots),
                table.slot_bits,
                _addr(table.bitmap),
                table.bitmap_bits,
                _addr(hit_text),
                _addr(hit_word),
                cap,
                ctypes.byref(done),
            )
            if found:
                texts_out.extend(t + pos for t in hit_text[:found])
                words_out.extend(hit_word[:found])
            if done.value == 0:  # one text has more candidates than fit: grow
                cap *= 4
                hit_text, hit_word = _zeros("i", cap), _zeros("i", cap)
            pos += done.value
        return texts_out, words_out


def _check_n(n: int) -> None:
    if not 1 <= n <= MAX_N:
        raise ValueError(f"n must be in 1..{MAX_N} for the native scanner, got {n}")


class NativeScanner:
    """The hashed form of an n-gram index, ready to scan texts for candidates."""

    def __init__(
        self, lib: ScanLibrary, n: int, grams: Sequence[tuple[str, ...]], hash_bits: int = 64
    ) -> None:
        _check_n(n)
        self.lib = lib
        self.n = n
        mask = hash_mask(hash_bits)
        # Hash the exact index n-grams with the scanner's own function: each joined
        # n-gram is a text of exactly n words, so it yields exactly one hash.
        hashes = lib.ngram_hashes(encode([" ".join(g) for g in grams]), n, mask)
        self.table = lib.build_table(hashes, mask)

    def candidates(self, texts: Sequence[str], workers: int = 1) -> tuple[list[int], list[int]]:
        """Candidate (text index, word index) pairs over all texts, in order, as two
        lists; ``workers`` threads scan contiguous chunks of similar byte size."""
        encoded = encode(texts)
        chunks = split_by_bytes(encoded, workers)
        if len(chunks) <= 1:
            return self.lib.scan(encoded, 0, len(encoded), self.n, self.table)
        with ThreadPoolExecutor(len(chunks)) as pool:
            parts = list(pool.map(lambda c: self.lib.scan(encoded, *c, self.n, self.table), chunks))
        text_ids = [t for part in parts for t in part[0]]
        word_ids = [w for part in parts for w in part[1]]
        return text_ids, word_ids


def split_by_bytes(encoded: Encoded, parts: int) -> list[tuple[int, int]]:
    """Split the texts into ≤ ``parts`` contiguous (start, stop) ranges of similar size."""
    count = len(encoded)
    if count == 0:
        return []
    parts = max(1, min(parts, count))
    ends = list(accumulate(encoded.lengths))  # ends[t] = bytes in texts 0..t
    total = ends[-1]
    bounds = [0]
    for k in range(1, parts):
        cut = bisect_left(ends, total * k // parts, 0, count) + 1
        bounds.append(min(max(cut, bounds[-1]), count))
    bounds.append(count)
    return [(a, b) for a, b in pairwise(bounds) if a < b]


_load_lock = threading.Lock()
_loaded: list[ScanLibrary | None] = []  # [] = not tried yet; [None] = unavailable (warned)


def enabled() -> bool:
    """False when ``TMAX_DECONTAM_NATIVE`` is 0/false/no/off (forces the Python path)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def load() -> ScanLibrary | None:
    """The scanner library, built on first use; ``None`` if disabled or unavailable
    (warned once per process)."""
    if not enabled():
        return None
    with _load_lock:
        if not _loaded:
            try:
                _loaded.append(ScanLibrary(build()))
            except (NativeUnavailable, OSError) as err:
                log.warning(
                    "native n-gram scanner unavailable (%s); using the pure-Python path "
                    "(identical results, about 10x slower)",
                    err,
                )
                _loaded.append(None)
        return _loaded[0]


def reset() -> None:
    """Forget the loaded library so the next :func:`load` builds/loads again (tests)."""
    with _load_lock:
        _loaded.clear()
