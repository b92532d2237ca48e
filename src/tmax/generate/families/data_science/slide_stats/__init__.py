"""Measure PNG microscope slides (the task's files are the templates beside this module;
the reference image-statistics program in Python or Bash is ``solution/imgstat.*``, the
slide generator the tests and the family share is ``tests/slide.py``)."""

from __future__ import annotations

from functools import cache

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    PNG_READER,
    code_note,
    invoke,
    minimal_test_file,
    png_bytes,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference program of each language: ``solution/imgstat.<extension>``."""


@cache
def _slides() -> dict:
    """The slide generator (``tests/slide.py``): ``make_slide``."""
    namespace: dict = {}
    exec(templates(__name__).render("tests/slide.py"), namespace)
    return namespace


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
            pixels = _slides()["make_slide"](rng, w, h, rng.randint(2, 4 + level))
            images[stem] = png_bytes(w, h, pixels)
        code = ctx.needs_code
        stats_fmt = ["`width <W>`", "`height <H>`", "`bright <count of bright pixels>`"]
        full = code or level in (2, 3)  # the mean_rgb and bbox lines are asked for
        if full:
            stats_fmt += [
                "`mean_rgb <R> <G> <B>` (per-channel mean over all pixels, rounded down)",
                "`bbox <x0> <y0> <x1> <y1>` (inclusive bounding box of the "
                "bright pixels, x to the right and y down from 0,0; `bbox none` if "
                "there are none)",
            ]
        program = program_path(ctx.language, "/app/imgstat")
        note = ""
        if code:
            usage = (
                "`<png> stats <limit>` prints the five stats lines (width, height, bright, "
                "mean_rgb, bbox) using R+G+B >= limit as bright"
            )
            if level >= 4:
                usage += ", one per line: " + ", ".join(stats_fmt)
            if level >= 3:
                usage += "; `<png> blobs <limit>` prints the blobs table"
            note = code_note(ctx, program, usage + ".")
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/imgstat.sh"
        files = templates(__name__)
        values = {
            "level": level,
            "code": code,
            "full": full,
            "limit": limit,
            "stems": stems,
            "pngs": ", ".join(f"`{s}.png`" for s in stems),
            "stats_fmt": ", ".join(stats_fmt),
            "code_note": note,
            "lang": lang,
            "source": source,
            "body": files.render(f"solution/imgstat.{_EXTENSIONS[lang]}").rstrip("\n"),
            "run": invoke(lang, source),
        }
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "limit": limit,
            "stems": stems,
            "full": full,
        }
        tests = {
            "test_task.py": files.render(
                "tests/test_task.py",
                prelude=minimal_test_file(params, ""),
                slide=files.render("tests/slide.py"),
                png_reader=PNG_READER,
            )
        }
        tests.update({f"{s}.png": data for s, data in images.items()})
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests=tests,
            files={f"images/{s}.png": data for s, data in images.items()},
        )
