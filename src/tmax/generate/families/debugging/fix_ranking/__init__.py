"""Repair a leaderboard script with planted bugs (the task's files are the templates
beside this module; the three programs, each line with its buggy variant, are data
here, since the bugs planted are drawn)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import LANGUAGE_NAMES, minimal_test_file, program_path
from tmax.generate.families.debugging._shared import plant
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

# Each program is a list of (correct line, buggy variant or None).
_RANK_PY = [
    ("import sys", None),
    ("", None),
    ("rows = []", None),
    ("with open(sys.argv[1]) as handle:", None),
    ("    lines = handle.read().splitlines()", None),
    ("for i in range(1, len(lines)):", "for i in range(1, len(lines) - 1):"),
    ("    if not lines[i].strip():", None),
    ("        continue", None),
    ('    name, score = lines[i].split(",")', None),
    (
        "    rows.append((name.strip(), int(score)))",
        "    rows.append((name.strip(), abs(int(score))))",
    ),
    ("rows.sort(key=lambda r: (-r[1], r[0]))", "rows.sort(key=lambda r: r[1], reverse=True)"),
    (
        "for rank, (name, score) in enumerate(rows, 1):",
        "for rank, (name, score) in enumerate(rows):",
    ),
    ("    print(rank, name, score)", None),
    ('print("total", sum(s for _, s in rows))', 'print("total", sum(s for _, s in rows if s > 0))'),
]

_RANK_SH = [
    ("#!/bin/bash", None),
    ("# Rank the name,score rows of $1: highest score first, ties by name.", None),
    ("export LC_ALL=C", None),
    (
        "tail -n +2 \"$1\" | grep -v '^[[:space:]]*$' \\",
        "tail -n +3 \"$1\" | grep -v '^[[:space:]]*$' \\",
    ),
    ("  | sort -t, -k2,2nr -k1,1 \\", "  | sort -t, -k2,2nr -k1,1r \\"),
    (
        "  | awk -F, '{ print NR, $1, $2 + 0; total += $2 }",
        "  | awk -F, '{ print NR - 1, $1, $2 + 0; total += $2 }",
    ),
    ('    END { print "total", total + 0 }\'', '    END { print "total", total + 1 }\''),
]

_RANK_C = [
    ("#include <stdio.h>", None),
    ("#include <stdlib.h>", None),
    ("#include <string.h>", None),
    ("", None),
    ("struct row { char name[64]; long score; };", None),
    ("static struct row rows[100000];", None),
    ("", None),
    ("static int cmp(const void *x, const void *y) {", None),
    ("    const struct row *a = x, *b = y;", None),
    (
        "    if (a->score != b->score) return a->score < b->score ? 1 : -1;",
        "    if (a->score != b->score) return a->score < b->score ? -1 : 1;",
    ),
    ("    return strcmp(a->name, b->name);", "    return strcmp(b->name, a->name);"),
    ("}", None),
    ("", None),
    ("int main(int argc, char **argv) {", None),
    ('    FILE *in = fopen(argv[1], "r");', None),
    ("    char line[256];", None),
    ("    int n = 0, first = 1;", None),
    ("    long total = 0;", None),
    ("    if (!in) return 1;", None),
    ("    while (fgets(line, sizeof line, in)) {", None),
    ("        char *comma = strchr(line, ',');", None),
    ("        if (first) { first = 0; continue; }", None),
    ("        if (!comma) continue;", None),
    ("        *comma = 0;", None),
    ("        strncpy(rows[n].name, line, 63);", None),
    ("        rows[n].score = strtol(comma + 1, NULL, 10);", None),
    ("        n++;", None),
    ("    }", None),
    ("    qsort(rows, n, sizeof rows[0], cmp);", None),
    ("    for (int i = 0; i < n; i++) {", "    for (int i = 0; i < n - 1; i++) {"),
    ('        printf("%d %s %ld\\n", i + 1, rows[i].name, rows[i].score);', None),
    ("        total += rows[i].score;", None),
    ("    }", None),
    ('    printf("total %ld\\n", total);', None),
    ("    return 0;", None),
    ("}", None),
]


_RANK_NOUNS = ("leaderboard tool", "ranking script", "standings printer", "league-table tool")
_RANK_SYMPTOMS = (
    "It gives wrong results.",
    "Its output is wrong.",
    "People keep reporting wrong standings from it.",
    "The numbers it prints are not right.",
)


@register
class FixRanking(Family):
    """Repair a leaderboard script with planted bugs (loop bounds, tie order, sign, rank
    base, totals) in the task's language; more bugs with level, plus a bug-line report at
    level 4. The fixed program is run on fresh (fuzzed) inputs."""

    name = "debugging.fix_ranking"
    domain = "debugging"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("rank_lines", (r"one line `<rank> <name> <score>` per data row \(rank from 1\)",),
             (r'for line in text\.splitlines\(\)\[1:\]:', r"enumerate\(rows, 1\)")),
        Rule("score_order", (r"highest score first and ties in byte order of the name",),
             (r"rows\.sort\(key=lambda r: \(-r\[1\], r\[0\]\)\)",)),
        Rule("total_line", (r"then a last line `total <sum of all scores>`",),
             (r'f"total \{{sum\(s for _, s in rows\)\}}',)),
        Rule("ranking_file", (r"write its corrected output for `/app/data/\w+\.csv` to "
                              r"`/app/out/ranking\.txt`",), (r"def test_report_file\(",)),
        Rule("fixed_in_place", (r"Fix it in place \(keep it a .+? program at that path",),
             (r"def test_fixed_program_on_fresh_inputs\(",)),
        Rule("negative_scores", (r"Scores can be negative\.",), (r"rng\.randint\(-20, 40\)",),
             levels=frozenset({2, 3, 4})),
        Rule("other_files", (r"I will run the tool on many other files\.",),
             (r'for case in range\(CFG\["cases"\]\):',), levels=frozenset({3, 4})),
        Rule("bug_lines", (r"`/app/out/bugs\.txt`: the 1-based line numbers",),
             (r'read\("/app/out/bugs\.txt"\)',), levels=frozenset({4})),
        Rule("random_inputs", (r"compared with a reference on random inputs",),
             (r"def test_fixed_program_on_fresh_inputs\(",), drawn=True),
    )  # fmt: skip

    skills: ClassVar[Mapping[str, str]] = {  # the bug is planted when sampled: _plant
        "fix an off-by-one error in loop bounds": "rank_lines",
        "fix tie handling in a custom sort comparator": "score_order",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        lang = ctx.language
        template = {"python": _RANK_PY, "bash": _RANK_SH, "c": _RANK_C}[lang]
        chosen = sorted(plant(ctx, template, {1: 1, 2: 2, 3: 3, 4: 3}[level]))
        buggy = [bug if i in chosen else good for i, (good, bug) in enumerate(template)]
        fixed = [good for good, _ in template]
        program = program_path(lang, "/app/" + ctx.pick(["rank", "leaderboard", "standings"]))
        data = f"/app/data/{ctx.pick(['scores', 'results', 'week_12', 'season', 'finals'])}.csv"
        names = ["zed", "amy", "bob", "cat", "dov", "eli", "fay", "gil", "hal", "ivo", "jan"]
        rows = []
        for _ in range(5 + 4 * level):
            rows.append((rng.choice(names) + str(rng.randint(1, 99)), rng.randint(-10, 60)))
        tie = rows[rng.randrange(len(rows))]
        rows.append(("aa" + tie[0], tie[1]))
        rows.append(("zz" + tie[0], tie[1]))
        rng.shuffle(rows)
        scores = "name,score\n" + "".join(f"{n},{s}\n" for n, s in rows)
        run = {"python": f"python3 {program}", "bash": f"bash {program}", "c": "/tmp/rank"}[lang]
        noun, symptom = ctx.pick(_RANK_NOUNS), ctx.pick(_RANK_SYMPTOMS)
        files = templates(__name__)
        values = {
            "level": level,
            "lang": lang,
            "language_name": LANGUAGE_NAMES[lang],
            "program": program,
            "data": data,
            "noun": noun,
            "symptom": symptom,
            "fuzz": ctx.verifier_kind == "fuzz_equivalence",
            "run": run,
            "fixed": "\n".join(fixed),
            "bug_lines": [str(i + 1) for i in chosen],
        }
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        params = {
            "level": level,
            "language": lang,
            "program": program,
            "bug_lines": [i + 1 for i in chosen],
            "cases": (6 if fuzz else 2) * level,
        }
        prelude = minimal_test_file(params, "")
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render("tests/test_task.py", prelude=prelude),
                "scores.csv": scores,
            },
            files={
                program[len("/app/") :]: "\n".join(buggy) + "\n",
                data[len("/app/") :]: scores,
            },
        )
