"""Summarise service health-check logs into a status report and serve it on two
protocols (the task's files are the templates beside this module; the reference report in
Python or Bash is ``solution/health_report.*``, the daemon ``solution/statusd.py``, the
oracle the tests, the Python report and the daemon share is ``tests/oracle.py``)."""

from __future__ import annotations

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

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference report of each language: ``solution/health_report.<extension>``."""


@register
class HealthService(Family):
    """Summarise service health-check logs into a status report (availability, flapping,
    summary by level) and, for services/multi_protocol, serve it on a line-based TCP port and
    an HTTP port that must agree."""

    name = "system_administration.health_service"
    domain = "system_administration"
    verifier_kinds = frozenset({"exact_text", "multi_protocol"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("status", (r"`/app/out/status\.txt`: one line `SERVICE STATE FAILURES",),
             (r'read\("/app/out/status\.txt"\)',)),
        Rule("availability", (r"AVAILABILITY is the percentage of `ok` checks",),
             (r'line \+= " " \+ availability\(e\)',), levels=frozenset({2, 3, 4})),
        Rule("flapping", (r"`/app/out/flapping\.txt`: services with a `fail`",),
             (r'read\("/app/out/flapping\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/health_report",),
             (r"def test_program_fresh\(",), when={"code": True}),
        Rule("status_daemon", (r"leave a status daemon running",),
             (r"def test_service_protocols\(",), when={"service": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        services = sorted(
            rng.sample(
                ["api", "auth", "billing", "cache", "db", "mail", "queue", "search", "web"],
                3 + level,
            )
        )
        app_files: dict[str, str | bytes] = {}
        logs = []
        for h in range(1 if level == 1 else min(level, 3)):
            lines = []
            for _ in range(15 + 10 * level):
                state = rng.choice(["ok"] * 5 + ["fail", "degraded"])
                lines.append(
                    f"2024-05-{rng.randint(1, 7):02d}T{rng.randint(0, 23):02d}:"
                    f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z "
                    f"{rng.choice(services)} {state} {rng.randint(2, 950)}ms"
                )
                if level >= 2 and rng.random() < 0.06:
                    lines.append("-- probe restarted --")
            name = f"health/probe{h + 1}.log"
            app_files[name] = "\n".join(lines) + "\n"
            logs.append("/app/" + name)
        serve = ctx.needs_service or ctx.verifier_kind == "multi_protocol"
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/health_report")
        code = ctx.needs_code
        line_port = 7000 + rng.randint(100, 899)
        http_port = line_port + 1000
        cfg = {
            "level": level,
            "logs": logs,
            "lang": lang,
            "program": prog,
            "code": code,
            "service": serve,
            "line_port": line_port,
            "http_port": http_port,
            "fresh": {1: 3, 2: 5, 3: 7, 4: 9}[level],
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/health_report.sh"
        values = {
            "level": level,
            "code": code,
            "serve": serve,
            "line_port": line_port,
            "http_port": http_port,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "logs": logs,
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "oracle": oracle,
        }
        values["source"] = files.render(
            f"solution/health_report.{_EXTENSIONS[lang]}", **values
        ).strip()
        if serve:
            values["server"] = files.render("solution/statusd.py", **values).strip()
            values["start_service"] = start_detached_service(
                "python3 /app/statusd.py", line_port, "/app/statusd.log"
            )
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), oracle=oracle
                )
            },
            files=app_files,
            keep_agent_processes=serve,
        )
