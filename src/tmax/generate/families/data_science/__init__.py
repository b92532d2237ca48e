"""Task families of the data_science domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    code_note,
    invoke,
    minimal_test_file,
    numbered,
    program_path,
    program_setup,
)
from tmax.generate.families.data_science import (  # noqa: F401  (registers them first, in order)
    classifier,
    eval_metrics,
    slide_stats,
)
from tmax.generate.family import Draft, Family, RenderContext, register

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
