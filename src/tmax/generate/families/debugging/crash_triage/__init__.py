"""Probe a stripped calculator binary to classify which input files crash it (the task's
files are the templates beside this module: the calculator's source, built stripped by
the image, is ``environment/app/src/calc.c``; the reference triage program in Python or
Bash is ``solution/triage.*``)."""

from __future__ import annotations

import json

from tmax.generate.audit import Rule
from tmax.generate.builders import LANGUAGE_NAMES, invoke, minimal_test_file, program_path
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_TRIAGE_OPENERS = (
    "`{binary}` is a stripped binary from a vendor (no source, no symbols), and some of "
    "our job files in `{inputs}/` make it crash or fail.",
    "The vendor only ships `{binary}` stripped, without source or symbols. A few of the job "
    "files in `{inputs}/` kill it or make it fail, and I need to know which and how before "
    "I open a ticket.",
    "We feed the job files in `{inputs}/` to `{binary}`, a closed, stripped vendor binary "
    "(no symbols), and some of them make it crash or fail.",
    "I have to tell the vendor exactly which of the job files in `{inputs}/` break "
    "`{binary}`; the binary is stripped and we have no source for it.",
)
"""Opening sentences of the crash-triage task (filled with the binary and input folder)."""

_TRIAGE_BIN_DIRS = ("/app/bin", "/app/vendor", "/app/tools")
_TRIAGE_BINARIES = ("calc", "solver", "loadcalc", "beamcalc", "evalcalc")
_TRIAGE_INPUTS = ("/app/inputs", "/app/jobs", "/app/batch", "/app/cases", "/app/queue")
_TRIAGE_OUTS = ("/app/out", "/app/report", "/app/findings", "/app/crashes")
_TRIAGE_PROGRAMS = ("/app/triage", "/app/crash_sort", "/app/probe_jobs", "/app/classify")


@register
class CrashTriage(Family):
    """Probe a stripped calculator binary to classify which input files crash it (signal or
    exit code), find the first bad line, and craft single-line reproducers as level grows;
    code asks for a reusable triage program run on fresh inputs."""

    name = "debugging.crash_triage"
    domain = "debugging"
    verifier_kinds = frozenset({"exact_text"})
    fixture_kinds = frozenset({"stripped_binary"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("status_report", (r"`(?P<out>/app/\w+)/status\.csv`: header `file,status`",),
             (r'check\(CFG\["out"\] \+ "/status\.csv", expect\(files, "status"\)\)',
              r'"out": "{out}"')),
        Rule("first_bad", (r"`(?P<out>/app/\w+)/first_bad\.csv`: header `file,line`",),
             (r'check\(CFG\["out"\] \+ "/first_bad\.csv", expect\(files, "first"\)\)',
              r'"out": "{out}"'),
             levels=frozenset({3, 4})),
        Rule("reproducers",
             (r"`(?P<out>/app/\w+)/repro_fpe\.txt` and `(?P=out)/repro_segv\.txt`: single",),
             (r"def test_reproducers\(", r'"out": "{out}"'), levels=frozenset({4})),
        Rule("counts",
             (r'`(?P<out>/app/\w+)/counts\.json`: `\{"ok": n, "exit": n, "signal": n\}`',),
             (r"def test_counts\(", r'"out": "{out}"'), levels=frozenset({4})),
        Rule("untouched", (r"Do not modify the binary or the inputs\.",),
             (r"def test_untouched\(",), levels=frozenset({2, 3, 4})),
        Rule("triage_program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_triage_program\(", r'"program": "{program}"'), when={"code": True}),
        Rule("first_mode", (r"`<dir> first` prints the first-bad-line table",),
             (r'\["first"\] if CFG\["level"\] >= 3',), levels=frozenset({3, 4}),
             when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        ops = dict(
            zip(
                ["add", "div", "get"],
                ctx.pick(
                    [("add", "div", "get"), ("plus", "quot", "load"), ("sum", "ratio", "peek")]
                ),
                strict=True,
            )
        )
        size = rng.randint(4, 9)
        slack = rng.randint(0, 3)
        limit = size + slack
        badexit = rng.choice([2, 3, 4, 7])
        table = ", ".join(str(rng.randint(1, 99)) for _ in range(size))
        jobs: dict[str, str] = {}
        stem = ctx.pick(("job", "run", "case", "batch", "deck"))
        kinds = ["ok", "fpe", "segv", "bad"]
        for i in range(2 + 2 * level):
            kind = kinds[i % 4] if i < 4 else rng.choice(kinds)
            lines = []
            for _ in range(rng.randint(2, 3 + 2 * level)):
                r = rng.random()
                if r < 0.4:
                    lines.append(f"{ops['add']} {rng.randint(-99, 99)} {rng.randint(-99, 99)}")
                elif r < 0.7:
                    lines.append(f"{ops['div']} {rng.randint(-99, 99)} {rng.randint(1, 9)}")
                elif r < 0.9:
                    lines.append(f"{ops['get']} {rng.randint(0, limit - 1)}")
                else:
                    lines.append("# checkpoint")
            at = rng.randint(1, len(lines))
            trigger = {
                "ok": None,
                "fpe": f"{ops['div']} {rng.randint(1, 99)} 0",
                "segv": f"{ops['get']} {rng.choice([limit + rng.randint(0, 5), -1])}",
                "bad": rng.choice(["mul 3 4", "halt", f"{ops['add']}"]),
            }[kind]
            if trigger:
                lines.insert(at, trigger)
            jobs[f"{stem}_{i + 1:02d}.txt"] = "\n".join(lines) + "\n"
        code = ctx.needs_code
        binary = f"{ctx.pick(_TRIAGE_BIN_DIRS)}/{ctx.pick(_TRIAGE_BINARIES)}"
        inputs, out = ctx.pick(_TRIAGE_INPUTS), ctx.pick(_TRIAGE_OUTS)
        opener = rng.choice(_TRIAGE_OPENERS).format(binary=binary, inputs=inputs)
        program = program_path(ctx.language, ctx.pick(_TRIAGE_PROGRAMS))
        lang = ctx.language if code else "bash"
        src = program if code else "/tmp/triage.sh"
        files = templates(__name__)
        values = {
            "level": level,
            "code": code,
            "opener": opener,
            "language_name": LANGUAGE_NAMES[ctx.language],
            "program": program,
            "binary": binary,
            "inputs": inputs,
            "out": out,
            "ops": ops,
            "first": sorted(jobs),
            "lang": lang,
            "src": src,
            "body": files.render(
                "solution/triage.py" if lang == "python" else "solution/triage.sh", binary=binary
            ).rstrip("\n"),
            "run": invoke(lang, src),
        }
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "ops": ops,
            "limit": limit,
            "badexit": badexit,
            "binary": binary,
            "inputs": inputs,
            "out": out,
        }
        app = {f"{inputs[len('/app/') :]}/{name}": body_ for name, body_ in jobs.items()}
        app["src/calc.c"] = files.render(
            "environment/app/src/calc.c",
            size=size,
            slack=slack,
            values=table,
            **ops,
            badexit=badexit,
        )
        prelude = minimal_test_file(params, "")
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render("tests/test_task.py", prelude=prelude),
                "inputs.json": json.dumps(jobs),
            },
            files=app,
            dockerfile_steps=(
                f"RUN mkdir -p {binary.rsplit('/', 1)[0]} && gcc -O2 -s -o {binary}"
                " /app/src/calc.c && rm -rf /app/src",
            ),
        )
