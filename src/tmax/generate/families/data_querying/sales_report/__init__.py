"""Revenue reports over a shop's orders/customers sqlite database."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    bullets,
    code_note,
    invoke,
    minimal_test_file,
    numbered,
    program_path,
    program_setup,
)
from tmax.generate.family import Draft, Family, RenderContext, register

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

_SHOP_GEN = """
def make_shop(rng, n_customers, n_products, n_orders, regions, categories, first, last):
    customers = []
    for cid in range(1, n_customers + 1):
        name = rng.choice(first) + " " + rng.choice(last)
        customers.append([cid, name, rng.choice(regions), 1 if rng.random() < 0.12 else 0])
    products = []
    for pid in range(1, n_products + 1):
        k = len(categories)
        cat = categories[pid - 1] if pid <= k else rng.choice(categories)
        products.append([pid, "item" + str(pid), cat, rng.randint(2, 90) * 25])
    orders, items = [], []
    statuses = ["completed", "completed", "completed", "cancelled", "pending"]
    for oid in range(1, n_orders + 1):
        date = "2024-%02d-%02d" % (rng.randint(1, 6), rng.randint(1, 28))
        orders.append([oid, rng.randint(1, n_customers), date, rng.choice(statuses)])
        for pid in rng.sample(range(1, n_products + 1), rng.randint(1, 3)):
            items.append([oid, pid, rng.randint(1, 4)])
    return {"customers": customers, "products": products, "orders": orders, "items": items}


SCHEMA = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL,"
    " is_test INTEGER NOT NULL DEFAULT 0);\\n"
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,"
    " price_cents INTEGER NOT NULL);\\n"
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL"
    " REFERENCES customers(id), order_date TEXT NOT NULL, status TEXT NOT NULL);\\n"
    "CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),"
    " product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL);\\n"
)


def shop_sql(data):
    def value(v):
        return str(v) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'"

    out = [SCHEMA]
    for table, key in (("customers", "customers"), ("products", "products"),
                       ("orders", "orders"), ("order_items", "items")):
        rows = ",".join("(" + ",".join(value(v) for v in row) + ")" for row in data[key])
        out.append(f"INSERT INTO {table} VALUES {rows};\\n")
    return "".join(out)
"""

_shop_ns: dict = {}
exec(_SHOP_GEN, _shop_ns)  # the same generator is pasted into the tests

_SHOP_ORACLE = """

def oracle(data, level, min_orders):
    customers = {c[0]: c for c in data["customers"]}
    products = {p[0]: p for p in data["products"]}
    live = lambda cid: level < 3 or customers[cid][3] == 0
    orders = {o[0]: o for o in data["orders"] if live(o[1])}
    done = {oid for oid, o in orders.items() if o[3] == "completed"}
    value = {}
    for oid, pid, qty in data["items"]:
        if oid in done:
            value[oid] = value.get(oid, 0) + qty * products[pid][3]
    region, spend, count = {}, {}, {}
    for oid in done:
        cid = orders[oid][1]
        reg = customers[cid][2]
        region[reg] = region.get(reg, 0) + value.get(oid, 0)
        spend[cid] = spend.get(cid, 0) + value.get(oid, 0)
        count[cid] = count.get(cid, 0) + 1
    files = {}
    rows = sorted(region.items(), key=lambda kv: (-kv[1], kv[0]))
    files["region_revenue.csv"] = "region,revenue_cents\\n" + "".join(
        f"{r},{v}\\n" for r, v in rows)
    if level >= 2:
        top = sorted((c for c in spend if count[c] >= min_orders), key=lambda c: (-spend[c], c))
        files["top_customers.csv"] = "customer_id,name,orders,spend_cents\\n" + "".join(
            f"{c},{customers[c][1]},{count[c]},{spend[c]}\\n" for c in top)
    if level >= 3:
        cats = sorted({p[2] for p in data["products"]})
        cells = {}
        for oid, pid, qty in data["items"]:
            if oid in done:
                key = (orders[oid][2][:7], products[pid][2])
                cells[key] = cells.get(key, 0) + qty * products[pid][3]
        months = sorted({orders[o][2][:7] for o in done})
        text = "month," + ",".join(cats) + "\\n"
        for m in months:
            text += m + "," + ",".join(str(cells.get((m, c), 0)) for c in cats) + "\\n"
        files["monthly_by_category.csv"] = text
    if level >= 4:
        best = {}
        for cid in spend:
            reg = customers[cid][2]
            if reg not in best or (-spend[cid], cid) < (-spend[best[reg]], best[reg]):
                best[reg] = cid
        files["region_leaders.csv"] = "region,customer_id,name,spend_cents\\n" + "".join(
            f"{r},{c},{customers[c][1]},{spend[c]}\\n" for r, c in sorted(best.items()))
        files["summary.json"] = {
            "completed_orders": len(done),
            "cancelled_orders": sum(1 for o in orders.values() if o[3] == "cancelled"),
            "revenue_cents": sum(region.values()),
            "regions": len(region),
        }
    return files


def check_dir(out_dir, expected):
    for name, want in expected.items():
        path = os.path.join(out_dir, name)
        if name.endswith(".json"):
            got = json.loads(read(path))
            assert got == want, f"{path}: expected {want}, got {got}"
        else:
            got = read(path)
            assert got == want, f"{path} differs.\\nexpected:\\n{want}\\ngot:\\n{got}"
"""

_SHOP_TESTS = """

def test_outputs_match_database():
    data = json.loads(read(os.path.join(os.path.dirname(__file__), "shop.json")))
    check_dir(CFG["out_dir"], oracle(data, CFG["level"], CFG["min_orders"]))


def test_program_on_fresh_databases():
    if not CFG["code"]:
        return
    import sqlite3

    for seed in (11, 29):
        rng = random.Random(seed)
        data = make_shop(rng, 30, 10, 160, CFG["regions"], CFG["categories"],
                         ["Ann", "Ben", "Cal"], ["Roe", "Poe"])
        work = tempfile.mkdtemp()
        db = os.path.join(work, "fresh.db")
        con = sqlite3.connect(db)
        con.executescript(shop_sql(data))
        con.commit()
        con.close()
        out = os.path.join(work, "report")
        done = run_program([db, out])
        assert done.returncode == 0, f"program failed: {done.stderr[-2000:]}"
        check_dir(out, oracle(data, CFG["level"], CFG["min_orders"]))
"""


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


_SHOP_PY = """import json
import os
import sqlite3
import sys

QUERIES = json.loads(__QUERIES__)
LEVEL = __LEVEL__


def main():
    db, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    con = sqlite3.connect(db)

    def dump(name, sql):
        cur = con.execute(sql)
        with open(os.path.join(out, name), "w") as handle:
            handle.write(",".join(d[0] for d in cur.description) + "\\n")
            for row in cur:
                handle.write(",".join(str(v) for v in row) + "\\n")

    dump("region_revenue.csv", QUERIES["region_revenue.csv"])
    if LEVEL >= 2:
        dump("top_customers.csv", QUERIES["top_customers.csv"])
    if LEVEL >= 3:
        cats = [r[0] for r in con.execute("SELECT DISTINCT category FROM products ORDER BY 1")]
        cols = "".join(
            f", SUM(CASE WHEN p.category = '{c}' THEN oi.qty * p.price_cents ELSE 0 END)"
            f' AS "{c}"' for c in cats)
        dump("monthly_by_category.csv", f"SELECT substr(o.order_date, 1, 7) AS month{cols} "
             + QUERIES["pivot_base"] + " GROUP BY month ORDER BY month;")
    if LEVEL >= 4:
        dump("region_leaders.csv", QUERIES["region_leaders.csv"])
        (summary,) = con.execute(QUERIES["summary.json"]).fetchone()
        with open(os.path.join(out, "summary.json"), "w") as handle:
            handle.write(summary + "\\n")


main()
"""

_SHOP_SH = """#!/bin/bash
set -euo pipefail
db=$1
out=$2
mkdir -p "$out"
q() { sqlite3 -header -separator , "$db" "$1"; }
q "__Q_REGION__" > "$out/region_revenue.csv"
if [ __LEVEL__ -ge 2 ]; then
  q "__Q_TOP__" > "$out/top_customers.csv"
fi
if [ __LEVEL__ -ge 3 ]; then
  cols=""
  while IFS= read -r cat; do
    cols+=", SUM(CASE WHEN p.category = '$cat' THEN oi.qty * p.price_cents ELSE 0 END)"
    cols+=" AS \\"$cat\\""
  done < <(sqlite3 "$db" "SELECT DISTINCT category FROM products ORDER BY 1")
  q "SELECT substr(o.order_date, 1, 7) AS month$cols __Q_PIVOT__ GROUP BY month ORDER BY month;" \\
    > "$out/monthly_by_category.csv"
fi
if [ __LEVEL__ -ge 4 ]; then
  q "__Q_LEADERS__" > "$out/region_leaders.csv"
  sqlite3 "$db" "__Q_SUMMARY__" > "$out/summary.json"
fi
"""


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
        data = _shop_ns["make_shop"](rng, *sizes, regions, categories, _FIRST, _LAST)
        min_orders = rng.randint(2, 4)
        db = f"/app/{rng.choice(_SHOP_DATABASES)}.db"
        out = f"/app/{rng.choice(_SHOP_OUT_DIRS)}"
        opener = rng.choice(_SHOP_OPENERS).format(
            db=db, tables="`customers`, `products`, `orders`, `order_items`"
        )
        sql = _shop_ns["shop_sql"](data)
        queries = _shop_queries(level, min_orders)
        deliver = [
            f"`{out}/region_revenue.csv` with header `region,revenue_cents`: revenue of "
            "completed orders per customer region (sum of qty × price_cents over the order "
            "items), highest revenue first, ties by region name"
        ]
        if level >= 2:
            deliver.append(
                f"`{out}/top_customers.csv` with header `customer_id,name,orders,spend_cents`:"
                f" customers with at least {min_orders} completed orders, with their number of "
                "completed orders and their completed spend, highest spend first, ties by id"
            )
        if level >= 3:
            deliver.append(
                f"`{out}/monthly_by_category.csv`: a wide table with header `month` followed "
                "by one column per product category present in `products` (alphabetical), one "
                "row per month `YYYY-MM` that has completed orders (ascending), each cell the "
                "completed revenue in cents of that category in that month (0 if none)"
            )
        if level >= 4:
            deliver.append(
                f"`{out}/region_leaders.csv` with header `region,customer_id,name,spend_cents`"
                ": for every region with completed revenue, the customer with the highest "
                "completed spend there (ties by lower id), rows ordered by region"
            )
            deliver.append(
                f"`{out}/summary.json`: an object with integer keys `completed_orders`, "
                "`cancelled_orders`, `revenue_cents` (must equal the total of the region "
                "report) and `regions` (rows of the region report)"
            )
        rules = [
            "Only orders with status `completed` count as revenue.",
            "CSV files use commas, LF line endings, a header row and no quoting; money stays "
            "in integer cents.",
        ]
        if level >= 3:
            rules.append(
                "Customers with `is_test = 1` are internal test accounts: leave them and their "
                "orders out of every deliverable (including the cancelled count)."
            )
        text = (
            f"{opener} {rng.choice(_SHOP_ASKS)}\n\n"
            + numbered(deliver)
            + "\n\nRules:\n"
            + bullets(rules)
        )
        program = program_path(ctx.language, "/app/" + rng.choice(_SHOP_PROGRAMS))
        if ctx.needs_code:
            text += "\n\n" + code_note(
                ctx,
                program,
                "`<database> <output_dir>` writes the same report files into `<output_dir>` "
                "(creating it) for any database with this schema.",
            )
            text += f" Also produce the files in `{out}` for `{db}`."
        # --- reference solution
        inspect = [
            f"sqlite3 {db} '.tables'",
            f"sqlite3 {db} '.schema orders'",
            f"sqlite3 {db} 'SELECT status, COUNT(*) FROM orders GROUP BY status;'",
        ]
        if level >= 3:
            inspect.append(f"sqlite3 {db} 'SELECT COUNT(*) FROM customers WHERE is_test;'")
        if level >= 4:
            inspect.append(f"sqlite3 {db} 'PRAGMA foreign_key_list(order_items);'")
        lines = [*inspect[: 1 if level == 1 else len(inspect)], f"mkdir -p {out}"]
        params = {"level": level, "min_orders": min_orders, "queries": json.dumps(queries)}
        sh_body = (
            _SHOP_SH.replace("__LEVEL__", str(level))
            .replace("__Q_REGION__", queries["region_revenue.csv"])
            .replace("__Q_TOP__", queries["top_customers.csv"])
            .replace("__Q_PIVOT__", queries["pivot_base"])
            .replace("__Q_LEADERS__", queries["region_leaders.csv"])
            .replace("__Q_SUMMARY__", queries["summary.json"])
        )
        if ctx.needs_code:
            if ctx.language == "python":
                body = _SHOP_PY.replace("__QUERIES__", repr(params["queries"])).replace(
                    "__LEVEL__", str(level)
                )
            else:
                body = sh_body
            lines += program_setup(ctx.language, program, body)
            lines.append(f"{invoke(ctx.language, program)} {db} {out}")
        else:
            lines += [
                f'sqlite3 -header -separator , {db} "{queries["region_revenue.csv"]}"'
                f" > {out}/region_revenue.csv"
            ]
            if level >= 2:
                lines.append(
                    f'sqlite3 -header -separator , {db} "{queries["top_customers.csv"]}"'
                    f" > {out}/top_customers.csv"
                )
            if level >= 3:
                cols = "".join(
                    f", SUM(CASE WHEN p.category = '{c}' THEN oi.qty * p.price_cents ELSE 0 END)"
                    f" AS {c}"
                    for c in categories
                )
                lines.append(
                    f'sqlite3 -header -separator , {db} "SELECT substr(o.order_date, 1, 7)'
                    f' AS month{cols} {queries["pivot_base"]} GROUP BY month ORDER BY month;"'
                    f" > {out}/monthly_by_category.csv"
                )
            if level >= 4:
                lines.append(
                    f'sqlite3 -header -separator , {db} "{queries["region_leaders.csv"]}"'
                    f" > {out}/region_leaders.csv"
                )
                lines.append(f'sqlite3 {db} "{queries["summary.json"]}" > {out}/summary.json')
        lines += [
            f"head -n 3 {out}/{n}"
            for n in ("region_revenue.csv", "top_customers.csv")[: min(level, 2)]
        ]
        if level >= 4:
            lines += [f"cat {out}/summary.json", f"wc -l {out}/*.csv"]
        tests = minimal_test_file(
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
            _SHOP_GEN + _SHOP_ORACLE + _SHOP_TESTS,
        )
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests={"test_task.py": tests, "shop.json": json.dumps(data)},
            files={"shop.sql": sql},
            dockerfile_steps=(f"RUN sqlite3 {db} < /app/shop.sql && rm /app/shop.sql",),
        )
