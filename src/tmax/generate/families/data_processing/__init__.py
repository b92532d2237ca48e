"""Task families of the data_processing domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    bullets,
    heredoc,
    language_or_bash,
    manifest_test_file,
    program_path,
)

# the families register in the order of their classes in the module they came from
# isort: off
from tmax.generate.families.data_processing.customer_totals import CustomerTotals  # noqa: F401
from tmax.generate.families.data_processing.signup_validator import SignupValidator  # noqa: F401
from tmax.generate.families.data_processing.hourly_rollup import HourlyRollup  # noqa: F401

# isort: on
from tmax.generate.family import Draft, Family, RenderContext, register

# --- name_matching -----------------------------------------------------------------------

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

_MATCH_ORACLE = r"""
import re


def normalise(name):
    return " ".join(re.sub(r"[^a-z0-9 ]", "", name.lower()).split())


def distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def best_match(name, canon, limit):
    key = normalise(name)
    scored = sorted((distance(key, normalise(c)), c) for c in canon)
    if limit is not None and scored[0][0] > limit:
        return "UNMATCHED"
    return scored[0][1]


def match_lines(canon_text, names_text, limit):
    canon = [l.strip() for l in canon_text.splitlines() if l.strip()]
    names = [l.rstrip("\n") for l in names_text.splitlines() if l.strip()]
    return [f"{n}\t{best_match(n, canon, limit)}" for n in names]
"""

_MATCH_PY = r"""
import sys

LIMIT = @LIMIT@

if __name__ == "__main__":
    with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
        for line in match_lines(a.read(), b.read(), LIMIT):
            print(line)
"""

_MATCH_BASH = r"""
#!/bin/bash
# Usage: match.sh CANONICAL NAMES -> "name<TAB>best canonical" per name
set -euo pipefail
LC_ALL=C awk -v limit=@LIMIT@ '
function norm(s) { s = tolower(s); gsub(/[^a-z0-9 ]/, "", s); gsub(/ +/, " ", s)
  sub(/^ /, "", s); sub(/ $/, "", s); return s }
function lev(a, b,   i, j, la, lb, d, x, y, z) {
  la = length(a); lb = length(b)
  for (j = 0; j <= lb; j++) d[0, j] = j
  for (i = 1; i <= la; i++) { d[i, 0] = i
    for (j = 1; j <= lb; j++) {
      x = d[i-1, j] + 1; y = d[i, j-1] + 1
      z = d[i-1, j-1] + (substr(a, i, 1) != substr(b, j, 1))
      d[i, j] = (x < y) ? ((x < z) ? x : z) : ((y < z) ? y : z) } }
  return d[la, lb] }
NR == FNR { if ($0 ~ /[^ ]/) { sub(/^ +/, ""); sub(/ +$/, ""); c[++nc] = $0
    k[nc] = norm($0) }; next }
$0 ~ /[^ ]/ { key = norm($0); best = ""; bd = -1
  for (i = 1; i <= nc; i++) { dd = lev(key, k[i])
    if (bd < 0 || dd < bd || (dd == bd && c[i] < best)) { bd = dd; best = c[i] } }
  if (limit != "None" && bd > limit + 0) best = "UNMATCHED"
  print $0 "\t" best }' "$1" "$2"
"""

_MATCH_TESTS = r"""

def mangle(rng, name, edits):
    s = list(name)
    for _ in range(edits):
        i = rng.randrange(len(s))
        op = rng.choice("sdi")
        if op == "s":
            s[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif op == "d" and len(s) > 3:
            del s[i]
        else:
            s.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz"))
    out = "".join(s)
    if rng.random() < 0.4:
        out = out.upper() if rng.random() < 0.5 else out.lower()
    if rng.random() < 0.3:
        out = out.replace(" ", "  ") + rng.choice([".", ",", " "])
    return out


def fresh_case(rng):
    canon = rng.sample(CFG["pool"], rng.randint(4, 10))
    names, truth = [], []
    for _ in range(rng.randint(3, 12)):
        if CFG["limit"] is not None and rng.random() < 0.2:
            names.append("".join(rng.choice("qwxzjkvb") for _ in range(rng.randint(10, 16))))
            truth.append("UNMATCHED")
        else:
            c = rng.choice(canon)
            names.append(mangle(rng, c, rng.randint(0, 3)))
            truth.append(c)
    return canon, names, truth


def accuracy(lines, names, truth, label):
    assert len(lines) == len(names), f"{label}: {len(names)} lines expected, got {len(lines)}"
    hits = 0
    for line, name, want in zip(lines, names, truth):
        got_name, _, got = line.partition("\t")
        assert got_name == name, f"{label}: line for {name!r} expected, got {line!r}"
        hits += got == want
    return hits / len(names)


def test_matches():
    for src, out in CFG["pairs"]:
        got = [l for l in read(out).split("\n") if l.strip()]
        names = [l for l in read(src).splitlines() if l.strip()]
        if CFG["mode"] == "metric":
            acc = accuracy(got, names, CFG["truth"][src], out)
            assert acc >= CFG["threshold"], f"{out}: accuracy {acc:.3f} < {CFG['threshold']}"
        else:
            want = match_lines(read(CFG["canon"]), read(src), CFG["limit"])
            assert got == want, f"{out}:\nexpected\n" + "\n".join(want) + "\ngot\n" + "\n".join(got)


def test_derived():
    level = CFG["level"]
    if level >= 3:
        rows = [l.split("\t") for _, out in CFG["pairs"] for l in read(out).split("\n")
                if l.strip()]
        counts = {}
        for _, c in rows:
            if c != "UNMATCHED":
                counts[c] = counts.get(c, 0) + 1
        want = "".join(f"{n} {c}\n" for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
        got = read(CFG["outdir"] + "/counts.txt")
        assert got == want, f"counts.txt (from your matches):\nexpected\n{want}\ngot\n{got}"
        if level >= 4:
            unmatched = sorted(n for n, c in rows if c == "UNMATCHED")
            got = [l for l in read(CFG["outdir"] + "/unmatched.txt").split("\n") if l]
            assert got == unmatched, f"unmatched.txt should be {unmatched}, got {got}"
            summary = json.loads(read(CFG["outdir"] + "/summary.json"))
            want = {"names": len(rows), "matched": len(rows) - len(unmatched)}
            assert summary == want, f"summary.json should be {want}, got {summary}"
            outdir = CFG["outdir"]
            check_manifest(outdir + "/checksums.sha256", [out for _, out in CFG["pairs"]]
                           + [outdir + "/counts.txt", outdir + "/unmatched.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(555)
    folder = workdir()
    scores = []
    for i in range(CFG["fresh"]):
        canon, names, truth = fresh_case(rng)
        a, b = os.path.join(folder, f"canon{i}.txt"), os.path.join(folder, f"names{i}.txt")
        with open(a, "w") as handle:
            handle.write("\n".join(canon) + "\n")
        with open(b, "w") as handle:
            handle.write("\n".join(names) + "\n")
        got = [l for l in run_program([a, b]).stdout.split("\n") if l.strip()]
        if CFG["mode"] == "metric":
            scores.append(accuracy(got, names, truth, f"fresh case {i}"))
        else:
            want = match_lines("\n".join(canon), "\n".join(names), CFG["limit"])
            assert got == want, f"fresh case {i}: expected {want}, got {got}"
    if scores:
        acc = sum(scores) / len(scores)
        assert acc >= CFG["threshold"], f"program accuracy {acc:.3f} < {CFG['threshold']}"
"""


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
        files: dict[str, str | bytes] = {ref[len("/app/") :]: "\n".join(canon) + "\n"}
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
            files[src[len("/app/") :]] = "\n".join(names) + "\n"
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
        ref_name = ref.rsplit("/", 1)[1]
        if mode == "exact":
            rule = (
                "compare names after normalising both sides (lowercase, drop every "
                "character other than a-z, 0-9 and space, collapse runs of spaces, trim) "
                "and pick the {noun} at the smallest Levenshtein distance (ties: the "
                f"alphabetically first {noun} as written in {ref_name})"
            ).replace("{noun}", noun)
            if limit is not None:
                rule += f"; when the best distance is above {limit}, write `UNMATCHED`"
        else:
            rule = (
                f"pick the {noun} each messy name refers to (names carry typos, case and "
                f"spacing noise); at least {threshold:.0%} of the lines must be right"
            )
            if limit is not None:
                rule += f"; some lines are junk that matches no {noun}, write `UNMATCHED` for those"
        srcs = ", ".join(f"`{s}`" for s, _ in pairs)
        column = noun.upper()
        asks = [
            f"for each input file ({srcs}) the matching `{outdir}/{out_stem}_qN.tsv`: one line "
            f"per non-empty input line, in order, `ORIGINAL<TAB>{column}` where ORIGINAL is "
            f"the input line as is; {rule}"
        ]
        if level >= 3:
            asks.append(
                f"`{outdir}/counts.txt`: `COUNT {column}` lines over all your matches "
                f"(UNMATCHED excluded), most first, ties by {noun} name"
            )
        if level >= 4:
            asks.append(
                f"`{outdir}/unmatched.txt`: the original names you marked UNMATCHED, "
                "sorted (byte order), one per line"
            )
            asks.append(f'`{outdir}/summary.json`: `{{"names": N, "matched": M}}`')
            asks.append(
                f"`{outdir}/checksums.sha256`: sha256sum lines for the .tsv files, "
                "counts.txt and unmatched.txt"
            )
        body = (
            rng.choice(_MATCH_OPENERS).format(noun=noun, ref=ref)
            + " Please produce:\n\n"
            + bullets(asks)
        )
        if code:
            body += (
                f"\n\nI want the matcher as a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`, run as `{prog} {column}S_FILE NAMES_FILE`, printing the "
                f"`ORIGINAL<TAB>{column}` lines to stdout. I will try it on other lists."
            )
        source = {"python": _MATCH_ORACLE + _MATCH_PY, "bash": _MATCH_BASH}[lang]
        source = source.replace("@LIMIT@", str(limit))
        tool = prog if code else "/tmp/match.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = [f"mkdir -p {outdir}", heredoc(tool, source)]
        for src, out in pairs:
            lines.append(f"{run} {ref} {src} > {out}")
        matches = f"{outdir}/{out_stem}_q*.tsv"
        if level >= 3:
            lines.append(
                f"cat {matches} | cut -f2 | grep -vx UNMATCHED | sort | "
                f"uniq -c | sort -k1,1nr -k2 | sed 's/^ *//' > {outdir}/counts.txt"
            )
        if level >= 4:
            lines.append(
                f"cat {matches} | awk -F'\\t' '$2 == \"UNMATCHED\" "
                f"{{print $1}}' | LC_ALL=C sort > {outdir}/unmatched.txt"
            )
            lines.append(f"names=$(cat {matches} | grep -c .)")
            lines.append(f"missing=$(grep -c . {outdir}/unmatched.txt || true)")
            lines.append(
                'printf \'{"names": %d, "matched": %d}\\n\' "$names" '
                f'"$((names - missing))" > {outdir}/summary.json'
            )
            tsvs = " ".join(o.rsplit("/", 1)[1] for _, o in pairs)
            lines.append(
                f"(cd {outdir} && sha256sum {tsvs} counts.txt unmatched.txt > checksums.sha256)"
            )
            lines.append(f"head -n 5 {outdir}/counts.txt")
            lines.append(f"cat {outdir}/summary.json")
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _MATCH_ORACLE + _MATCH_TESTS)},
            files=files,
        )
