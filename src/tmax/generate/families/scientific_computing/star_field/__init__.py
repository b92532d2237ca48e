"""Find stars in telescope PNG frames (the task's files are the templates beside this
module; the reference detector in Python or Bash is ``solution/stars.*``, the oracle the
tests and the Python detector share is ``tests/oracle.py``; the tests decode PNGs with
:data:`tmax.generate.builders.PNG_READER`)."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    PNG_READER,
    language_or_bash,
    manifest_test_file,
    png_bytes,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference detector of each language: ``solution/stars.<extension>``."""


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
        app_files: dict[str, str | bytes] = {}
        pairs = []
        for f in range(level):
            width, height = 24 + 8 * level, 18 + 6 * level
            stem = f"frame{f + 1:02d}"
            app_files[f"frames/{stem}.png"] = _sky(
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
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/stars.sh"
        values = {
            "level": level,
            "threshold": threshold,
            "min_size": min_size,
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "pairs": pairs,
            "stars": [out.rsplit("/", 1)[1] for _, out in pairs],
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "source": files.render(
                f"solution/stars.{_EXTENSIONS[lang]}",
                oracle=oracle,
                threshold=threshold,
                min_size=min_size,
            ).strip(),
        }
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py",
                    prelude=manifest_test_file(cfg, ""),
                    png_reader=PNG_READER,
                    oracle=oracle,
                )
            },
            files=app_files,
        )
