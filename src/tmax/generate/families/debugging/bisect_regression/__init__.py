"""Find which release of a small tool introduced a regression (the task's files are the
templates beside this module; the tool, each line with its regressed variant, is data
here, since the regressions planted and the releases they start at are drawn)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import LANGUAGE_NAMES, minimal_test_file, program_path
from tmax.generate.families.debugging._shared import plant
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

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
        picked = plant(ctx, template, 2 if level >= 4 else 1)
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
        task = templates(__name__)
        values = {
            "level": level,
            "lang": lang,
            "language_name": LANGUAGE_NAMES[lang],
            "tool": tool,
            "script": f"{tool}{ext}",
            "first": versions[0],
            "last": versions[-1],
            "data": data,
            "data_list": ", ".join(f"`{n}`" for n in data),
            "totals": [(name, name.rsplit(".", 1)[0]) for name in data],
            "program": program,
            "runner": runner,
            "story": ctx.pick(_TALLY_STORIES).format(good=versions[0], data=f"/app/data/{data[0]}"),
            "adversarial": ctx.verifier_kind == "adversarial_corpus",
            "fixed": release(count - 1, fixed=True).rstrip("\n"),
        }
        params = {
            "level": level,
            "language": lang,
            "program": program,
            "bad": bad,
            "lines": [i + 1 for i in picked],
            "data": data,
            "cases": 6 * level if ctx.verifier_kind == "adversarial_corpus" else 2 * level,
        }
        prelude = minimal_test_file(params, "")
        tests = {"test_task.py": task.render("tests/test_task.py", prelude=prelude)}
        tests.update(fixtures)
        return Draft(
            instruction=task.render("instruction.md", **values),
            solution=task.render("solution/solve.sh", **values),
            tests=tests,
            files=files,
        )
