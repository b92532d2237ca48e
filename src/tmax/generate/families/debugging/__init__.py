"""Task families of the debugging domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    minimal_test_file,
    numbered,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# The order of registration breaks ties between families: keep it.
# isort: off
from tmax.generate.families.debugging import fix_ranking  # noqa: F401
from tmax.generate.families.debugging import crash_triage  # noqa: F401
from tmax.generate.families.debugging import fix_validator  # noqa: F401

# isort: on
from tmax.generate.families.debugging._shared import plant as _plant

# --- family 4: bisect a regression across a tool's releases -----------------------------

# (correct line, regressed variant or None); "__VERSION__" marks the version line.
_TALLY_PY = [
    ('"""tally: net quantity per sku from an orders CSV (sku,qty with a header)."""', None),
    ("import sys", None),
    ("", None),
    ('VERSION = "__VERSION__"', None),
    ("", None),
    ("", None),
    ("def main():", None),
    ('    if sys.argv[1:] == ["--version"]:', None),
    ("        print(VERSION)", None),
    ("        return", None),
    ("    totals = {}", None),
    ("    with open(sys.argv[1]) as handle:", None),
    ("        lines = handle.read().splitlines()", None),
    ("    for line in lines[1:]:", "    for line in lines[1:-1]:"),
    ("        if not line.strip():", None),
    ("            continue", None),
    ('        sku, qty = line.split(",")', None),
    ("        sku = sku.strip()", "        sku = sku.strip()[:6]"),
    (
        "        totals[sku] = totals.get(sku, 0) + int(qty)",
        "        totals[sku] = totals.get(sku, 0) + abs(int(qty))",
    ),
    ("    kept = [sku for sku in sorted(totals) if totals[sku] != 0]", None),
    ("    for sku in kept:", None),
    ("        print(sku, totals[sku])", None),
    (
        '    print("skus", len(kept))',
        '    print("skus", len([sku for sku in kept if totals[sku] > 0]))',
    ),
    ("", None),
    ("", None),
    ("main()", None),
]

_TALLY_SH = [
    ("#!/bin/bash", None),
    ("# tally: net quantity per sku from an orders CSV (sku,qty with a header).", None),
    ('VERSION="__VERSION__"', None),
    ('if [ "${1:-}" = "--version" ]; then echo "$VERSION"; exit 0; fi', None),
    ("export LC_ALL=C", None),
    ('tail -n +2 "$1" \\', 'tail -n +3 "$1" \\'),
    ("  | awk -F, 'NF >= 2 {", None),
    (
        '      sku = $1; gsub(/[ \\t\\r]/, "", sku)',
        '      sku = substr($1, 1, 6); gsub(/[ \\t\\r]/, "", sku)',
    ),
    ("      total[sku] += $2", "      total[sku] += ($2 < 0 ? -$2 : $2)"),
    ("    }", None),
    ("    END { for (s in total) if (total[s] != 0) print s, total[s] }' \\", None),
    ("  | sort -k1,1 \\", None),
    (
        "  | awk '{ print; n++ } END { print \"skus\", n + 0 }'",
        "  | awk '{ print; if ($2 > 0) n++ } END { print \"skus\", n + 0 }'",
    ),
]

_TALLY_TESTS = """
HERE = os.path.dirname(__file__)


def expect(text):
    totals = {}
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        sku, qty = line.split(",")
        totals[sku.strip()] = totals.get(sku.strip(), 0) + int(qty)
    kept = sorted(s for s in totals if totals[s] != 0)
    return "".join(f"{s} {totals[s]}\\n" for s in kept) + f"skus {len(kept)}\\n"


def test_first_bad_release():
    got = read("/app/out/first_bad.txt").split()
    want = CFG["bad"] if CFG["level"] >= 4 else CFG["bad"][:1]
    assert got == want, f"first_bad.txt: expected {want}, got {got}"


def test_changed_lines():
    if CFG["level"] >= 3:
        got = read("/app/out/changed_lines.txt").split()
        want = [str(n) for n in CFG["lines"]]
        if CFG["level"] < 4:
            want = want[:1]
        assert got == want, f"changed_lines.txt: expected {want}, got {got}"


def test_totals():
    if CFG["level"] >= 2:
        for name in CFG["data"]:
            stem = name.rsplit(".", 1)[0]
            want = expect(read(os.path.join(HERE, name)))
            got = read(f"/app/out/totals_{stem}.txt")
            assert got == want, f"totals_{stem}.txt:\\nexpected:\\n{want}\\ngot:\\n{got}"


def corpus():
    cases = [
        "sku,qty\\n",
        "sku,qty\\nAB1,5\\n",
        "sku,qty\\nAB1,5\\n\\nAB1,-5\\nZZ9,-3\\n",
        "sku,qty\\nLONGSKU001,4\\nLONGSKU002,7\\nLONGSK,1\\n",
        "sku,qty\\nQ1,-2\\nQ2,-9\\nQ1,-1\\n",
        "sku,qty\\nX1,3\\nX2,4\\nX3,5\\n",
        "sku,qty\\nB7,10\\nA7,-10\\nA7,10\\nC77777777,2\\n",
    ]
    rng = random.Random(4242)
    for _ in range(CFG["cases"]):
        skus = ["S" + "".join(rng.choice("ABCDEFGHJK0123456789") for _ in range(rng.randint(2, 9)))
                for _ in range(rng.randint(1, 8))]
        rows = [f"{rng.choice(skus)},{rng.randint(-30, 60)}" for _ in range(rng.randint(1, 30))]
        cases.append("sku,qty\\n" + "\\n".join(rows) + "\\n")
    return cases


def test_fixed_program_on_corpus():
    work = tempfile.mkdtemp()
    for i, text in enumerate(corpus()):
        path = os.path.join(work, f"case{i}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        done = run_program([path])
        assert done.returncode == 0, f"case {i}: exit {done.returncode} {done.stderr[-500:]}"
        want = expect(text)
        assert done.stdout == want, f"input:\\n{text}\\nexpected:\\n{want}\\ngot:\\n{done.stdout}"
"""


def _tally_orders(rng, n: int) -> str:
    """Orders whose regressions all show: unique first/last rows, returns, a long sku and a
    sku that nets negative."""
    skus = [
        "K" + "".join(rng.choice("ABCDEFGHJKMNPQRSTUVWXYZ0123456789") for _ in range(k))
        for k in rng.sample(range(3, 10), 6)
    ]
    skus += ["LONG" + str(rng.randint(100000, 999999))]
    rows = [(rng.choice(skus), rng.randint(-8, 40)) for _ in range(n)]
    rows.append((rng.choice(skus), -rng.randint(1, 9)))
    rows.insert(rng.randrange(len(rows)), ("RET" + str(rng.randint(10, 99)), -rng.randint(2, 9)))
    rows.insert(0, ("FIRST" + str(rng.randint(1, 9)), rng.randint(1, 20)))
    rows.append(("LAST" + str(rng.randint(1, 9)), rng.randint(1, 20)))
    return "sku,qty\n" + "".join(f"{s},{q}\n" for s, q in rows)


_TALLY_STORIES = (
    "Release {good} was correct, but somewhere along the way it started to give wrong "
    "totals on `{data}`.",
    "Release {good} got `{data}` right; the newest one does not.",
    "Our stock numbers for `{data}` stopped matching the warehouse count at some release "
    "after {good}, which was still correct.",
    "Somewhere after release {good} (known good) the totals it prints for `{data}` went wrong.",
)


@register
class BisectRegression(Family):
    """Find which release of a small tool introduced a regression (two at level 4), name
    the changed lines, ship a fixed program checked on an adversarial corpus, and recompute
    the totals the broken releases got wrong."""

    name = "debugging.bisect_regression"
    domain = "debugging"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("tally_output", (r"It prints one line `<sku> <net quantity>` for every sku whose",
                              r"then a last line `skus <number of lines printed before it>`"),
             (r"kept = sorted\(s for s in totals if totals\[s\] != 0\)",
              r'f"skus \{{len\(kept\)\}}')),
        Rule("first_bad", (r"`/app/out/first_bad\.txt`: the version of the first release that",),
             (r"def test_first_bad_release\(",)),
        Rule("two_regressions", (r"there are actually two separate regressions",),
             (r'want = CFG\["bad"\] if CFG\["level"\] >= 4 else',), levels=frozenset({4})),
        Rule("fixed_copy", (r"a fixed copy of the newest release at `/app/\w+",),
             (r"def test_fixed_program_on_corpus\(",)),
        Rule("totals_files", (r"`/app/out/totals_<name>\.txt` with the correct output",),
             (r'read\(f"/app/out/totals_\{{stem\}}\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("changed_lines", (r"`/app/out/changed_lines\.txt`: the 1-based line number",),
             (r'read\("/app/out/changed_lines\.txt"\)',), levels=frozenset({3, 4})),
        Rule("changed_lines_each", (r"one line per regression, in the same order as first_bad",),
             (r'want = \[str\(n\) for n in CFG\["lines"\]\]',), levels=frozenset({4})),
        Rule("nasty_corpus", (r"checked against a corpus of nasty inputs",), (r"def corpus\(",),
             drawn=True),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "fix an off-by-one error in loop bounds": "fixed_copy",  # planted: _plant
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        lang = ctx.language
        template = _TALLY_PY if lang == "python" else _TALLY_SH
        ext = ".py" if lang == "python" else ".sh"
        count = 3 + 3 * level
        tool = ctx.pick(["tally", "skusum", "netqty", "stockcount"])
        major = rng.randint(1, 4)
        versions = [f"{major}.{k}" for k in range(count)]
        picked = _plant(ctx, template, 2 if level >= 4 else 1)
        starts = sorted(rng.sample(range(1, count), len(picked)))
        bad = [versions[s] for s in starts]

        def release(index: int, fixed: bool = False) -> str:
            out = []
            for i, (good, bug) in enumerate(template):
                line = good
                if not fixed and i in picked and index >= starts[picked.index(i)]:
                    line = bug
                out.append(
                    line.replace("__VERSION__", versions[index]).replace("tally:", tool + ":")
                )
            return "\n".join(out) + "\n"

        files = {f"releases/{v}/{tool}{ext}": release(k) for k, v in enumerate(versions)}
        data = [ctx.pick(["orders", "orders_2024", "march_orders", "shop_orders"]) + ".csv"]
        if level >= 4:
            data.append(ctx.pick(["returns_q2", "returns_q3", "refunds_may"]) + ".csv")
        fixtures = {name: _tally_orders(rng, 10 + 6 * level) for name in data}
        files.update({f"data/{name}": text for name, text in fixtures.items()})
        program = program_path(lang, f"/app/{tool}")
        runner = "python3" if lang == "python" else "bash"
        spec = (
            "It prints one line `<sku> <net quantity>` for every sku whose quantities (returns "
            "are negative) do not add up to zero, in byte order of the sku, then a last line "
            "`skus <number of lines printed before it>`."
        )
        deliver = [
            "`/app/out/first_bad.txt`: the version of the first release that breaks it"
            + (
                "; there are actually two separate regressions, so list the release that "
                "introduced each of them, oldest first, one per line"
                if level >= 4
                else ""
            ),
            f"a fixed copy of the newest release at `{program}` ({LANGUAGE_NAMES[lang]}, same "
            "usage); I will run it on other order files, including awkward ones",
        ]
        if level >= 2:
            deliver.append(
                "`/app/out/totals_<name>.txt` with the correct output for each "
                "`/app/data/<name>.csv` (" + ", ".join(f"`{n}`" for n in data) + ")"
            )
        if level >= 3:
            deliver.append(
                "`/app/out/changed_lines.txt`: the 1-based line number, in the first bad "
                "release's file, of the line whose change caused the regression"
                + (
                    " (one line per regression, in the same order as first_bad.txt, each "
                    "numbered in the file of the release that introduced it)"
                    if level >= 4
                    else ""
                )
            )
        text = (
            f"`{tool}` is a small {LANGUAGE_NAMES[lang]} tool of ours; every release we shipped "
            f"is kept under `/app/releases/<version>/{tool}{ext}` (versions "
            f"{versions[0]} to {versions[-1]}). It takes an orders CSV (`sku,qty` with a "
            f"header) as its only argument. {spec} "
            + ctx.pick(_TALLY_STORIES).format(good=versions[0], data=f"/app/data/{data[0]}")
            + " Please work out what happened and give me:\n\n"
            + numbered(deliver)
        )
        if ctx.verifier_kind == "adversarial_corpus":
            text += (
                "\n\nThe fixed tool will be checked against a corpus of nasty inputs (empty "
                "files, blank lines, returns only, long skus)."
            )
        # --- reference solution
        rel = "/app/releases"
        order = f"$(ls {rel} | sort -t. -k2,2n)"
        lines = [
            f"ls {rel}",
            f"cat -n {rel}/{versions[0]}/{tool}{ext}",
            "mkdir -p /app/out",
            f"{runner} {rel}/{versions[0]}/{tool}{ext} /app/data/{data[0]} > /tmp/good.txt",
            f"for v in {order}; do if ! {runner} {rel}/$v/{tool}{ext} /app/data/{data[0]}"
            ' | cmp -s - /tmp/good.txt; then echo "$v"; break; fi; done > /tmp/first.txt',
            "cat /tmp/first.txt",
        ]
        if level < 2:
            lines = lines[2:-1]
        if level >= 3:
            lines += [
                "prev=''",
                f'for v in {order}; do if [ -n "$prev" ]; then diff'
                f" <(sed 's/^VERSION.*//' {rel}/$prev/{tool}{ext})"
                f" <(sed 's/^VERSION.*//' {rel}/$v/{tool}{ext})"
                " | grep -E '^[0-9]+c[0-9]+$' | sed \"s/^.*c/$v /\" || true; fi; prev=$v;"
                " done > /tmp/changes.txt",
                "cat /tmp/changes.txt",
            ]
        if level >= 4:
            lines += [
                "cut -d' ' -f1 /tmp/changes.txt > /app/out/first_bad.txt",
                "cut -d' ' -f2 /tmp/changes.txt > /app/out/changed_lines.txt",
            ]
        else:
            lines.append("cp /tmp/first.txt /app/out/first_bad.txt")
            if level == 3:
                lines.append(
                    "grep \"^$(cat /tmp/first.txt) \" /tmp/changes.txt | cut -d' ' -f2"
                    " > /app/out/changed_lines.txt"
                )
        if level >= 2:
            lines.append(
                f"diff {rel}/{versions[0]}/{tool}{ext} {rel}/{versions[-1]}/{tool}{ext} || true"
            )
        lines += [
            f"cat > {program} <<'FIXED_EOF'",
            release(count - 1, fixed=True).rstrip("\n"),
            "FIXED_EOF",
        ]
        if lang == "bash":
            lines.append(f"chmod +x {program}")
        for name in data if level >= 2 else []:
            stem = name.rsplit(".", 1)[0]
            lines.append(f"{runner} {program} /app/data/{name} > /app/out/totals_{stem}.txt")
        if level >= 4:
            lines += [
                f"cmp /tmp/good.txt /app/out/totals_{data[0].rsplit('.', 1)[0]}.txt",
                f"{runner} {program} /dev/null || true",
                "head -n 3 /app/out/*.txt",
            ]
        params = {
            "level": level,
            "language": lang,
            "program": program,
            "bad": bad,
            "lines": [i + 1 for i in picked],
            "data": data,
            "cases": 6 * level if ctx.verifier_kind == "adversarial_corpus" else 2 * level,
        }
        tests = {"test_task.py": minimal_test_file(params, _TALLY_TESTS)}
        tests.update(fixtures)
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files=files,
        )
