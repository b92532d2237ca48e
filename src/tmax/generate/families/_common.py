"""Shared pieces for task families: deterministic fixtures and small text helpers.

Everything here is pure and deterministic (no clocks, no global randomness), so a
family that uses only these and its ``ctx.rng`` renders byte-identical tasks.
"""

from __future__ import annotations

import io
import json
import struct
import wave
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# --- fixtures ---------------------------------------------------------------------------


def png_bytes(width: int, height: int, pixels: Sequence[tuple[int, int, int]]) -> bytes:
    """An RGB PNG (8-bit, filter 0 on every row), deterministic for the same pixels."""
    if len(pixels) != width * height:
        raise ValueError(f"expected {width * height} pixels, got {len(pixels)}")
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        for r, g, b in pixels[y * width : (y + 1) * width]:
            raw += bytes((r, g, b))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + chunk(b"IEND", b"")
    )


PNG_READER = '''
import struct
import zlib


def read_png(path):
    """Decode an 8-bit RGB PNG (any of the five row filters) to (w, h, pixels)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\\x89PNG\\r\\n\\x1a\\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2), "expected 8-bit RGB"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * 3, [], bytes(width * 3)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b = prev[i]
            c = prev[i - 3] if i >= 3 else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    pixels = [tuple(row[x * 3 : x * 3 + 3]) for row in rows for x in range(width)]
    return width, height, pixels
'''
"""Source of a stdlib-only PNG decoder, for test files (the verifier has no Pillow)."""


def wav_bytes(samples: Sequence[int], rate: int = 8000) -> bytes:
    """A 16-bit mono PCM WAV file, deterministic for the same samples."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", max(-32768, min(32767, s))) for s in samples))
    return buffer.getvalue()


# --- text --------------------------------------------------------------------------------


def bullets(items: Iterable[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def numbered(items: Iterable[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = [",".join(header)]
    lines += [",".join(str(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


# --- code in the task's language ---------------------------------------------------------

PROGRAM_FILES = {"python": "main.py", "bash": "main.sh", "c": "main.c"}
LANGUAGE_NAMES = {"python": "Python 3", "bash": "Bash", "c": "C (C11, built with gcc)"}


def program_path(language: str, stem: str = "/app/tool") -> str:
    """Where the agent's program in ``language`` must live (e.g. /app/tool.py)."""
    return stem + {"python": ".py", "bash": ".sh", "c": ".c"}[language]


def run_command(language: str, source: str) -> str:
    """A shell command that builds (for C) and runs ``source``; arguments follow it.

    Absolute paths on purpose: the verifier puts the toolbox first on PATH, and an
    agent's program must run under the image's interpreter (with its packages)."""
    if language == "python":
        return f"/usr/bin/python3 {source}"
    if language == "bash":
        return f"/bin/bash {source}"
    binary = source.removesuffix(".c")
    return f"/usr/bin/gcc -O2 -std=c11 -o {binary} {source} -lm && {binary}"


def settings_lines(settings: Mapping[str, Any]) -> str:
    """The tests' settings: ``CFG_JSON`` (the line the instruction–test audit reads a
    task's settings from, :func:`tmax.generate.audit.task_settings`) and ``CFG``, the
    same as a dict. The tests must have imported ``json`` before these lines."""
    return f"CFG_JSON = {json.dumps(settings, sort_keys=True)!r}\nCFG = json.loads(CFG_JSON)\n"
