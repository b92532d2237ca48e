"""Match messy vendor names to a canonical list (the task's files are the templates
beside this module; the reference matcher in Python or Bash is ``solution/match.*``, the
oracle the tests and the Python program share is ``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    language_or_bash,
    manifest_test_file,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference matcher of each language: ``solution/match.<extension>``."""

_COMPANIES = (
    "Northwind Traders",
    "Blue Harbor Foods",
    "Crescent Logistics",
    "Summit Dental Care",
    "Ironwood Builders",
    "Pinecrest Bakery",
    "Silverline Telecom",
    "Golden Valley Farms",
    "Redstone Mining",
    "Oakridge Pharmacy",
    "Maple Street Books",
    "Harborview Hotel",
    "Quantum Print Shop",
    "Evergreen Landscaping",
    "Falcon Air Charter",
    "Riverside Plumbing",
    "Sunset Car Wash",
    "Bright Path Tutoring",
    "Copperfield Metals",
    "Lakeshore Marina",
    "Willow Creek Vets",
    "Atlas Moving Co",
    "Cobalt Software",
    "Meadowlark Dairy",
)
"""Canonical names, pairwise at least 9 edits apart after normalisation."""


def _mangle(rng, name: str, edits: int) -> str:
    chars = list(name)
    for _ in range(edits):
        i = rng.randrange(len(chars))
        op = rng.choice("sdi")
        if op == "s":
            chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif op == "d":
            del chars[i]
        else:
            chars.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz"))
    out = "".join(chars)
    style = rng.random()
    if style < 0.25:
        out = out.upper()
    elif style < 0.5:
        out = out.lower()
    if rng.random() < 0.3:
        out = " " + out.replace(" ", "  ") + rng.choice([".", ",", " ", "!"])
    return out


_MATCH_OPENERS = (
    "Accounts payable typed {noun} names by hand. The official list is {ref} (one per line).",
    "The {noun} names on our invoices were keyed in by hand and are full of typos; the "
    "official {noun} list is {ref}, one name per line.",
    "I need each hand-typed {noun} name tied to the right entry of the official list in "
    "{ref} (one per line).",
    "Staff entered {noun} names free-hand, so the same {noun} appears under many spellings. "
    "The names we recognise are in {ref}, one per line.",
)
"""Opening sentences of the name-matching task (filled with the noun and the list's path)."""

_MATCH_REF_DIRS = ("/app/ref", "/app/master", "/app/reference", "/app/registry")
_MATCH_REF_FILES = {
    "vendor": ("vendors.txt", "vendor_master.txt", "approved_vendors.txt"),
    "supplier": ("suppliers.txt", "supplier_register.txt", "approved_suppliers.txt"),
}
_MATCH_IN_DIRS = ("/app/incoming", "/app/typed", "/app/inbox", "/app/entries")
_MATCH_IN_STEMS = ("invoices", "payables", "bills", "invoice_log")
_MATCH_OUT_DIRS = ("/app/out", "/app/results", "/app/matched")
_MATCH_OUT_STEMS = ("matches", "mapped", "resolved")
_MATCH_PROGRAMS = ("/app/match", "/app/match_names", "/app/resolve", "/app/name_match")
_MATCH_BARS = {1: (0.7, 0.75), 2: (0.8, 0.85), 3: (0.85, 0.9), 4: (0.9, 0.95)}
"""Accuracy bars (metric mode) a level may draw; the exact rule reaches all of them."""


@register
class NameMatching(Family):
    """Match messy vendor names to a canonical list by edit distance after normalisation
    (exact rule) or to an accuracy bar; level adds an UNMATCHED rule, files and reports."""

    name = "data_processing.name_matching"
    domain = "data_processing"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("matches_files",
             (r"the matching `(?P<out>/app/\w+)/(?P<stem>\w+)_qN\.tsv`: one line per non-empty",),
             (r"def test_matches\(", r'"outdir": "{out}"', r'"{out}/{stem}_q1\.tsv"')),
        Rule("normalise", (r"compare names after normalising both sides \(lowercase, drop every",),
             (r'" "\.join\(re\.sub\(r"\[\^a-z0-9 \]", "", name\.lower\(\)\)\.split\(\)\)',
              r'want = match_lines\(read\(CFG\["canon"\]\)'), when={"mode": "exact"}),
        Rule("nearest_vendor",
             (r"the smallest Levenshtein distance \(ties: the alphabetically first",),
             (r"def distance\(a, b\):", r"sorted\(\(distance\(key, normalise\(c\)\), c\) for c in",
              r'want = match_lines\(read\(CFG\["canon"\]\)'), when={"mode": "exact"}),
        Rule("unmatched_limit",
             (r"when the best distance is above (?P<limit>\d+), write `UNMATCHED`",),
             (r'"limit": {limit},', r"scored\[0\]\[0\] > limit", r'"truth": \{{[^\n]*"UNMATCHED"'),
             levels=frozenset({2, 3, 4}), when={"mode": "exact"}),
        Rule("accuracy_bar", (r"at least (?P<pct>\d+?)0?% of the lines must be right",),
             (r'assert acc >= CFG\["threshold"\]', r'"threshold": 0\.{pct},'),
             when={"mode": "metric"}),
        Rule("junk_unmatched",
             (r"some lines are junk that matches no (?:vendor|supplier), write `UNMATCHED`",),
             (r'"truth": \{{[^\n]*"UNMATCHED"',), levels=frozenset({2, 3, 4}),
             when={"mode": "metric"}),
        Rule("counts_file", (r"`(?P<out>/app/\w+)/counts\.txt`: `COUNT (?:VENDOR|SUPPLIER)`",),
             (r'read\(CFG\["outdir"\] \+ "/counts\.txt"\)', r'"outdir": "{out}"'),
             levels=frozenset({3, 4})),
        Rule("unmatched_file", (r"`(?P<out>/app/\w+)/unmatched\.txt`: the original names",),
             (r'read\(CFG\["outdir"\] \+ "/unmatched\.txt"\)', r'"outdir": "{out}"'),
             levels=frozenset({4})),
        Rule("summary_and_checksums",
             (r"`(?P<out>/app/\w+)/summary\.json`", r"`/app/\w+/checksums\.sha256`"),
             (r'read\(CFG\["outdir"\] \+ "/summary\.json"\)', r"check_manifest\(",
              r'"outdir": "{out}"'),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_program_fresh\(", r'"program": "{program}"'), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "fuzzy match names using edit distance thresholds": "unmatched_limit",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "metric" if ctx.verifier_kind == "metric_threshold" else "exact"
        # the limit only shows (as a number) in exact mode; the metric bar assumes 3
        limit = (ctx.pick((2, 3, 4)) if mode == "exact" else 3) if level >= 2 else None
        noun = ctx.pick(("vendor", "supplier"))
        ref = f"{ctx.pick(_MATCH_REF_DIRS)}/{ctx.pick(_MATCH_REF_FILES[noun])}"
        indir, stem = ctx.pick(_MATCH_IN_DIRS), ctx.pick(_MATCH_IN_STEMS)
        outdir, out_stem = ctx.pick(_MATCH_OUT_DIRS), ctx.pick(_MATCH_OUT_STEMS)
        canon = sorted(rng.sample(_COMPANIES, 6 + 3 * level))
        app_files: dict[str, str | bytes] = {ref[len("/app/") :]: "\n".join(canon) + "\n"}
        pairs, truth = [], {}
        for f in range(1 if level < 4 else 2):
            names, want = [], []
            for _ in range(6 + 4 * level):
                if limit is not None and rng.random() < 0.15:
                    names.append(
                        "".join(rng.choice("qwxzjkvbp") for _ in range(rng.randint(10, 15)))
                    )
                    want.append("UNMATCHED")
                else:
                    c = rng.choice(canon)
                    names.append(_mangle(rng, c, rng.randint(0, 3)))
                    want.append(c)
            if limit is not None and "UNMATCHED" not in want:
                # at least one junk line per file, so the UNMATCHED rule shows in the fixture
                at = rng.randrange(len(names))
                names[at] = "".join(rng.choice("qwxzjkvbp") for _ in range(rng.randint(10, 15)))
                want[at] = "UNMATCHED"
            src = f"{indir}/{stem}_q{f + 1}.txt"
            app_files[src[len("/app/") :]] = "\n".join(names) + "\n"
            pairs.append([src, f"{outdir}/{out_stem}_q{f + 1}.tsv"])
            truth[src] = want
        lang = language_or_bash(ctx)
        prog = program_path(lang, ctx.pick(_MATCH_PROGRAMS))
        code = ctx.needs_code
        threshold = ctx.pick(_MATCH_BARS[level])
        cfg = {
            "level": level,
            "mode": mode,
            "limit": limit,
            "canon": ref,
            "outdir": outdir,
            "pairs": pairs,
            "truth": truth,
            "threshold": threshold,
            "lang": lang,
            "program": prog,
            "code": code,
            "pool": list(_COMPANIES),
            "fresh": {1: 4, 2: 6, 3: 8, 4: 10}[level],
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/match.sh"
        values = {
            "level": level,
            "mode": mode,
            "limit": limit,
            "noun": noun,
            "column": noun.upper(),
            "ref": ref,
            "ref_name": ref.rsplit("/", 1)[1],
            "bar": f"{threshold:.0%}",
            "sources": ", ".join(f"`{s}`" for s, _ in pairs),
            "pairs": pairs,
            "outdir": outdir,
            "out_stem": out_stem,
            "matches": f"{outdir}/{out_stem}_q*.tsv",
            "tsvs": " ".join(o.rsplit("/", 1)[1] for _, o in pairs),
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "source": files.render(
                f"solution/match.{_EXTENSIONS[lang]}", limit=limit, oracle=oracle
            ).strip(),
        }
        values["opener"] = rng.choice(_MATCH_OPENERS).format(noun=noun, ref=ref)
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), oracle=oracle
                )
            },
            files=app_files,
        )
