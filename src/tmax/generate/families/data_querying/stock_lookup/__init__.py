"""Stock and price queries over warehouse CSVs, as a tool and a service (the task's files
are the templates beside this module; the reference query tool in Python or Bash is
``solution/lookup.*``, the generator and oracle the tests and this module share is
``tests/stock.py``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    PROGRAM_SERVER_PY,
    code_note,
    invoke,
    minimal_test_file,
    program_path,
    program_setup,
    wait_port,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


@functools.cache
def _stock() -> dict[str, Any]:
    """``make_stock`` and ``answer_all`` of ``tests/stock.py`` (pasted into the tests)."""
    namespace: dict[str, Any] = {}
    exec(templates(__name__).render("tests/stock.py"), namespace)
    return namespace


@register
class StockLookup(Family):
    """Answer stock/price queries over warehouse CSVs; level adds price, movement and
    low-stock queries. Code asks for a query tool; services (or multi_protocol) ask for a
    query service on a line-protocol port (plus an HTTP/JSON port)."""

    name = "data_querying.stock_lookup"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "multi_protocol"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("answers_file", (r"Answer every query in `/app/queries\.txt` and write one answer per "
                              r"line, in order, to `/app/answers\.txt`",),
             (r"def test_answers_file\(",)),
        Rule("quantities_add",
             (r"a sku/warehouse pair may appear more than once, quantities add up",),
             (r"rows\.append\(rows\[rng\.randrange\(len\(rows\)\)\]\[:2\]",
              r"stock\[\(sku, wh\)\] = stock\.get\(\(sku, wh\), 0\) \+ int\(qty\)")),
        Rule("stock_query", (r"`STOCK <sku>`: total quantity of the sku over all warehouses",),
             (r'if cmd == "STOCK":',)),
        Rule("unknown_or_error", (r"An unknown sku or warehouse is answered `UNKNOWN`, any other "
                                  r"malformed query `ERROR`",),
             (r'queries \+= \["STOCK Q999", rng\.choice\(\["PRICE ', r'out\.append\("ERROR"\)')),
        Rule("value_query", (r"`VALUE <warehouse>`: sum of quantity × price_cents",),
             (r'elif cmd == "VALUE":',), levels=frozenset({2, 3, 4})),
        Rule("unpriced_zero", (r"a sku without a price counts as 0",),
             (r"priced = \[s for s in skus if s != unpriced", r"price\.get\(s, 0\)"),
             levels=frozenset({2, 3, 4})),
        Rule("moves_applied", (r"`/app/data/moves\.csv` \(`sku,warehouse,delta`: stock movements",),
             (r'files\["moves\.csv"\] = ', r'rows\("stock\.csv"\) \+ rows\("moves\.csv"\)'),
             levels=frozenset({3, 4})),
        Rule("warehouse_query", (r"`WAREHOUSE <warehouse>`: `<n> <units>`",),
             (r'elif cmd == "WAREHOUSE":',), levels=frozenset({3, 4})),
        Rule("low_query", (r"`LOW <n>`: the skus whose total quantity is below n",),
             (r'elif cmd == "LOW":',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/lookup",),
             (r"def test_program_on_fresh_data\(",), when={"code": True}),
        Rule("line_service", (r"leave a query service running in the background: on TCP port "
                              r"(?P<port>\d+)",),
             (r"def test_service\(", r'"line_port": {port}\b'), when={"service": True}),
        Rule("http_service", (r"must also speak HTTP on port (?P<port>\d+)",),
             (r'if CFG\["http_port"\]:', r'"http_port": {port}\b'), when={"http": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "build grouped aggregate queries with HAVING filters": "low_query",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        warehouses = ["ams", "ber", "cdg", "dub", "lis", "mad", "waw", "prg"]
        files, queries = _stock()["make_stock"](rng, level, 6 + 6 * level, warehouses)
        http = ctx.verifier_kind == "multi_protocol"
        service = ctx.needs_service or http
        code = ctx.needs_code
        line_port = rng.randint(7100, 7899)
        http_port = rng.randint(8100, 8899) if http else 0
        program = program_path(ctx.language, "/app/lookup")
        usage = (
            "it takes the data folder as its only argument, reads queries from stdin (one "
            "per line) and prints one answer line per query."
        )
        folder = templates(__name__)
        # --- solution: the reference tool (Python when only a service is asked for)
        lang = ctx.language if code else ("python" if service else "bash")
        source = program if code else program_path(lang, "/tmp/lookup")
        body = folder.render("solution/lookup.py" if lang == "python" else "solution/lookup.sh")
        values = {
            "level": level,
            "code": code,
            "service": service,
            "http": http,
            "program": program,
            "line_port": line_port,
            "http_port": http_port,
            "code_note": code_note(ctx, program, usage) if code else "",
            "setup": "\n".join(program_setup(lang, source, body)),
            "run": invoke(lang, source),
        }
        if service:
            cmd = ["python3" if lang == "python" else "bash", source, "/app/data"]
            values["server"] = (
                PROGRAM_SERVER_PY.replace("__PROGRAM__", repr(cmd))
                .replace("__LINE_PORT__", str(line_port))
                .replace("__HTTP_PORT__", str(http_port))
                .replace("__PREFIX__", '""')
                .rstrip("\n")
            )
            values["wait_line_port"] = wait_port(line_port)
            values["wait_http_port"] = wait_port(http_port)
        params = {
            "level": level,
            "code": code,
            "service": service,
            "http": http,
            "language": ctx.language,
            "program": program,
            "line_port": line_port,
            "http_port": http_port,
        }
        tests = {
            "test_task.py": folder.render(
                "tests/test_task.py",
                head=minimal_test_file(params, "", service=True),
                generator=folder.render("tests/stock.py"),
            )
        }
        tests.update(files)
        tests["queries.txt"] = "\n".join(queries) + "\n"
        app = {f"data/{name}": text_ for name, text_ in files.items()}
        app["queries.txt"] = "\n".join(queries) + "\n"
        return Draft(
            instruction=folder.render("instruction.md", **values),
            solution=folder.render("solution/solve.sh", **values),
            tests=tests,
            files=app,
            keep_agent_processes=service,
        )
