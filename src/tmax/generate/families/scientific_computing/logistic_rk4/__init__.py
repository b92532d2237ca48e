"""Integrate logistic-growth cases with RK4 (the task's files are the templates beside this
module; the reference solver in Python, Bash or C is ``solution/logistic.*``, the solver
service ``solution/solver_service.py``, the oracle the tests, the Python solver and the
service share is ``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    language_or_bash,
    manifest_test_file,
    program_path,
    start_detached_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference solver of each language: ``solution/logistic.<extension>``."""


@register
class LogisticRK4(Family):
    """Integrate logistic-growth cases with fixed-step RK4 (or to a stated accuracy) and
    report final populations; level adds case files and derived outputs, code asks for a
    reusable solver, services a solver HTTP endpoint."""

    name = "scientific_computing.logistic_rk4"
    domain = "scientific_computing"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    services = True
    rules = (
        Rule("final_files", (r"write `/app/out/batchN\.final` with one line `name value` per "
                             r"case, in input order",),
             (r"def test_final_values\(", r"assert list\(got\) == list\(want\)")),
        Rule("rk4_method", (r"with the classic fourth-order Runge-Kutta method, fixed step h",),
             (r"close\(got\[name\], want\[name\], 1e-6\)",), when={"mode": "rk4"}),
        Rule("exact_accuracy", (r"relative error at most \S+ against the exact solution",),
             (r'assert err <= CFG\["tol"\]',), when={"mode": "metric"}),
        Rule("trajectory", (r"`/app/out/trajectory\.tsv`: for the first case of batch1, the RK4 "
                            r"state after every step",),
             (r'read\("/app/out/trajectory\.tsv"\)',), levels=frozenset({2, 3, 4})),
        Rule("largest", (r"`/app/out/largest\.txt`: the name of the case with the largest",),
             (r'read\("/app/out/largest\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r'`/app/out/summary\.json`: `\{"cases": N\}`',),
             (r'read\("/app/out/summary\.json"\)',), levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`: sha256sum lines for every \.final",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/logistic",),
             (r"def test_program_fresh\(",), when={"code": True}),
        Rule("service", (r"HTTP service running on 127\.0\.0\.1:\d+: `GET /solve\?",),
             (r"def test_service\(",), when={"service": True}),
        Rule("service_bad_request", (r"a request missing or garbling a parameter gets 400",),
             (r"assert status == 400",), when={"service": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "implement a fourth-order Runge-Kutta ODE solver": "rk4_method"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "metric" if ctx.verifier_kind == "metric_threshold" else "rk4"
        tol = {1: 1e-3, 2: 1e-5, 3: 1e-7, 4: 1e-9}[level]
        app_files: dict[str, str | bytes] = {}
        pairs = []
        for f in range(1 + (level + 1) // 2):
            lines = ["# name r K y0 h steps"]
            for c in range(2 + level + f):
                k = rng.choice([40.0, 100.0, 250.0, 1000.0])
                lines.append(
                    f"{rng.choice(['algae', 'yeast', 'ecoli', 'moss'])}{f}{c} "
                    f"{rng.uniform(0.1, 1.8):.3f} {k:g} {rng.uniform(0.02, 0.6) * k:.4f} "
                    f"{rng.choice([0.01, 0.02, 0.05, 0.1])} {rng.randint(20, 300)}"
                )
            app_files[f"cases/batch{f + 1}.txt"] = "\n".join(lines) + "\n"
            pairs.append([f"/app/cases/batch{f + 1}.txt", f"/app/out/batch{f + 1}.final"])
            if level == 1:
                break
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/logistic")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        port = 8000 + rng.randint(100, 899)
        cfg = {
            "level": level,
            "mode": mode,
            "tol": tol,
            "pairs": pairs,
            "lang": lang,
            "program": prog,
            "code": code,
            "service": ctx.needs_service,
            "port": port,
            "fresh": 3 if ctx.verifier_kind != "fuzz_equivalence" else 5 * level + 5,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/logistic.sh"
        values = {
            "level": level,
            "mode": mode,
            "tol": f"{tol:g}",
            "code": code,
            "service": ctx.needs_service,
            "port": port,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "lang": lang,
            "pairs": pairs,
            "finals": [out.rsplit("/", 1)[1] for _, out in pairs],
            "tool": tool,
            "run": {"python": f"python3 {tool}", "bash": f"bash {tool}"}.get(lang, "/tmp/logistic"),
            "source": files.render(
                f"solution/logistic.{_EXTENSIONS[lang]}",
                oracle=oracle,
                mode=mode,
                metric=int(mode == "metric"),
            ).strip(),
            "service_source": files.render(
                "solution/solver_service.py", oracle=oracle, port=port
            ).strip(),
            "start_service": start_detached_service(
                "python3 /app/solver_service.py", port, "/app/solver_service.log"
            ),
        }
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), oracle=oracle
                )
            },
            files=app_files,
            keep_agent_processes=ctx.needs_service,
        )
