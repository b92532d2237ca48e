"""Task families of the scientific_computing domain."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    PNG_READER,
    bullets,
    heredoc,
    language_or_bash,
    manifest_line,
    manifest_test_file,
    png_bytes,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# isort: off
from tmax.generate.families.scientific_computing import (  # noqa: F401  (registers them, in this order)
    tone_analysis,
    logistic_rk4,
    fasta_records,
)
# isort: on

# --- star_field --------------------------------------------------------------------------

_STAR_ORACLE = r'''
def find_stars(width, height, pixels, threshold, min_size):
    """4-connected blobs of pixels with (R+G+B)//3 >= threshold, in raster order of their
    first pixel: [(x10, y10, size)] with centroids times ten, rounded half up."""
    bright = [sum(p) // 3 >= threshold for p in pixels]
    seen = [False] * len(bright)
    stars = []
    for start in range(len(bright)):
        if not bright[start] or seen[start]:
            continue
        seen[start] = True
        stack, members = [start], []
        while stack:
            i = stack.pop()
            members.append(i)
            x, y = i % width, i // width
            for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                j = ny * width + nx
                if 0 <= nx < width and 0 <= ny < height and bright[j] and not seen[j]:
                    seen[j] = True
                    stack.append(j)
        n = len(members)
        if n < min_size:
            continue
        sx = sum(i % width for i in members)
        sy = sum(i // width for i in members)
        stars.append(((20 * sx + n) // (2 * n), (20 * sy + n) // (2 * n), n))
    return stars


def star_report(width, height, pixels, threshold, min_size):
    stars = find_stars(width, height, pixels, threshold, min_size)
    lines = [f"count {len(stars)}"]
    lines += [f"{x // 10}.{x % 10} {y // 10}.{y % 10} {n}" for x, y, n in stars]
    return "\n".join(lines) + "\n"
'''

_STAR_PY = r"""
import struct
import sys
import zlib

THRESHOLD, MIN_SIZE = @THRESHOLD@, @MIN_SIZE@


def load(path):
    data = open(path, "rb").read()
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    pixels = []
    for y in range(height):
        row = raw[y * stride + 1:(y + 1) * stride]
        pixels += [tuple(row[x * 3:x * 3 + 3]) for x in range(width)]
    return width, height, pixels


if __name__ == "__main__":
    sys.stdout.write(star_report(*load(sys.argv[1]), THRESHOLD, MIN_SIZE))
"""

_STAR_BASH = r"""
#!/bin/bash
# Usage: stars.sh IMAGE.png (8-bit RGB, filter 0, one IDAT) -> star report on stdout
set -euo pipefail
f="$1"
w=$(od -An -tu4 --endian=big -j16 -N4 "$f" | tr -d ' ')
h=$(od -An -tu4 --endian=big -j20 -N4 "$f" | tr -d ' ')
len=$(od -An -tu4 --endian=big -j33 -N4 "$f" | tr -d ' ')
{ printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03'; tail -c +44 "$f" | head -c $((len - 2)); } \
  | { gzip -dc 2>/dev/null || true; } | od -An -v -tu1 -w$((w * 3 + 1)) \
  | awk -v W="$w" -v H="$h" -v T=@THRESHOLD@ -v MS=@MIN_SIZE@ '
{ y = NR - 1
  for (x = 0; x < W; x++) b[y * W + x] = (int(($(3*x+2) + $(3*x+3) + $(3*x+4)) / 3) >= T) }
END {
  count = 0
  for (s = 0; s < W * H; s++) {
    if (!b[s] || seen[s]) continue
    seen[s] = 1; top = 0; st[top++] = s; n = 0; sx = 0; sy = 0
    while (top > 0) {
      i = st[--top]; x = i % W; y = int(i / W); n++; sx += x; sy += y
      if (x + 1 < W && b[i + 1] && !seen[i + 1]) { seen[i + 1] = 1; st[top++] = i + 1 }
      if (x > 0 && b[i - 1] && !seen[i - 1]) { seen[i - 1] = 1; st[top++] = i - 1 }
      if (y + 1 < H && b[i + W] && !seen[i + W]) { seen[i + W] = 1; st[top++] = i + W }
      if (y > 0 && b[i - W] && !seen[i - W]) { seen[i - W] = 1; st[top++] = i - W } }
    if (n < MS) continue
    cx = int((20 * sx + n) / (2 * n)); cy = int((20 * sy + n) / (2 * n))
    out[++count] = int(cx / 10) "." cx % 10 " " int(cy / 10) "." cy % 10 " " n }
  print "count " count
  for (k = 1; k <= count; k++) print out[k] }'
"""

_STAR_TESTS = r"""

def write_png(path, width, height, pixels):
    raw = b"".join(b"\x00" + bytes(v for p in pixels[y * width:(y + 1) * width] for v in p)
                   for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n"
                  + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def random_sky(rng):
    width, height = rng.randint(8, 40), rng.randint(6, 30)
    pixels = [(rng.randint(0, 90),) * 3 for _ in range(width * height)]
    for _ in range(rng.randint(0, 12)):
        x, y = rng.randrange(width), rng.randrange(height)
        for dx, dy in rng.choice([[(0, 0)], [(0, 0), (1, 0)], [(0, 0), (1, 0), (0, 1), (1, 1)],
                                   [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]]):
            if 0 <= x + dx < width and 0 <= y + dy < height:
                v = rng.randint(90, 255)
                pixels[(y + dy) * width + x + dx] = (v, rng.randint(80, 255), v)
    return width, height, pixels


def report_of(path):
    return star_report(*read_png(path), CFG["threshold"], CFG["min_size"])


def test_reports():
    for img, out in CFG["pairs"]:
        want = report_of(img)
        got = read(out)
        assert got == want, f"{out}:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 2:
        want = "".join(f"{os.path.basename(img)} {report_of(img).split()[1]}\n"
                       for img, _ in CFG["pairs"])
        got = read("/app/out/counts.txt")
        assert got == want, f"counts.txt:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 3:
        counts = [(-int(report_of(img).split()[1]), os.path.basename(img))
                  for img, _ in CFG["pairs"]]
        want = min(counts)[1]
        assert read("/app/out/richest.txt").strip() == want, f"richest.txt should be {want}"
    if CFG["level"] >= 4:
        total = sum(int(report_of(img).split()[1]) for img, _ in CFG["pairs"])
        summary = json.loads(read("/app/out/summary.json"))
        want = {"images": len(CFG["pairs"]), "stars": total}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", [out for _, out in CFG["pairs"]]
                       + ["/app/out/counts.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(1977)
    folder = workdir()
    for i in range(CFG["fresh"]):
        width, height, pixels = random_sky(rng)
        path = os.path.join(folder, f"sky{i}.png")
        write_png(path, width, height, pixels)
        want = star_report(width, height, pixels, CFG["threshold"], CFG["min_size"])
        got = run_program([path]).stdout
        assert got == want, f"fresh {width}x{height} image:\nexpected\n{want}\ngot\n{got}"
"""


def _sky(rng, width: int, height: int, stars: int, hot: int) -> bytes:
    noise = [rng.randint(0, 70) for _ in range(97)]
    pixels = [
        (noise[(i * 31) % 97], noise[(i * 17) % 97], noise[(i * 7) % 97])
        for i in range(width * height)
    ]
    centres: list[tuple[int, int]] = []
    shapes = [
        [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)],
        [(0, 0), (1, 0), (0, 1), (1, 1)],
        [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)],
        [(0, 0), (1, 0), (2, 0), (1, 1)],
    ]
    for k in range(stars + hot):
        for _ in range(30):
            x, y = rng.randint(2, width - 3), rng.randint(2, height - 3)
            if all(abs(x - a) + abs(y - b) > 6 for a, b in centres):
                break
        centres.append((x, y))
        shape = [(0, 0)] if k >= stars else rng.choice(shapes)
        for dx, dy in shape:
            v = rng.randint(170, 255)
            pixels[(y + dy) * width + x + dx] = (v, rng.randint(150, 255), rng.randint(150, 255))
    return png_bytes(width, height, pixels)


@register
class StarField(Family):
    """Find stars (4-connected bright blobs) in telescope PNG frames and report centroids,
    counts and summaries; level adds frames, hot-pixel rejection and reports; code asks for
    a reusable detector (stdlib PNG decoding) run on fresh frames."""

    name = "scientific_computing.star_field"
    domain = "scientific_computing"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"image"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("stars_files", (r"`/app/out/NAME\.stars`: a first line `count N`, then one line "
                             r"`X Y SIZE` per star ordered by its first pixel",),
             (r"def test_reports\(",)),
        Rule("star_definition", (r"a star is a 4-connected group of pixels whose brightness "
                                 r"\(R\+G\+B\)//3 is at least \d+",),
             (r"bright = \[sum\(p\) // 3 >= threshold for p in pixels\]",
              r"\(\(x \+ 1, y\), \(x - 1, y\), \(x, y \+ 1\), \(x, y - 1\)\)")),
        Rule("centroid", (r"X, Y = centroid column and row .+? with one decimal, rounded half up",),
             (r"\(20 \* sx \+ n\) // \(2 \* n\)",)),
        Rule("hot_pixels", (r"single-pixel groups are hot pixels, not stars",),
             (r"if n < min_size:", r'"min_size": 2'), levels=frozenset({3, 4})),
        Rule("counts", (r"`/app/out/counts\.txt`: `FILENAME COUNT` per frame in name order",),
             (r'read\("/app/out/counts\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("richest", (r"`/app/out/richest\.txt`: the file name of the frame with the most",),
             (r'read\("/app/out/richest\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r'`/app/out/summary\.json`: `\{"images": I, "stars": S\}`',),
             (r'read\("/app/out/summary\.json"\)',), levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`: sha256sum lines for the \.stars files",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/stars",), (r"def test_program_fresh\(",),
             when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        threshold = rng.choice([120, 128, 140])
        min_size = 2 if level >= 3 else 1
        files: dict[str, str | bytes] = {}
        pairs = []
        for f in range(level):
            width, height = 24 + 8 * level, 18 + 6 * level
            stem = f"frame{f + 1:02d}"
            files[f"frames/{stem}.png"] = _sky(
                rng,
                width,
                height,
                rng.randint(2, 3 + level),
                rng.randint(1, 2) if level >= 3 else 0,
            )
            pairs.append([f"/app/frames/{stem}.png", f"/app/out/{stem}.stars"])
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/stars")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "pairs": pairs,
            "threshold": threshold,
            "min_size": min_size,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 4 * level + 4,
        }
        star_rule = (
            f"a star is a 4-connected group of pixels whose brightness (R+G+B)//3 is "
            f"at least {threshold}"
        )
        if min_size > 1:
            star_rule += "; single-pixel groups are hot pixels, not stars"
        asks = [
            "for each frame `/app/frames/NAME.png`, `/app/out/NAME.stars`: a first line "
            "`count N`, then one line `X Y SIZE` per star ordered by its first pixel in "
            "row-major scan (top row first, left to right): X, Y = centroid column and row "
            "(0-based pixel indices, mean over the star's pixels) with one decimal, rounded "
            "half up; SIZE = its pixel count"
        ]
        if level >= 2:
            asks.append("`/app/out/counts.txt`: `FILENAME COUNT` per frame in name order")
        if level >= 3:
            asks.append(
                "`/app/out/richest.txt`: the file name of the frame with the most "
                "stars (ties: first by name)"
            )
        if level >= 4:
            asks.append('`/app/out/summary.json`: `{"images": I, "stars": S}`')
            asks.append(
                "`/app/out/checksums.sha256`: sha256sum lines for the .stars files and counts.txt"
            )
        body = (
            "The guide camera saved frames as 8-bit RGB PNGs in /app/frames. "
            f"For this job {star_rule}. Please produce:\n\n" + bullets(asks)
        )
        if code:
            body += (
                f"\n\nI need the detector as a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: given one PNG path it prints that frame's .stars content. "
                "It will see other frames and sizes (same PNG flavour: 8-bit RGB, "
                "non-interlaced, one IDAT chunk, filter type 0 on every row). No "
                "third-party imaging libraries are installed."
            )
        source = {"python": _STAR_ORACLE + _STAR_PY, "bash": _STAR_BASH}[lang]
        source = source.replace("@THRESHOLD@", str(threshold))
        source = source.replace("@MIN_SIZE@", str(min_size))
        tool = prog if code else "/tmp/stars.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = ["mkdir -p /app/out", heredoc(tool, source)]
        for img, out in pairs:
            lines.append(f"{run} {img} > {out}")
        if level >= 2:
            lines.append(": > /app/out/counts.txt")
            for img, out in pairs:
                name = img.rsplit("/", 1)[1]
                lines.append(
                    f"echo \"{name} $(head -n 1 {out} | cut -d' ' -f2)\" >> /app/out/counts.txt"
                )
        if level >= 3:
            lines.append(
                "sort -k2,2nr -k1,1 /app/out/counts.txt | head -n 1 | cut -d' ' -f1 "
                "> /app/out/richest.txt"
            )
        if level >= 4:
            lines.append("stars=$(awk '{s += $2} END {print s + 0}' /app/out/counts.txt)")
            lines.append(
                f'printf \'{{"images": {len(pairs)}, "stars": %d}}\\n\' "$stars" '
                "> /app/out/summary.json"
            )
            lines.append(manifest_line([o.rsplit("/", 1)[1] for _, o in pairs] + ["counts.txt"]))
        extra = "\nimport struct\nimport zlib\n" + PNG_READER + _STAR_ORACLE + _STAR_TESTS
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", extra)},
            files=files,
        )
