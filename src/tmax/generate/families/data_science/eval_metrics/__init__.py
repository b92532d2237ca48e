"""Score a model's prediction file (the task's files are the templates beside this
module; the reference metrics program in Python, Bash or C is ``solution/metrics.*``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    build_step,
    code_note,
    invoke,
    minimal_test_file,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_LABEL_SETS = [  # what a model predicts (lower case, no spaces)
    ["spam", "ham", "promo", "social", "update", "fraud"],
    ["billing", "login", "shipping", "refund", "bug", "account"],
    ["normal", "benign", "cyst", "nodule", "lesion", "artifact"],
    ["greeting", "booking", "cancel", "payment", "complaint", "question"],
]
_METRIC_COLUMNS = (["truth", "actual", "gold", "expected"], ["pred", "predicted", "guess"],
                   ["score", "prob", "confidence"])  # fmt: skip

_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference metrics program of each language: ``solution/metrics.<extension>``."""


@register
class EvalMetrics(Family):
    """Score a model's prediction file: confusion matrix, per-class precision/recall/F1,
    summary JSON and ROC AUC as level grows (plus messy labels and missing truths); code
    asks for a metrics program fuzzed against an oracle."""

    name = "data_science.eval_metrics"
    domain = "data_science"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("confusion_matrix",
             (r"`(?P<out>/app/\w+)/confusion\.csv`: header `truth,<label>,\.\.\.`",),
             (r"def test_report_files\(", r'out = \[\("confusion\.csv", "confusion", \(\)\)\]',
              r'"out": "{out}"', r'read\(CFG\["out"\] \+ "/" \+ name\)')),
        Rule("per_class_prf",
             (r"`/app/\w+/per_class\.csv`: header `label,precision,recall,f1,support`",),
             (r'out\.append\(\("per_class\.csv", "per_class", \(\)\)\)',),
             levels=frozenset({2, 3, 4})),
        Rule("summary_json", (r"`/app/\w+/summary\.json`: one line",),
             (r'out\.append\(\("summary\.json", "summary", \(\)\)\)', r"decimals = re\.findall\("),
             levels=frozenset({3, 4})),
        Rule("roc_auc", (r"`/app/\w+/auc\.txt`: the ROC AUC of the `\w+` column",),
             (r'out\.append\(\("auc\.txt", "auc", \(positive,\)\)\)',), levels=frozenset({4})),
        Rule("normalise_labels", (r"Labels are case-insensitive and may carry stray spaces",),
             (r"cells\[1\]\.strip\(\)\.lower\(\)",), levels=frozenset({3, 4})),
        Rule("skip_empty_truth", (r"Rows with an empty `\w+` are not evaluated",),
             (r'cells\[1\]\.strip\(\) == ""',), levels=frozenset({4})),
        Rule("newline", (r"Every file ends with a newline",),
             (r"assert got == want", r'got\.endswith\("\\n"\)')),
        Rule("program", (r"reusable .+? program at `/app/metrics",),
             (r"def test_program_equivalence\(",), when={"code": True}),
        Rule("fuzzed_against_reference", (r"compare it with a reference on many random",),
             (r'for case in range\(CFG\["cases"\]\)',), when={"fuzz": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "derive a confusion matrix from label files": "confusion_matrix",
        "compute precision, recall and F1 from prediction files": "per_class_prf",
        "calculate ROC AUC from ranked model scores": "roc_auc",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        labels = sorted(rng.sample(ctx.pick(_LABEL_SETS), 2 + level // 2))
        positive = rng.choice(labels)
        # the input's column names and places are the request's own; reports keep theirs
        truth_col, pred_col, score_col = (ctx.pick(names) for names in _METRIC_COLUMNS)
        source = "/app/data/" + ctx.pick(["predictions.csv", "preds.csv", "scored_rows.csv"])
        out = ctx.pick(["/app/out", "/app/eval", "/app/reports"])
        columns = f"id,{truth_col},{pred_col}" + (f",{score_col}" if level >= 4 else "")
        lines_ = [columns]
        for i in range(rng.randint(25, 40) + 50 * level):
            truth = rng.choice(labels)
            pred = truth if rng.random() < 0.75 else rng.choice(labels)
            shown = truth
            if level >= 3 and rng.random() < 0.15:
                shown = " " + truth.upper() if rng.random() < 0.5 else truth.capitalize() + " "
            if level >= 4 and rng.random() < 0.04:
                shown = ""
            cells = [str(i + 1), shown, pred]
            if level >= 4:
                base = 0.65 if truth == positive else 0.35
                cells.append(f"{min(1.0, max(0.0, rng.gauss(base, 0.2))):.2f}")
            lines_.append(",".join(cells))
        data = "\n".join(lines_) + "\n"
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        program = program_path(ctx.language, "/app/metrics")
        reports = [
            "`<file> confusion`",
            "`<file> per_class`",
            "`<file> summary`",
            "`<file> auc <positive_label>`",
        ][:level]
        usage = (
            "given a predictions file and a report name it prints exactly the content of "
            "the matching file above: " + ", ".join(reports) + "."
        )
        lang = ctx.language if code else "bash"
        tool = program if code else "/tmp/metrics.sh"
        files = templates(__name__)
        values = {
            "level": level,
            "code": code,
            "fuzz": fuzz,
            "source": source,
            "columns": columns,
            "truth_col": truth_col,
            "pred_col": pred_col,
            "score_col": score_col,
            "positive": positive,
            "out": out,
            "code_note": code_note(ctx, program, usage) if code else "",
            "lang": lang,
            "tool": tool,
            "body": files.render(f"solution/metrics.{_EXTENSIONS[lang]}").rstrip("\n"),
            "build": build_step(lang, tool, "/app/metrics"),
            "run": invoke(lang, tool, "/app/metrics"),
        }
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "positive": positive,
            "out": out,
            "columns": columns,
            "fuzz": fuzz,
            "cases": (3 if not fuzz else 6) * level,
        }
        tests = files.render("tests/test_task.py", prelude=minimal_test_file(params, ""))
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={"test_task.py": tests, "predictions.csv": data},
            files={source.removeprefix("/app/"): data},
        )
