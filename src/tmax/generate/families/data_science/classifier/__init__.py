"""Train a classifier on labelled CSV rows and predict a test file (the task's files are
the templates beside this module; the reference nearest-centroid classifier in Python,
Bash or C is ``solution/classify.*``, the data generator the tests and the family share
is ``tests/blobs.py``)."""

from __future__ import annotations

from functools import cache

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    PROGRAM_SERVER_PY,
    build_step,
    code_note,
    invoke,
    minimal_test_file,
    program_path,
    wait_port,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_LABELS = ["alpha", "beta", "gamma", "delta", "omega"]
_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference classifier of each language: ``solution/classify.<extension>``."""


@cache
def _blobs() -> dict:
    """The data generator (``tests/blobs.py``): ``make_centers``, ``make_rows``, ``table``."""
    namespace: dict = {}
    exec(templates(__name__).render("tests/blobs.py"), namespace)
    return namespace


@register
class Classifier(Family):
    """Train a classifier on labelled CSV rows and predict a test file; scored by held-out
    accuracy (threshold rises with level; more classes, missing cells, noise columns).
    Code asks for a train+predict program run on a fresh split; services for a predictor."""

    name = "data_science.classifier"
    domain = "data_science"
    verifier_kinds = frozenset({"metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    services = True
    rules = (
        Rule("predictions_file", (r"`/app/out/predictions\.txt`: one predicted label per row",),
             (r"def test_predictions_accuracy\(",)),
        Rule("accuracy_threshold", (r"accuracy of at least (?P<threshold>0\.\d[1-9]?)",),
             (r'"threshold": {threshold}[,}}]', r'assert acc >= CFG\["threshold"\]')),
        Rule("class_counts", (r"`/app/out/class_counts\.csv`: header `label,count`",),
             (r'read\("/app/out/class_counts\.csv"\)',), levels=frozenset({2, 3, 4})),
        Rule("missing_cells", (r"Some feature cells are empty",),
             (r'"missing": 0\.06', r'assert acc >= CFG\["threshold"\]'), levels=frozenset({3, 4})),
        Rule("noise_columns", (r"Not every column is informative",),
             (r'"noise": 2', r'assert acc >= CFG\["threshold"\]'), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/classify",),
             (r"def test_program_on_fresh_split\(",), when={"code": True}),
        Rule("prediction_service",
             (r"leave a prediction service running on 127\.0\.0\.1 port \d+",),
             (r"def test_service\(",), when={"service": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        blobs = _blobs()
        k = {1: 2, 2: 3, 3: 3, 4: 4}[level]
        dims = {1: 2, 2: 3, 3: 3, 4: 4}[level]
        noise = 2 if level >= 4 else 0
        missing = 0.06 if level >= 3 else 0.0
        labels = sorted(rng.sample(_LABELS, k))
        threshold = {1: 0.8, 2: 0.84, 3: 0.86, 4: 0.88}[level]
        centers = blobs["make_centers"](rng, k, dims)
        train = blobs["make_rows"](rng, centers, labels, 60 + 60 * level, noise, missing)
        test = blobs["make_rows"](rng, centers, labels, 40 + 30 * level, noise, missing)
        port = rng.randint(7100, 7899)
        code, service = ctx.needs_code, ctx.needs_service
        what = ctx.pick(["sensor readings", "customer features", "lab measurements"])
        d_all = dims + noise
        program = program_path(ctx.language, "/app/classify")
        usage = (
            "`<train.csv> <test.csv>` trains on the first file and prints one predicted "
            "label per row of the second file (which has a header and no label column), "
            "in order. It must keep the accuracy on a fresh split from the same source."
        )
        # --- solution
        lang = ctx.language if code else "python"
        source = program if code else "/tmp/classify.py"
        binary = "/app/classify"
        run = invoke(lang, source, binary)
        files = templates(__name__)
        server = ""
        if service:
            cmd = [*run.split(), "/app/data/train.csv", "/dev/stdin"]
            header = ",".join(f"f{i + 1}" for i in range(d_all)) + "\n"
            server = (
                PROGRAM_SERVER_PY.replace("__PROGRAM__", repr(cmd))
                .replace("__LINE_PORT__", str(port))
                .replace("__HTTP_PORT__", "0")
                .replace("__PREFIX__", repr(header))
            )
        values = {
            "level": level,
            "code": code,
            "service": service,
            "what": what,
            "d_all": d_all,
            "k": k,
            "threshold": f"{threshold:.2f}",
            "port": port,
            "program": program,
            "code_note": code_note(ctx, program, usage) if code else "",
            "label_column": d_all + 1,
            "lang": lang,
            "source": source,
            "body": files.render(f"solution/classify.{_EXTENSIONS[lang]}").rstrip("\n"),
            "build": build_step(lang, source, binary),
            "run": run,
            "server": server.rstrip("\n"),
            "wait_port": wait_port(port),
        }
        params = {
            "level": level,
            "code": code,
            "service": service,
            "language": ctx.language,
            "program": program,
            "labels": labels,
            "dims": dims,
            "noise": noise,
            "missing": missing,
            "threshold": threshold,
            "centers": centers,
            "port": port,
        }
        tests = files.render(
            "tests/test_task.py",
            prelude=minimal_test_file(params, "", service=True),
            blobs=files.render("tests/blobs.py"),
        )
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": tests,
                "truth.txt": "\n".join(lab for _, lab in test) + "\n",
            },
            files={
                "data/train.csv": blobs["table"](train, True),
                "data/test.csv": blobs["table"](test, False),
            },
            keep_agent_processes=service,
        )
