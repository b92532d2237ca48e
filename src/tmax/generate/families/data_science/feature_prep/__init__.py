"""Prepare model features from a raw customer table without leakage (the task's files are
the templates beside this module; the reference preparation program in Python or Bash is
``solution/prep.*``, the table generator is ``tests/tables.py`` and the oracle the tests
and the Python program share is ``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    code_note,
    invoke,
    minimal_test_file,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference program of each language: ``solution/prep.<extension>``."""


@cache
def _tables() -> dict:
    """The table generator (``tests/tables.py``): ``SPANS`` and ``make_table``."""
    namespace: dict = {}
    exec(templates(__name__).render("tests/tables.py"), namespace)
    return namespace


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
        make_table = _tables()["make_table"]
        numeric = rng.sample(sorted(_tables()["SPANS"]), 2 + level // 2)
        cities = rng.sample(["oslo", "rome", "kyiv", "lima", "pune", "baku", "riga"], 3)
        train = make_table(rng, level, 20 + 25 * level, numeric, cities)
        train_path = "/app/data/" + ctx.pick(["train.csv", "training.csv", "customers_train.csv"])
        holdout_path = "/app/data/" + ctx.pick(["holdout.csv", "new_customers.csv"])
        out = ctx.pick(["/app/out", "/app/features", "/app/prepared"])
        suffix = ctx.pick(["features", "prepared", "scaled"])
        app_files = {train_path.removeprefix("/app/"): train}
        tests_files = {"train.csv": train}
        if level >= 4:
            holdout = make_table(rng, level, 40, numeric, [*cities, "zug"], True)
            app_files[holdout_path.removeprefix("/app/")] = holdout
            tests_files["holdout.csv"] = holdout
        outputs = {"summary": f"{out}/summary.csv"}
        if level >= 2:
            outputs["features"] = f"{out}/train_{suffix}.csv"
        if level >= 4:
            outputs["apply"] = f"{out}/holdout_{suffix}.csv"
            outputs["drift"] = f"{out}/drift.csv"
        exact = ctx.verifier_kind != "metric_threshold"
        code = ctx.needs_code
        program = program_path(ctx.language, "/app/prep")
        names = {"summary": "summary", "features": "features", "apply": "apply", "drift": "drift"}
        note = ""
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
            note = code_note(ctx, program, usage)
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/prep.sh"
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        values = {
            "level": level,
            "code": code,
            "exact": exact,
            "train_path": train_path,
            "holdout_path": holdout_path,
            "header": train.split("\n", 1)[0],
            "out": out,
            "outputs": outputs,
            "code_note": note,
            "lang": lang,
            "source": source,
            "body": files.render(
                f"solution/prep.{_EXTENSIONS[lang]}", level=level, oracle=oracle
            ).rstrip("\n"),
            "run": invoke(lang, source),
        }
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
        tests = {
            "test_task.py": files.render(
                "tests/test_task.py",
                prelude=minimal_test_file(params, ""),
                tables=files.render("tests/tables.py"),
                oracle=oracle,
            )
        }
        tests.update(tests_files)
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests=tests,
            files=app_files,
        )
