"""Revenue reports over a shop's orders/customers sqlite database (the task's files are
the templates beside this module; the reference report program in Python or Bash is
``solution/report.*``, the shop generator the tests and this module share is
``tests/shop.py``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    code_note,
    invoke,
    minimal_test_file,
    program_path,
    program_setup,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_FIRST = ["Ada", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lu", "Max"]
_LAST = ["Park", "Reyes", "Stone", "Olsen", "Ng", "Fox", "Hale", "Moss", "Kerr", "Voss", "Lind"]
_REGIONS = ["north", "south", "east", "west", "central", "coast", "valley"]
_CATEGORIES = ["books", "garden", "toys", "kitchen", "sports", "audio", "office", "pets"]
_STATUSES = ["completed", "completed", "completed", "cancelled", "pending"]
# Drawn per task so that instructions differ in the names a real shop would pick.
_SHOP_DATABASES = ["shop", "store", "sales", "webshop", "orders"]
_SHOP_OUT_DIRS = ["out", "reports", "exports", "monthly", "figures"]
_SHOP_PROGRAMS = ["report", "sales_report", "make_reports", "shop_report"]
_SHOP_OPENERS = [
    "Our shop data lives in the sqlite database `{db}` (tables {tables}).",
    "Everything the online shop sells is recorded in the sqlite file `{db}`, with tables {tables}.",
    "I have a copy of the shop's sqlite database at `{db}`; it holds the tables {tables}.",
    "The orders behind our revenue figures sit in `{db}`, a sqlite database with tables {tables}.",
    "The data to use is the sqlite database `{db}`, which has the tables {tables}.",
]
_SHOP_ASKS = [
    "I need these reports:",
    "Please produce the following reports:",
    "These are the reports I am after:",
    "Write these report files:",
]


@functools.cache
def _shop() -> dict[str, Any]:
    """``make_shop`` and ``shop_sql`` of ``tests/shop.py`` (pasted into the tests)."""
    namespace: dict[str, Any] = {}
    exec(templates(__name__).render("tests/shop.py"), namespace)
    return namespace


def _shop_queries(level: int, min_orders: int) -> dict[str, str]:
    live = " AND c.is_test = 0" if level >= 3 else ""
    base = (
        "FROM orders o JOIN customers c ON c.id = o.customer_id "
        "JOIN order_items oi ON oi.order_id = o.id JOIN products p ON p.id = oi.product_id "
        f"WHERE o.status = 'completed'{live}"
    )
    spend = (
        "SELECT c.id AS customer_id, c.name AS name, c.region AS region, "
        f"COUNT(DISTINCT o.id) AS orders, SUM(oi.qty * p.price_cents) AS spend_cents {base} "
        "GROUP BY c.id"
    )
    q = {
        "region_revenue.csv": (
            f"SELECT c.region AS region, SUM(oi.qty * p.price_cents) AS revenue_cents {base} "
            "GROUP BY c.region ORDER BY revenue_cents DESC, region ASC;"
        ),
        "top_customers.csv": (
            f"SELECT customer_id, name, orders, spend_cents FROM ({spend} "
            f"HAVING COUNT(DISTINCT o.id) >= {min_orders}) "
            "ORDER BY spend_cents DESC, customer_id ASC;"
        ),
        "pivot_base": base,
        "region_leaders.csv": (
            "SELECT region, customer_id, name, spend_cents FROM (SELECT *, ROW_NUMBER() OVER "
            "(PARTITION BY region ORDER BY spend_cents DESC, customer_id ASC) AS rk "
            f"FROM ({spend})) WHERE rk = 1 ORDER BY region;"
        ),
        "summary.json": (
            "SELECT json_object("
            f"'completed_orders', (SELECT COUNT(DISTINCT o.id) {base}), "
            "'cancelled_orders', (SELECT COUNT(*) FROM orders o JOIN customers c "
            f"ON c.id = o.customer_id WHERE o.status = 'cancelled'{live}), "
            f"'revenue_cents', (SELECT SUM(oi.qty * p.price_cents) {base}), "
            f"'regions', (SELECT COUNT(DISTINCT c.region) {base}));"
        ),
    }
    return q


@register
class SalesReport(Family):
    """Report revenue from an orders/customers sqlite database (joins, HAVING, pivot,
    window ranks, JSON); level adds deliverables and the test-account rule, code asks
    for a reusable report program run on fresh databases."""

    name = "data_querying.sales_report"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("region_revenue",
             (r"`/app/(?P<out>\w+)/region_revenue\.csv` with header `region,revenue_cents`",),
             (r'files\["region_revenue\.csv"\] = ', r"def test_outputs_match_database\(",
              r'"out_dir": "/app/{out}"', r'check_dir\(CFG\["out_dir"\]')),
        Rule("completed_only", (r"Only orders with status `completed` count as revenue",),
             (r'o\[3\] == "completed"',)),
        Rule("csv_format", (r"CSV files use commas, LF line endings, a header row and no quoting",),
             (r'assert got == want, f"\Wpath\W differs',)),
        Rule("top_customers", (r"`/app/\w+/top_customers\.csv` with header",),
             (r'files\["top_customers\.csv"\] = ',), levels=frozenset({2, 3, 4})),
        Rule("min_orders_having", (r"customers with at least (?P<n>\d+) completed orders",),
             (r"if count\[c\] >= min_orders", r'"min_orders": {n}\b'),
             levels=frozenset({2, 3, 4})),
        Rule("monthly_pivot", (r"`/app/\w+/monthly_by_category\.csv`: a wide table",),
             (r'files\["monthly_by_category\.csv"\] = ',), levels=frozenset({3, 4})),
        Rule("test_accounts", (r"Customers with `is_test = 1` are internal test accounts",),
             (r"live = lambda cid: level < 3 or customers\[cid\]\[3\] == 0",),
             levels=frozenset({3, 4})),
        Rule("region_leaders", (r"`/app/\w+/region_leaders\.csv` with header",),
             (r'files\["region_leaders\.csv"\] = ',), levels=frozenset({4})),
        Rule("summary_json", (r"`/app/\w+/summary\.json`: an object with integer keys",),
             (r'files\["summary\.json"\] = ',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_program_on_fresh_databases\(", r'"program": "{program}"'),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "write sqlite joins across orders and customers tables": "region_revenue",
        "build grouped aggregate queries with HAVING filters": "min_orders_having",
        "pivot long query output into a wide table": "monthly_pivot",
        "rank rows within partitions using window functions": "region_leaders",
        "format aggregated results as a JSON report": "summary_json",
        "export query results to CSV with header rows": "csv_format",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        regions = rng.sample(_REGIONS, 3 + level)
        categories = sorted(rng.sample(_CATEGORIES, 3 + level))
        sizes = {1: (10, 6, 40), 2: (18, 9, 90), 3: (26, 12, 160), 4: (36, 16, 260)}[level]
        data = _shop()["make_shop"](rng, *sizes, regions, categories, _FIRST, _LAST)
        min_orders = rng.randint(2, 4)
        db = f"/app/{rng.choice(_SHOP_DATABASES)}.db"
        out = f"/app/{rng.choice(_SHOP_OUT_DIRS)}"
        opener = rng.choice(_SHOP_OPENERS).format(
            db=db, tables="`customers`, `products`, `orders`, `order_items`"
        )
        ask = rng.choice(_SHOP_ASKS)
        program = program_path(ctx.language, "/app/" + rng.choice(_SHOP_PROGRAMS))
        usage = (
            "`<database> <output_dir>` writes the same report files into `<output_dir>` "
            "(creating it) for any database with this schema."
        )
        queries = _shop_queries(level, min_orders)
        folder = templates(__name__)
        values: dict[str, Any] = {
            "level": level,
            "min_orders": min_orders,
            "db": db,
            "out": out,
            "opener": opener,
            "ask": ask,
            "code": ctx.needs_code,
            "code_note": code_note(ctx, program, usage) if ctx.needs_code else "",
            "queries": queries,
            "categories": categories,
        }
        if ctx.needs_code:
            # the reference program: the queries in Python, or the same in a shell script
            if ctx.language == "python":
                body = folder.render("solution/report.py", level=level, queries=json.dumps(queries))
            else:
                body = folder.render("solution/report.sh", level=level, queries=queries)
            values["setup"] = "\n".join(program_setup(ctx.language, program, body))
            values["run"] = invoke(ctx.language, program)
        tests = folder.render(
            "tests/test_task.py",
            head=minimal_test_file(
                {
                    "level": level,
                    "min_orders": min_orders,
                    "out_dir": out,
                    "code": ctx.needs_code,
                    "language": ctx.language,
                    "program": program,
                    "regions": regions,
                    "categories": categories,
                },
                "",
            ),
            generator=folder.render("tests/shop.py"),
        )
        return Draft(
            instruction=folder.render("instruction.md", **values),
            solution=folder.render("solution/solve.sh", **values),
            tests={"test_task.py": tests, "shop.json": json.dumps(data)},
            files={"shop.sql": _shop()["shop_sql"](data)},
            dockerfile_steps=(f"RUN sqlite3 {db} < /app/shop.sql && rm /app/shop.sql",),
        )
