"""Task families of the data_science domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    PNG_READER,
    code_note,
    invoke,
    minimal_test_file,
    numbered,
    png_bytes,
    program_path,
    program_setup,
)
from tmax.generate.families.data_science import classifier, eval_metrics  # noqa: F401  (registers them first, in order)
from tmax.generate.family import Draft, Family, RenderContext, register

# --- family 3: statistics and blob counting on PNG slides -------------------------------

_SLIDE_GEN = """
def make_slide(rng, width, height, blobs):
    seed = rng.randrange(1000)
    pixels = [((x * 37 + y * 91 + (x * y) % 13 + seed) % 57,
               (x * 11 + y * 53 + seed) % 49,
               (x * 29 + y * 17 + (x + y) % 7 + seed) % 61)
              for y in range(height) for x in range(width)]
    for _ in range(blobs):
        r = rng.randint(1, 4)
        cx, cy = rng.randint(r, width - r - 1), rng.randint(r, height - r - 1)
        color = (rng.randint(150, 255), rng.randint(150, 255), rng.randint(150, 255))
        for y in range(cy - r, cy + r + 1):
            for x in range(cx - r, cx + r + 1):
                if (x - cx) ** 2 + (y - cy) ** 2 <= r * r + 1:
                    pixels[y * width + x] = color
    return pixels
"""

_slide_ns: dict = {}
exec(_SLIDE_GEN, _slide_ns)

_IMG_PY = """import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * 3
    prev, rows = bytearray(stride), []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - 3] if i >= 3 else 0
            up, corner = prev[i], prev[i - 3] if i >= 3 else 0
            if f == 1:
                line[i] = (line[i] + left) & 255
            elif f == 2:
                line[i] = (line[i] + up) & 255
            elif f == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return width, height, [[tuple(r[x * 3:x * 3 + 3]) for x in range(width)] for r in rows]


def main():
    path, mode, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    w, h, px = decode(path)
    bright = [[sum(px[y][x]) >= limit for x in range(w)] for y in range(h)]
    if mode == "stats":
        count = sum(map(sum, bright))
        print(f"width {w}")
        print(f"height {h}")
        print(f"bright {count}")
        sums = [sum(px[y][x][c] for y in range(h) for x in range(w)) for c in range(3)]
        print("mean_rgb " + " ".join(str(s // (w * h)) for s in sums))
        pts = [(x, y) for y in range(h) for x in range(w) if bright[y][x]]
        if pts:
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            print(f"bbox {min(xs)} {min(ys)} {max(xs)} {max(ys)}")
        else:
            print("bbox none")
        return
    print("blob,area,x,y")
    seen, blob = set(), 0
    for y in range(h):
        for x in range(w):
            if bright[y][x] and (x, y) not in seen:
                blob += 1
                stack, area = [(x, y)], 0
                seen.add((x, y))
                while stack:
                    cx, cy = stack.pop()
                    area += 1
                    for nx, ny in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
                        if 0 <= nx < w and 0 <= ny < h and bright[ny][nx] and (nx, ny) not in seen:
                            seen.add((nx, ny))
                            stack.append((nx, ny))
                print(f"{blob},{area},{x},{y}")


main()
"""

_IMG_SH = r"""#!/bin/bash
# Usage: imgstat.sh <png> stats|blobs <limit>. Handles single-IDAT, filter-0 RGB PNGs.
set -euo pipefail
png=$1
mode=$2
limit=$3
u32() { od -An -tu1 -j "$1" -N4 "$png" | awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }'; }
w=$(u32 16)
h=$(u32 20)
len=$(u32 33)
{
  printf '\037\213\010\000\000\000\000\000\000\003'
  tail -c +42 "$png" | head -c "$len" | tail -c +3
} | { gzip -dc 2>/dev/null || true; } | od -An -v -tu1 \
  | awk -v w="$w" -v h="$h" -v limit="$limit" -v mode="$mode" '
{
  for (i = 1; i <= NF; i++) {
    col = pos % (3 * w + 1); row = int(pos / (3 * w + 1)); pos++
    if (col == 0) continue
    x = int((col - 1) / 3); c = (col - 1) % 3
    sum[c] += $i; acc[x, row] += $i
  }
}
END {
  n = 0
  for (y = 0; y < h; y++) for (x = 0; x < w; x++) if (acc[x, y] >= limit) {
    b[x, y] = 1; n++
    if (n == 1 || x < x0) x0 = (n == 1 || x < x0) ? x : x0
    if (n == 1) { y0 = y; x1 = x; y1 = y; x0 = x }
    if (x > x1) x1 = x
    if (x < x0) x0 = x
    y1 = y
  }
  if (mode == "stats") {
    print "width " w; print "height " h; print "bright " n
    area = w * h
    printf "mean_rgb %d %d %d\n", int(sum[0] / area), int(sum[1] / area), int(sum[2] / area)
    if (n) print "bbox " x0 " " y0 " " x1 " " y1; else print "bbox none"
    exit
  }
  print "blob,area,x,y"
  id = 0
  for (y = 0; y < h; y++) for (x = 0; x < w; x++) if (((x, y) in b) && !((x, y) in seen)) {
    id++; top = 1; sx[1] = x; sy[1] = y; seen[x, y] = 1; area = 0
    while (top > 0) {
      cx = sx[top]; cy = sy[top]; top--; area++
      for (d = 0; d < 4; d++) {
        nx = cx + (d == 0) - (d == 1); ny = cy + (d == 2) - (d == 3)
        if (((nx, ny) in b) && !((nx, ny) in seen)) {
          seen[nx, ny] = 1; top++; sx[top] = nx; sy[top] = ny
        }
      }
    }
    print id "," area "," x "," y
  }
}'
"""

_IMG_TESTS = (
    PNG_READER
    + """

def write_png(path, width, height, pixels):
    import struct
    import zlib

    raw = b"".join(b"\\x00" + bytes(v for p in pixels[y * width:(y + 1) * width] for v in p)
                   for y in range(height))

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as handle:
        handle.write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", head)
                     + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


HERE = os.path.dirname(__file__)


def expect(path, mode, limit, level):
    w, h, flat = read_png(path)
    px = [flat[y * w:(y + 1) * w] for y in range(h)]
    bright = {(x, y) for y in range(h) for x in range(w) if sum(px[y][x]) >= limit}
    if mode == "stats":
        out = [f"width {w}", f"height {h}", f"bright {len(bright)}"]
        if level >= 2 or CFG["full"]:
            sums = [sum(p[c] for p in flat) for c in range(3)]
            out.append("mean_rgb " + " ".join(str(s // (w * h)) for s in sums))
            if bright:
                xs, ys = [p[0] for p in bright], [p[1] for p in bright]
                out.append(f"bbox {min(xs)} {min(ys)} {max(xs)} {max(ys)}")
            else:
                out.append("bbox none")
        return "\\n".join(out) + "\\n"
    out, seen = ["blob,area,x,y"], set()
    for y in range(h):
        for x in range(w):
            if (x, y) in bright and (x, y) not in seen:
                seen.add((x, y))
                todo, area = [(x, y)], 0
                while todo:
                    cx, cy = todo.pop()
                    area += 1
                    for n in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
                        if n in bright and n not in seen:
                            seen.add(n)
                            todo.append(n)
                out.append(f"{len(out)},{area},{x},{y}")
    return "\\n".join(out) + "\\n"


def check(path, want):
    got = read(path)
    assert got == want, f"{path} differs.\\nexpected:\\n{want}\\ngot:\\n{got}"


def test_outputs():
    p = CFG
    if p["level"] < 4:
        src = os.path.join(HERE, "slide.png")
        check("/app/out/stats.txt", expect(src, "stats", p["limit"], p["level"]))
        if CFG["level"] >= 3:
            check("/app/out/blobs.csv", expect(src, "blobs", p["limit"], p["level"]))
        return
    rows, busiest = [], None
    for stem in p["stems"]:
        blobs = expect(os.path.join(HERE, stem + ".png"), "blobs", p["limit"], 4)
        check(f"/app/out/{stem}_blobs.csv", blobs)
        areas = [int(line.split(",")[1]) for line in blobs.splitlines()[1:]]
        stats = expect(os.path.join(HERE, stem + ".png"), "stats", p["limit"], 4)
        bright = int(stats.splitlines()[2].split()[1])
        rows.append((stem, bright, len(areas), max(areas, default=0)))
        if busiest is None or len(areas) > busiest[1]:
            busiest = (stem, len(areas))
    want = "image,bright,blobs,largest\\n" + "".join("%s,%d,%d,%d\\n" % r for r in rows)
    check("/app/out/summary.csv", want)
    check("/app/out/busiest.txt", busiest[0] + "\\n")


def test_program_on_fresh_images():
    if not CFG["code"]:
        return
    rng = random.Random(555)
    work = tempfile.mkdtemp()
    for case in range(3):
        w, h = rng.randint(12, 40), rng.randint(12, 40)
        path = os.path.join(work, f"img{case}.png")
        write_png(path, w, h, make_slide(rng, w, h, rng.randint(0, 6)))
        modes = ["stats"] + (["blobs"] if CFG["level"] >= 3 else [])
        for mode in modes:
            done = run_program([path, mode, CFG["limit"]])
            assert done.returncode == 0, f"{mode} failed: {done.stderr[-1500:]}"
            want = expect(path, mode, CFG["limit"], max(CFG["level"], 2))
            assert done.stdout == want, f"{mode} on {w}x{h}:\\n{want}\\ngot:\\n{done.stdout}"
"""
)


@register
class SlideStats(Family):
    """Measure PNG microscope slides: size, bright-pixel count, mean colour, bounding box,
    4-connected blobs, and a multi-image summary at level 4; code asks for a reusable
    image-statistics program run on freshly drawn PNGs."""

    name = "data_science.slide_stats"
    domain = "data_science"
    verifier_kinds = frozenset({"exact_text"})
    fixture_kinds = frozenset({"image"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("bright_pixels", (r"A pixel is \*bright\* when R\+G\+B >= (?P<limit>\d+)",),
             (r'"limit": {limit}', r"sum\(px\[y\]\[x\]\) >= limit")),
        Rule("stats_txt", (r"`/app/out/stats\.txt` with these lines in this order",),
             (r'check\("/app/out/stats\.txt"',), levels=frozenset({1, 2, 3})),
        Rule("mean_rgb_bbox",
             (r"`mean_rgb <R> <G> <B>` \(per-channel mean", r"`bbox <x0> <y0> <x1> <y1>`"),
             (r'"full": true', r'out\.append\("mean_rgb "', r'out\.append\(f"bbox '),
             when={"full": True}),
        Rule("blobs_4_connected", (r"blobs are groups of bright pixels connected through their 4",),
             (r"for n in \(\(cx \+ 1, cy\), \(cx - 1, cy\), \(cx, cy \+ 1\), \(cx, cy - 1\)\)",),
             levels=frozenset({3, 4})),
        Rule("blobs_csv", (r"`/app/out/blobs\.csv`: header `blob,area,x,y`",),
             (r'check\("/app/out/blobs\.csv"',), levels=frozenset({3})),
        Rule("blobs_per_image", (r"`/app/out/<name>_blobs\.csv` for every image",),
             (r'check\(f"/app/out/\{{stem\}}_blobs\.csv"',), levels=frozenset({4})),
        Rule("summary_csv", (r"`/app/out/summary\.csv`: header `image,bright,blobs,largest`",),
             (r'check\("/app/out/summary\.csv"',), levels=frozenset({4})),
        Rule("busiest_image",
             (r"`/app/out/busiest\.txt`: the name of the image with the most blobs",),
             (r'check\("/app/out/busiest\.txt"',), levels=frozenset({4})),
        Rule("newline", (r"Text files end with a newline",), (r"assert got == want",)),
        Rule("program", (r"reusable .+? program at `/app/imgstat",),
             (r"def test_program_on_fresh_images\(",), when={"code": True}),
        Rule("program_blobs", (r"`<png> blobs <limit>` prints the blobs table",),
             (r'\["blobs"\] if CFG\["level"\] >= 3',), levels=frozenset({3, 4}),
             when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        limit = rng.choice([400, 420, 450, 480])
        size = {1: (24, 32), 2: (28, 40), 3: (32, 48), 4: (24, 36)}[level]
        stems = (
            ["slide"] if level < 4 else sorted(rng.sample(["s01", "s02", "s03", "s04", "s05"], 3))
        )
        images = {}
        for stem in stems:
            w, h = rng.randint(*size), rng.randint(*size)
            pixels = _slide_ns["make_slide"](rng, w, h, rng.randint(2, 4 + level))
            images[stem] = png_bytes(w, h, pixels)
        code = ctx.needs_code
        bright = f"A pixel is *bright* when R+G+B >= {limit}"
        if level >= 3:
            bright += (
                "; blobs are groups of bright pixels connected through their 4 direct "
                "neighbours (not diagonals)"
            )
        bright += "."
        stats_fmt = ["`width <W>`", "`height <H>`", "`bright <count of bright pixels>`"]
        full = code or level in (2, 3)  # the mean_rgb and bbox lines are asked for
        if full:
            stats_fmt += [
                "`mean_rgb <R> <G> <B>` (per-channel mean over all pixels, rounded down)",
                "`bbox <x0> <y0> <x1> <y1>` (inclusive bounding box of the "
                "bright pixels, x to the right and y down from 0,0; `bbox none` if "
                "there are none)",
            ]
        blobs_fmt = (
            "header `blob,area,x,y`, one row per blob numbered from 1 in the order "
            "their first pixel appears scanning rows top to bottom, left to right; "
            "area in pixels and x,y of that first pixel"
        )
        if level < 4:
            deliver = [
                "`/app/out/stats.txt` with these lines in this order: " + ", ".join(stats_fmt)
            ]
            if level >= 3:
                deliver.append("`/app/out/blobs.csv`: " + blobs_fmt)
            text = "`/app/images/slide.png` is a microscope slide (8-bit RGB PNG). "
        else:
            deliver = [
                "`/app/out/<name>_blobs.csv` for every image `<name>.png`: " + blobs_fmt,
                "`/app/out/summary.csv`: header `image,bright,blobs,largest`, one row per image "
                "(name without .png, sorted) with its bright-pixel count, blob count and the "
                "area of its largest blob (0 if none)",
                "`/app/out/busiest.txt`: the name of the image with the most blobs (first in "
                "name order on ties)",
            ]
            text = (
                "`/app/images/` holds microscope slides as 8-bit RGB PNGs ("
                + ", ".join(f"`{s}.png`" for s in stems)
                + "). "
            )
        text += bright + " I need:\n\n" + numbered(deliver) + "\n\nText files end with a newline."
        text += " Only the Python standard library and numpy are installed (no imaging tools)."
        program = program_path(ctx.language, "/app/imgstat")
        if code:
            usage = (
                "`<png> stats <limit>` prints the five stats lines (width, height, bright, "
                "mean_rgb, bbox) using R+G+B >= limit as bright"
            )
            if level >= 4:
                usage += ", one per line: " + ", ".join(stats_fmt)
            if level >= 3:
                usage += "; `<png> blobs <limit>` prints the blobs table"
            text += "\n\n" + code_note(ctx, program, usage + ".")
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/imgstat.sh"
        body = _IMG_PY if lang == "python" else _IMG_SH
        lines = ["file /app/images/*.png", "mkdir -p /app/out"]
        lines += program_setup(lang, source, body)
        run = invoke(lang, source)
        if level < 4:
            keep = "" if full else " | head -n 3"
            lines.append(f"{run} /app/images/slide.png stats {limit}{keep} > /app/out/stats.txt")
            if level >= 3:
                lines += [
                    f"{run} /app/images/slide.png blobs {limit} > /app/out/blobs.csv",
                    "cat /app/out/stats.txt",
                    "tail -n +2 /app/out/blobs.csv | wc -l",
                ]
        else:
            lines += ["echo image,bright,blobs,largest > /app/out/summary.csv"]
            for stem in stems:
                lines += [
                    f"{run} /app/images/{stem}.png blobs {limit} > /app/out/{stem}_blobs.csv",
                    f'b=$({run} /app/images/{stem}.png stats {limit} | awk \'$1 == "bright"'
                    " { print $2 }')",
                    f'awk -F, -v name={stem} -v b="$b" \'NR > 1 {{ n++; if ($2 > m) m = $2 }}'
                    ' END { print name "," b "," n + 0 "," m + 0 }\''
                    f" /app/out/{stem}_blobs.csv >> /app/out/summary.csv",
                ]
            lines += [
                "tail -n +2 /app/out/summary.csv | sort -t, -k3,3nr -k1,1 | head -n 1"
                " | cut -d, -f1 > /app/out/busiest.txt",
                "cat /app/out/summary.csv /app/out/busiest.txt",
            ]
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "limit": limit,
            "stems": stems,
            "full": full,
        }
        tests = {"test_task.py": minimal_test_file(params, _SLIDE_GEN + _IMG_TESTS)}
        tests.update({f"{s}.png": data for s, data in images.items()})
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files={f"images/{s}.png": data for s, data in images.items()},
        )


# --- family 4: leakage-free feature preparation ------------------------------------------

_PREP_GEN = """
SPANS = {"age": (18, 80), "income": (12, 250), "tenure": (0, 40), "visits": (0, 500)}


def make_table(rng, level, n_rows, numeric, cities, holdout=False):
    header = ["id"] + numeric + ["city"] + ([] if holdout else ["label"])
    lines = [",".join(header)]
    for i in range(n_rows):
        cells = ["%s%04d" % ("h" if holdout else "r", i + 1)]
        for col in numeric:
            lo, hi = SPANS[col]
            value = rng.randint(lo, hi) + (rng.randint(0, hi // 4) if holdout else 0)
            cells.append("" if i > 0 and rng.random() < 0.12 else str(value))
        cells.append(rng.choice(cities))
        if not holdout:
            cells.append("" if level >= 3 and i > 0 and rng.random() < 0.1 else rng.choice("01"))
        lines.append(",".join(cells))
    return "\\n".join(lines) + "\\n"
"""

_PREP_CORE = """
def parse(text):
    lines = [line.split(",") for line in text.splitlines() if line.strip()]
    return lines[0], [dict(zip(lines[0], cells)) for cells in lines[1:]]


def fit(text, level):
    header, rows = parse(text)
    if level >= 3:
        rows = [r for r in rows if r["label"] != ""]
    numeric = [c for c in header if c not in ("id", "city", "label")]
    stats = {}
    for col in numeric:
        xs = [float(r[col]) for r in rows if r[col] != ""]
        mean = sum(xs) / len(xs)
        std = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
        s, n = sorted(xs), len(xs)
        median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        stats[col] = (len(rows) - len(xs), median, mean, std)
    cities = sorted({r["city"] for r in rows}) if level >= 3 else []
    return numeric, stats, cities, rows


def features(numeric, stats, cities, rows, with_label):
    head = ["id"] + numeric + ["city=" + c for c in cities] + (["label"] if with_label else [])
    out = [",".join(head)]
    for r in rows:
        cells = [r["id"]]
        for col in numeric:
            _, median, mean, std = stats[col]
            x = float(r[col]) if r[col] != "" else median
            cells.append("%.4f" % ((x - mean) / std if std else 0.0))
        cells += ["1" if r["city"] == c else "0" for c in cities]
        out.append(",".join(cells + ([r["label"]] if with_label else [])))
    return "\\n".join(out) + "\\n"


def prep(report, train, level, other=None):
    numeric, stats, cities, rows = fit(train, level)
    if report == "summary":
        out = ["column,missing,median,mean,std"]
        for col in numeric:
            missing, median, mean, std = stats[col]
            out.append("%s,%d,%.4f,%.4f,%.4f" % (col, missing, median, mean, std))
        return "\\n".join(out) + "\\n"
    if report == "features":
        return features(numeric, stats, cities, rows, True)
    _, others = parse(other)
    if report == "apply":
        return features(numeric, stats, cities, others, False)
    if report == "drift":
        out = ["column,train_mean,holdout_mean,shift"]
        for col in numeric:
            _, _, mean, std = stats[col]
            xs = [float(r[col]) for r in others if r[col] != ""]
            held = sum(xs) / len(xs)
            shift = (held - mean) / std if std else 0.0
            out.append("%s,%.4f,%.4f,%.4f" % (col, mean, held, shift))
        return "\\n".join(out) + "\\n"
    raise ValueError(report)
"""

_PREP_PY = (
    "import sys\n\nLEVEL = __LEVEL__\n"
    + _PREP_CORE
    + """

def main():
    report, train_path = sys.argv[1], sys.argv[2]
    with open(train_path) as handle:
        train = handle.read()
    other = None
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as handle:
            other = handle.read()
    sys.stdout.write(prep(report, train, LEVEL, other))


main()
"""
)

_PREP_SH = r"""#!/bin/bash
# prep.sh <summary|features|apply|drift> <train.csv> [<other.csv>]
export LC_ALL=C
level=__LEVEL__
exec awk -F, -v report="$1" -v level="$level" '
function f4(x) { return sprintf("%.4f", x) }
function z(x, j) { return sd[j] ? f4((x - mu[j]) / sd[j]) : f4(0) }
NR == FNR && FNR == 1 {
  for (i = 1; i <= NF; i++) {
    if ($i == "id") ic = i; else if ($i == "city") cc = i; else if ($i == "label") lc = i
    else { nc++; num[nc] = i; name[nc] = $i }
  }
  next
}
NR == FNR {
  if (NF < 2 || (level >= 3 && $lc == "")) next
  n++; id[n] = $ic; lab[n] = $lc; city[n] = $cc; seen[$cc] = 1
  for (j = 1; j <= nc; j++) {
    v[n, j] = $num[j]
    if ($num[j] != "") { k[j]++; sum[j] += $num[j]; xs[j, k[j]] = $num[j] + 0 }
  }
  next
}
FNR == 1 { for (i = 1; i <= NF; i++) oc[$i] = i; next }
NF >= 2 {
  m++; oid[m] = $oc["id"]; ocity[m] = $oc["city"]
  for (j = 1; j <= nc; j++) {
    ov[m, j] = $oc[name[j]]
    if (ov[m, j] != "") { ok[j]++; osum[j] += ov[m, j] }
  }
}
END {
  for (j = 1; j <= nc; j++) {
    mu[j] = sum[j] / k[j]; ss = 0
    for (i = 1; i <= k[j]; i++) { d = xs[j, i] - mu[j]; ss += d * d }
    sd[j] = sqrt(ss / k[j])
    for (i = 2; i <= k[j]; i++) {
      x = xs[j, i]; p = i - 1
      while (p >= 1 && xs[j, p] > x) { xs[j, p + 1] = xs[j, p]; p-- }
      xs[j, p + 1] = x
    }
    h = int(k[j] / 2)
    med[j] = (k[j] % 2) ? xs[j, h + 1] : (xs[j, h] + xs[j, h + 1]) / 2
  }
  nct = 0
  if (level >= 3) {
    for (c in seen) {
      nct++; p = nct
      while (p > 1 && cl[p - 1] > c) { cl[p] = cl[p - 1]; p-- }
      cl[p] = c
    }
  }
  if (report == "summary") {
    print "column,missing,median,mean,std"
    for (j = 1; j <= nc; j++) print name[j] "," n - k[j] "," f4(med[j]) "," f4(mu[j]) "," f4(sd[j])
  } else if (report == "features" || report == "apply") {
    head = "id"
    for (j = 1; j <= nc; j++) head = head "," name[j]
    for (c = 1; c <= nct; c++) head = head ",city=" cl[c]
    if (report == "features") { print head ",label"; rows = n } else { print head; rows = m }
    for (r = 1; r <= rows; r++) {
      line = (report == "features") ? id[r] : oid[r]
      for (j = 1; j <= nc; j++) {
        x = (report == "features") ? v[r, j] : ov[r, j]
        line = line "," z(x == "" ? med[j] : x, j)
      }
      here = (report == "features") ? city[r] : ocity[r]
      for (c = 1; c <= nct; c++) line = line "," (here == cl[c] ? 1 : 0)
      print (report == "features") ? line "," lab[r] : line
    }
  } else if (report == "drift") {
    print "column,train_mean,holdout_mean,shift"
    for (j = 1; j <= nc; j++) {
      held = osum[j] / ok[j]
      print name[j] "," f4(mu[j]) "," f4(held) "," (sd[j] ? f4((held - mu[j]) / sd[j]) : f4(0))
    }
  } else { print "unknown report " report > "/dev/stderr"; exit 1 }
}' "$2" ${3:+"$3"}
"""

_PREP_TESTS = """
import re

HERE = os.path.dirname(__file__)
TOL = CFG["tolerance"]


def compare(got, want, what):
    got_rows = [line.split(",") for line in got.splitlines()]
    want_rows = [line.split(",") for line in want.splitlines()]
    assert got.endswith("\\n"), f"{what}: must end with a newline"
    assert len(got_rows) == len(want_rows), f"{what}: {len(got_rows)} lines, want {len(want_rows)}"
    assert got_rows[0] == want_rows[0], f"{what}: header {got_rows[0]}, want {want_rows[0]}"
    for i, (g, w) in enumerate(zip(got_rows, want_rows)):
        assert len(g) == len(w), f"{what} line {i + 1}: {len(g)} cells, want {len(w)}"
        for a, b in zip(g, w):
            if "." not in b:
                assert a == b, f"{what} line {i + 1}: {a!r}, want {b!r}"
                continue
            if CFG["exact"]:
                assert re.fullmatch(r"-?[0-9]+[.][0-9]{4}", a), f"{what} line {i + 1}: {a!r}"
            try:
                value = float(a)
            except ValueError:
                raise AssertionError(f"{what} line {i + 1}: {a!r} is not a number")
            assert abs(value - float(b)) <= TOL, f"{what} line {i + 1}: {a}, want {b}"


def pristine(name):
    return read(os.path.join(HERE, name))


def test_outputs():
    train = pristine("train.csv")
    holdout = pristine("holdout.csv") if CFG["level"] >= 4 else None
    for report, path in CFG["outputs"].items():
        compare(read(path), prep(report, train, CFG["level"], holdout), path)


def test_program_on_fresh_tables():
    if not CFG["code"]:
        return
    level = CFG["level"]
    for seed in range(CFG["cases"]):
        rng = random.Random(500 + seed)
        numeric = rng.sample(sorted(SPANS), 2 + level // 2)
        cities = rng.sample(["oslo", "rome", "kyiv", "lima", "pune", "baku"], rng.randint(2, 4))
        folder = tempfile.mkdtemp()
        train = make_table(rng, level, rng.randint(5, 60), numeric, cities)
        holdout = make_table(rng, level, rng.randint(3, 20), numeric, cities + ["zug"], True)
        for name, text in (("train.csv", train), ("holdout.csv", holdout)):
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        for report in CFG["outputs"]:
            args = [report, os.path.join(folder, "train.csv")]
            if report in ("apply", "drift"):
                args.append(os.path.join(folder, "holdout.csv"))
            done = run_program(args)
            assert done.returncode == 0, f"{report}: exit {done.returncode} {done.stderr[-800:]}"
            compare(done.stdout, prep(report, train, level, holdout), f"seed {seed} {report}")
"""


@register
class FeaturePrep(Family):
    """Prepare model features from a raw customer table without leakage: column summary,
    median imputation + z-scaling, dropped unlabeled rows and one-hot cities (level 3),
    then applying the train parameters to a holdout and a drift report (level 4)."""

    name = "data_science.feature_prep"
    domain = "data_science"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("summary_csv",
             (r"`(?P<path>/app/\w+/summary\.csv)`: header `column,missing,median,mean,std`",),
             (r"def test_outputs\(", r'"summary": "{path}"')),
        Rule("train_features",
             (r"`(?P<path>/app/\w+/train_\w+\.csv)`: `id`, then every numeric column",),
             (r'"features": "{path}"',), levels=frozenset({2, 3, 4})),
        Rule("median_impute", (r"missing cells replaced by that column's median",),
             (r'"features": "/app/\w+/train_\w+\.csv"',
              r'x = float\(r\[col\]\) if r\[col\] != "" else median'), levels=frozenset({2, 3, 4})),
        Rule("z_score", (r"standardised as \(x − mean\) / std",),
             (r'"features": "/app/\w+/train_\w+\.csv"',
              r"\(x - mean\) / std if std else 0\.0"),
             levels=frozenset({2, 3, 4})),
        Rule("one_hot_city", (r"one 0/1 column `city=<name>` per city",),
             (r'"features": "/app/\w+/train_\w+\.csv"', r'"1" if r\["city"\] == c else "0"'),
             levels=frozenset({3, 4})),
        Rule("drop_unlabeled", (r"Rows with an empty `label` are unusable: drop them",),
             (r'rows = \[r for r in rows if r\["label"\] != ""\]',), levels=frozenset({3, 4})),
        Rule("holdout_features",
             (r"`(?P<path>/app/\w+/holdout_\w+\.csv)`: the same transformation",),
             (r'"apply": "{path}"',), levels=frozenset({4})),
        Rule("unseen_city_zeros", (r"a city never seen in training gets all zeros",),
             (r'"apply": "/app/\w+/holdout_\w+\.csv"', r'"1" if r\["city"\] == c else "0"'),
             levels=frozenset({4})),
        Rule("drift_csv",
             (r"`(?P<path>/app/\w+/drift\.csv)`: header `column,train_mean,holdout_mean,shift`",),
             (r'"drift": "{path}"',), levels=frozenset({4})),
        Rule("four_decimals", (r"written with exactly 4 decimals",), (r'if CFG\["exact"\]:',),
             when={"exact": True}),
        Rule("tolerance", (r"Values are checked to within 0\.01",), (r'"tolerance": 0\.01',),
             when={"exact": False}),
        Rule("newline", (r"end with a newline",), (r'assert got\.endswith\("\\n"\)',)),
        Rule("program", (r"reusable .+? program at `/app/prep",),
             (r"def test_program_on_fresh_tables\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "impute missing values with per-column medians": "median_impute",
        "standardize features using z-score normalization": "z_score",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        numeric = rng.sample(sorted(_prep_ns["SPANS"]), 2 + level // 2)
        cities = rng.sample(["oslo", "rome", "kyiv", "lima", "pune", "baku", "riga"], 3)
        train = _prep_ns["make_table"](rng, level, 20 + 25 * level, numeric, cities)
        train_path = "/app/data/" + ctx.pick(["train.csv", "training.csv", "customers_train.csv"])
        holdout_path = "/app/data/" + ctx.pick(["holdout.csv", "new_customers.csv"])
        out = ctx.pick(["/app/out", "/app/features", "/app/prepared"])
        suffix = ctx.pick(["features", "prepared", "scaled"])
        files = {train_path.removeprefix("/app/"): train}
        tests_files = {"train.csv": train}
        if level >= 4:
            holdout = _prep_ns["make_table"](rng, level, 40, numeric, [*cities, "zug"], True)
            files[holdout_path.removeprefix("/app/")] = holdout
            tests_files["holdout.csv"] = holdout
        outputs = {"summary": f"{out}/summary.csv"}
        if level >= 2:
            outputs["features"] = f"{out}/train_{suffix}.csv"
        if level >= 4:
            outputs["apply"] = f"{out}/holdout_{suffix}.csv"
            outputs["drift"] = f"{out}/drift.csv"
        exact = ctx.verifier_kind != "metric_threshold"
        code = ctx.needs_code
        fmt = "written with exactly 4 decimals" if exact else "as decimals"
        deliver = [
            f"`{outputs['summary']}`: header `column,missing,median,mean,std`, one row per "
            "numeric column in file order: the number of missing (empty) cells and the "
            "median, mean and population standard deviation of the present values, " + fmt
        ]
        if level >= 2:
            deliver.append(
                f"`{outputs['features']}`: `id`, then every numeric column with missing "
                "cells replaced by that column's median and then standardised as "
                "(x − mean) / std using the summary's mean and std (0 when std is 0), "
                + fmt
                + (
                    ", then one 0/1 column `city=<name>` per city (cities in byte order)"
                    if level >= 3
                    else ""
                )
                + ", then `label` unchanged; rows in input order"
            )
        if level >= 4:
            deliver.append(
                f"`{outputs['apply']}`: the same transformation applied to "
                f"`{holdout_path}` (same columns, no `label`), using only parameters "
                "learned from the training table — a city never seen in training gets all "
                "zeros"
            )
            deliver.append(
                f"`{outputs['drift']}`: header `column,train_mean,holdout_mean,shift`, one row "
                "per numeric column: training mean, holdout mean (present values) and shift = "
                "(holdout_mean − train_mean) / train_std (0 when std is 0), " + fmt
            )
        header = train.split("\n", 1)[0]
        text = (
            f"Before we train the churn model I need the customer table `{train_path}` prepared "
            f"(`{header}` here; every column other than id, city and label is "
            "numeric; empty cells are missing). "
            "Please produce:\n\n" + numbered(deliver)
        )
        if level >= 3:
            text += (
                "\n\nRows with an empty `label` are unusable: drop them before computing "
                "anything (they are not counted in the summary either)."
            )
        if not exact:
            text += "\n\nValues are checked to within 0.01."
        text += "\n\nAll files are comma-separated with no spaces and end with a newline."
        program = program_path(ctx.language, "/app/prep")
        names = {"summary": "summary", "features": "features", "apply": "apply", "drift": "drift"}
        if code:
            usage = (
                "`<report> <train.csv> [<other.csv>]` prints exactly one of the files above "
                "for any table of this shape: "
                + ", ".join(
                    f"`{names[r]}`" + (" (other = the table to transform)" if r == "apply" else "")
                    for r in outputs
                )
                + "."
            )
            text += "\n\n" + code_note(ctx, program, usage)
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/prep.sh"
        body = (_PREP_PY if lang == "python" else _PREP_SH).replace("__LEVEL__", str(level))
        lines = [f"head -n 5 {train_path}", f"mkdir -p {out}"]
        if level >= 3:
            lines += [
                f"awk -F, 'NR > 1 && $NF == \"\"' {train_path} | wc -l",
                f"cut -d, -f1 --complement {train_path} | tail -n +2 | grep -c ',,' || true",
            ]
        lines += program_setup(lang, source, body)
        run = invoke(lang, source)
        for report, path in outputs.items():
            extra = f" {holdout_path}" if report in ("apply", "drift") else ""
            lines.append(f"{run} {report} {train_path}{extra} > {path}")
        if level >= 4:
            lines += [
                f"head -n 3 {holdout_path}",
                f"cat {outputs['summary']} {outputs['drift']}",
                f"head -n 3 {outputs['features']} {outputs['apply']}",
                f"wc -l /app/data/*.csv {out}/*.csv",
            ]
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "outputs": outputs,
            "exact": exact,
            "tolerance": 0.00011 if exact else 0.01,
            "cases": 3 + level,
        }
        tests = {"test_task.py": minimal_test_file(params, _PREP_GEN + _PREP_CORE + _PREP_TESTS)}
        tests.update(tests_files)
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files=files,
        )


_prep_ns: dict = {}
exec(_PREP_GEN + _PREP_CORE, _prep_ns)
