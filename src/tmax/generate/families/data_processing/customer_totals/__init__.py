"""Per-customer totals of exported payment rows (the task's files are the templates
beside this module; the reference aggregator in Python, Bash or C is
``solution/totals.*``, the oracle the tests, the Python program and the lookup service
share is ``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    csv_text,
    language_or_bash,
    manifest_test_file,
    program_path,
    start_detached_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference aggregator of each language: ``solution/totals.<extension>``."""


@register
class CustomerTotals(Family):
    """Group exported payment rows into per-customer totals (dedupe, refunds, counts by
    level); code asks for a reusable aggregator, services for a JSON lookup service."""

    name = "data_processing.customer_totals"
    domain = "data_processing"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    services = True
    rules = (
        Rule("totals_csv", (r"`/app/out/totals\.csv`: header `customer,total",),
             (r"def test_totals_file\(",)),
        Rule("settled_only", (r"only rows with status `settled` count",),
             (r'if status == "settled"',), levels=frozenset({1, 2})),
        Rule("refunds_subtract", (r"`refund` rows subtract it",),
             (r'status == "refund" and level >= 3',), levels=frozenset({3, 4})),
        Rule("dedupe_txn_id", (r"a `txn_id` counts once",), (r"if txn in seen:",),
             levels=frozenset({2, 3, 4})),
        Rule("dedupe_across_inputs", (r"duplicates are judged across all of them",),
             (r"if txn in seen:",), levels=frozenset({2, 3, 4}), when={"code": True}),
        Rule("duplicates_file", (r"`/app/out/duplicates\.txt`",),
             (r'read\("/app/out/duplicates\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("top3_file", (r"`/app/out/top3\.txt`",), (r'read\("/app/out/top3\.txt"\)',),
             levels=frozenset({3, 4})),
        Rule("count_column", (r"count = number of counted rows",),
             (r'head = "customer,total,count" if level >= 4',), levels=frozenset({4})),
        Rule("summary_and_checksums", (r"`/app/out/summary\.json`", r"checksums\.sha256"),
             (r'read\("/app/out/summary\.json"\)', r"check_manifest\("),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/totals",), (r"def test_program_fresh\(",),
             when={"code": True}),
        Rule("lookup_service", (r"keep a lookup service running on 127\.0\.0\.1:\d+",),
             (r"def test_service\(",), when={"service": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "group transactions and compute per-customer totals": "totals_csv"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        customers = rng.sample(
            [
                "acme",
                "bolt",
                "cedar",
                "delta",
                "ember",
                "fjord",
                "gale",
                "harbor",
                "iris",
                "juniper",
            ],
            3 + level,
        )
        app_files: dict[str, str | bytes] = {}
        inputs, all_rows = [], []
        for f in range(min(level, 3)):
            rows = []
            for _ in range(6 + 6 * level):
                if all_rows and level >= 2 and rng.random() < 0.15:
                    rows.append(rng.choice(all_rows))
                    continue
                row = (
                    f"T{rng.randint(10000, 99999)}",
                    f"2024-{f + 3:02d}-{rng.randint(1, 28):02d}",
                    rng.choice(customers),
                    f"{rng.randint(1, 900)}.{rng.randint(0, 99):02d}",
                    rng.choice(["settled"] * 3 + ["refund", "pending", "failed"]),
                )
                rows.append(row)
                all_rows.append(row)
            name = f"exports/payments_2024_{f + 3:02d}.csv"
            app_files[name] = csv_text(["txn_id", "date", "customer", "amount", "status"], rows)
            inputs.append("/app/" + name)
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/totals")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        port = 8000 + rng.randint(100, 899)
        cfg = {
            "level": level,
            "inputs": inputs,
            "lang": lang,
            "program": prog,
            "code": code,
            "service": ctx.needs_service,
            "port": port,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 6 * level + 4,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/totals.sh"
        values = {
            "level": level,
            "code": code,
            "service": ctx.needs_service,
            "port": port,
            "lang": lang,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "inputs": inputs,
            "tool": tool,
            "run": {"python": f"python3 {tool}", "bash": f"bash {tool}"}.get(lang, "/tmp/totals"),
            "source": files.render(
                f"solution/totals.{_EXTENSIONS[lang]}", level=level, oracle=oracle
            ).strip(),
        }
        if ctx.needs_service:
            values["server"] = files.render(
                "solution/totals_service.py", level=level, port=port, oracle=oracle
            ).strip()
            values["start_service"] = start_detached_service(
                "python3 /app/totals_service.py", port, "/app/totals_service.log"
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
            keep_agent_processes=ctx.needs_service,
        )
