"""Task families of the data_querying domain."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    PROGRAM_SERVER_PY,
    bullets,
    code_note,
    csv_text,
    invoke,
    minimal_test_file,
    numbered,
    program_path,
    program_setup,
    wait_port,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# --- family 1: sales report over a sqlite database -------------------------------------

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


# --- family 2: graph queries over an edge list ------------------------------------------

_GRAPH_PY = """import sys
from collections import deque


def load(path):
    adj = {}
    with open(path) as handle:
        next(handle, None)
        for line in handle:
            line = line.strip()
            if "," not in line:
                continue
            a, b = line.split(",", 1)
            adj.setdefault(a, set())
            adj.setdefault(b, set())
            if a != b:
                adj[a].add(b)
                adj[b].add(a)
    return adj


def bfs(adj, start):
    dist, queue = {start: 0}, deque([start])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def main():
    adj, mode = load(sys.argv[1]), sys.argv[2]
    if mode == "degrees":
        print("node,degree")
        for node in sorted(adj, key=lambda n: (-len(adj[n]), n)):
            print(f"{node},{len(adj[node])}")
    elif mode == "components":
        seen, comps = set(), []
        for node in sorted(adj):
            if node not in seen:
                members = sorted(bfs(adj, node))
                seen.update(members)
                comps.append(members)
        for members in sorted(comps, key=lambda m: (-len(m), m[0])):
            print(" ".join(members))
    elif mode == "dist":
        dist = bfs(adj, sys.argv[3])
        print("node,hops")
        for node in sorted(dist, key=lambda n: (dist[n], n)):
            print(f"{node},{dist[node]}")
    elif mode == "path":
        src, dst = sys.argv[3], sys.argv[4]
        dist = bfs(adj, dst) if dst in adj else {}
        if src not in dist:
            print("none")
            return
        path = [src]
        while path[-1] != dst:
            here = path[-1]
            path.append(min(v for v in adj[here] if dist.get(v) == dist[here] - 1))
        print(" -> ".join(path))


main()
"""

_GRAPH_SH = r"""#!/bin/bash
set -euo pipefail
export LC_ALL=C
edges=$1
mode=$2
LOAD='
NR > 1 && NF >= 2 {
  a = $1; b = $2
  if (!(a in seen)) { seen[a] = 1; nodes[++n] = a }
  if (!(b in seen)) { seen[b] = 1; nodes[++n] = b }
  if (a != b && !((a, b) in e)) {
    e[a, b] = 1; e[b, a] = 1; deg[a]++; deg[b]++
    nb[a] = nb[a] " " b; nb[b] = nb[b] " " a
  }
}
function bfs(s,   head, tail, u, k, m, parts, v) {
  split("", dist); head = 1; tail = 1; queue[1] = s; dist[s] = 0
  while (head <= tail) {
    u = queue[head++]; m = split(nb[u], parts, " ")
    for (k = 1; k <= m; k++) {
      v = parts[k]
      if (!(v in dist)) { dist[v] = dist[u] + 1; queue[++tail] = v }
    }
  }
}'
case "$mode" in
  degrees)
    echo "node,degree"
    awk -F, "$LOAD"' END { for (i = 1; i <= n; i++) print nodes[i] "," (deg[nodes[i]] + 0) }' \
      "$edges" \
      | sort -t, -k2,2nr -k1,1
    ;;
  components)
    awk -F, "$LOAD"' END {
      for (i = 1; i <= n; i++) if (!(nodes[i] in comp)) {
        c++; bfs(nodes[i]); for (v in dist) comp[v] = c
      }
      for (v in comp) print comp[v] "\t" v }' "$edges" \
      | sort -t "$(printf '\t')" -k1,1n -k2,2 \
      | awk -F'\t' '{ if ($1 != last && NR > 1) { print size "\t" first "\t" line; line = "" }
          if ($1 != last) { size = 0; first = $2 } last = $1; size++
          line = (line == "" ? $2 : line " " $2) }
        END { if (NR) print size "\t" first "\t" line }' \
      | sort -t "$(printf '\t')" -k1,1nr -k2,2 | cut -f3
    ;;
  dist)
    echo "node,hops"
    awk -F, -v s="$3" "$LOAD"' END {
      if (s in seen) { bfs(s); for (v in dist) print v "," dist[v] } }' \
      "$edges" | sort -t, -k2,2n -k1,1
    ;;
  path)
    awk -F, -v s="$3" -v t="$4" "$LOAD"' END {
      if (!(t in seen)) { print "none"; exit }
      bfs(t)
      if (!(s in dist)) { print "none"; exit }
      u = s; out = s
      while (u != t) {
        best = ""; m = split(nb[u], parts, " ")
        for (k = 1; k <= m; k++) {
          v = parts[k]
          if (dist[v] == dist[u] - 1 && (best == "" || v < best)) best = v
        }
        u = best; out = out " -> " u
      }
      print out }' "$edges"
    ;;
esac
"""

_GRAPH_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 20000
static char *names[MAXN];
static int *adj[MAXN], deg[MAXN], cap[MAXN], dist[MAXN], queue_[MAXN], order[MAXN];
static int label[MAXN], first[MAXN], size[MAXN], comps[MAXN];
static int n;

static int find(const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

static int intern(const char *s) {
    int i = find(s);
    if (i >= 0) return i;
    size_t len = strlen(s) + 1;
    names[n] = malloc(len);
    memcpy(names[n], s, len);
    return n++;
}

static int linked(int a, int b) {
    for (int i = 0; i < deg[a]; i++)
        if (adj[a][i] == b) return 1;
    return 0;
}

static void add(int a, int b) {
    if (deg[a] == cap[a]) {
        cap[a] = cap[a] ? 2 * cap[a] : 4;
        adj[a] = realloc(adj[a], cap[a] * sizeof(int));
    }
    adj[a][deg[a]++] = b;
}

static void bfs(int s) {
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++) dist[i] = -1;
    dist[s] = 0;
    queue_[tail++] = s;
    while (head < tail) {
        int u = queue_[head++];
        for (int k = 0; k < deg[u]; k++) {
            int v = adj[u][k];
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                queue_[tail++] = v;
            }
        }
    }
}

static int by_degree(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (deg[a] != deg[b]) return deg[b] - deg[a];
    return strcmp(names[a], names[b]);
}

static int by_name(const void *x, const void *y) {
    return strcmp(names[*(const int *)x], names[*(const int *)y]);
}

static int by_dist(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (dist[a] != dist[b]) return dist[a] - dist[b];
    return strcmp(names[a], names[b]);
}

static int by_comp(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (size[a] != size[b]) return size[b] - size[a];
    return strcmp(names[first[a]], names[first[b]]);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return 1;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, in)) {
        if (lineno++ == 0) continue;
        line[strcspn(line, "\r\n")] = 0;
        char *comma = strchr(line, ',');
        if (!comma) continue;
        *comma = 0;
        int a = intern(line), b = intern(comma + 1);
        if (a != b && !linked(a, b)) {
            add(a, b);
            add(b, a);
        }
    }
    fclose(in);
    for (int i = 0; i < n; i++) order[i] = i;
    const char *mode = argv[2];
    if (strcmp(mode, "degrees") == 0) {
        qsort(order, n, sizeof(int), by_degree);
        printf("node,degree\n");
        for (int i = 0; i < n; i++) printf("%s,%d\n", names[order[i]], deg[order[i]]);
    } else if (strcmp(mode, "components") == 0) {
        qsort(order, n, sizeof(int), by_name);
        int c = 0;
        for (int i = 0; i < n; i++) label[i] = -1;
        for (int i = 0; i < n; i++) {
            int s = order[i];
            if (label[s] >= 0) continue;
            bfs(s);
            first[c] = s;
            size[c] = 0;
            for (int v = 0; v < n; v++)
                if (dist[v] >= 0) {
                    label[v] = c;
                    size[c]++;
                }
            comps[c] = c;
            c++;
        }
        qsort(comps, c, sizeof(int), by_comp);
        for (int k = 0; k < c; k++) {
            int printed = 0;
            for (int i = 0; i < n; i++)
                if (label[order[i]] == comps[k])
                    printf(printed++ ? " %s" : "%s", names[order[i]]);
            printf("\n");
        }
    } else if (strcmp(mode, "dist") == 0 && argc > 3) {
        printf("node,hops\n");
        int s = find(argv[3]);
        if (s < 0) return 0;
        bfs(s);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (dist[i] >= 0) order[m++] = i;
        qsort(order, m, sizeof(int), by_dist);
        for (int i = 0; i < m; i++) printf("%s,%d\n", names[order[i]], dist[order[i]]);
    } else if (strcmp(mode, "path") == 0 && argc > 4) {
        int s = find(argv[3]), t = find(argv[4]);
        if (s < 0 || t < 0) {
            printf("none\n");
            return 0;
        }
        bfs(t);
        if (dist[s] < 0) {
            printf("none\n");
            return 0;
        }
        printf("%s", names[s]);
        int u = s;
        while (u != t) {
            int best = -1;
            for (int k = 0; k < deg[u]; k++) {
                int v = adj[u][k];
                if (dist[v] == dist[u] - 1 && (best < 0 || strcmp(names[v], names[best]) < 0))
                    best = v;
            }
            u = best;
            printf(" -> %s", names[u]);
        }
        printf("\n");
    }
    return 0;
}
"""

_GRAPH_TESTS = """
from collections import deque

HERE = os.path.dirname(__file__)


def load(text):
    adj = {}
    for line in text.splitlines()[1:]:
        if "," not in line:
            continue
        a, b = line.strip().split(",", 1)
        adj.setdefault(a, set())
        adj.setdefault(b, set())
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    return adj


def bfs(adj, start):
    dist, queue = {start: 0}, deque([start])
    while queue:
        u = queue.popleft()
        for v in sorted(adj[u]):
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def expect(adj, mode, args=()):
    if mode == "degrees":
        rows = sorted(adj, key=lambda n: (-len(adj[n]), n))
        return "node,degree\\n" + "".join(f"{n},{len(adj[n])}\\n" for n in rows)
    if mode == "components":
        comps, seen = [], set()
        for node in sorted(adj):
            if node not in seen:
                members = sorted(bfs(adj, node))
                seen.update(members)
                comps.append(members)
        comps.sort(key=lambda m: (-len(m), m[0]))
        return "".join(" ".join(m) + "\\n" for m in comps)
    if mode == "dist":
        dist = bfs(adj, args[0])
        rows = sorted(dist, key=lambda n: (dist[n], n))
        return "node,hops\\n" + "".join(f"{n},{dist[n]}\\n" for n in rows)
    src, dst = args
    dist = bfs(adj, dst)
    if src not in dist:
        return "none\\n"
    path = [src]
    while path[-1] != dst:
        here = path[-1]
        path.append(min(v for v in adj[here] if dist.get(v) == dist[here] - 1))
    return " -> ".join(path) + "\\n"


def modes(level, adj, rng):
    nodes = sorted(adj)
    out = [("degrees", ())]
    if level >= 2:
        out.append(("components", ()))
    if level >= 3:
        out.append(("dist", (rng.choice(nodes),)))
    if level >= 4:
        out.append(("path", (rng.choice(nodes), rng.choice(nodes))))
    return out


def test_report_files():
    adj = load(read(os.path.join(HERE, "edges.csv")))
    files = {"degrees.csv": ("degrees", ())}
    if CFG["level"] >= 2:
        files["components.txt"] = ("components", ())
    if CFG["level"] >= 3:
        files["distances.csv"] = ("dist", (CFG["source"],))
    if CFG["level"] >= 4:
        files["path.txt"] = ("path", (CFG["source"], CFG["target"]))
    for name, (mode, args) in files.items():
        want, got = expect(adj, mode, args), read("/app/out/" + name)
        assert got == want, f"/app/out/{name} differs.\\nexpected:\\n{want}\\ngot:\\n{got}"
    if CFG["level"] >= 4:
        comps = expect(adj, "components").splitlines()
        dist = bfs(adj, CFG["source"])
        want = {
            "nodes": len(adj),
            "edges": sum(len(v) for v in adj.values()) // 2,
            "components": len(comps),
            "largest_component": len(comps[0].split()),
            "eccentricity": max(dist.values()),
        }
        got = json.loads(read("/app/out/summary.json"))
        assert got == want, f"summary.json: expected {want}, got {got}"


def test_program_equivalence():
    if not CFG["code"]:
        return
    rng = random.Random(4242)
    work = tempfile.mkdtemp()
    for case in range(CFG["cases"]):
        count = rng.randint(3, 40)
        names = rng.sample([f"{p}{i}" for p in "abq" for i in range(60)], count)
        lines = ["src,dst"]
        for _ in range(rng.randint(1, count * 2)):
            lines.append(rng.choice(names) + "," + rng.choice(names))
        text = "\\n".join(lines) + "\\n"
        path = os.path.join(work, f"g{case}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        adj = load(text)
        for mode, args in modes(CFG["level"], adj, rng):
            done = run_program([path, mode, *args])
            want = expect(adj, mode, args)
            assert done.returncode == 0, f"case {case} {mode}: exit {done.returncode}"
            assert done.stdout == want, (
                f"case {case} `{mode} {' '.join(args)}` on\\n{text}\\nexpected:\\n{want}\\n"
                f"got:\\n{done.stdout}"
            )
"""


@register
class GraphQueries(Family):
    """Answer graph questions over a friendship/dependency edge list (degrees, components,
    hop distances, canonical shortest path); level adds questions and a summary, code asks
    for a query program that is fuzzed against an oracle on random graphs."""

    name = "data_querying.graph_queries"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("repeats_and_self_loops", (r"repeats count once and a self-loop adds no neighbour",),
             (r"if a != b:\n\s+adj\[a\]\.add\(b\)",)),
        Rule("degrees", (r"`/app/out/degrees\.csv`: header `node,degree`",),
             (r"def test_report_files\(", r'files = \{{"degrees\.csv": \("degrees", \(\)\)\}}')),
        Rule("components", (r"`/app/out/components\.txt`: one connected component per line",),
             (r'files\["components\.txt"\] = \("components"',), levels=frozenset({2, 3, 4})),
        Rule("distances", (r"`/app/out/distances\.csv`: header `node,hops`",),
             (r'files\["distances\.csv"\] = \("dist"',), levels=frozenset({3, 4})),
        Rule("shortest_path", (r"`/app/out/path\.txt`: one line with a shortest path",),
             (r'files\["path\.txt"\] = \("path"',), levels=frozenset({4})),
        Rule("summary_json", (r"`/app/out/summary\.json`: integer keys `nodes`",),
             (r'read\("/app/out/summary\.json"\)',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/graphq",),
             (r"def test_program_equivalence\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "count node degrees from relationship records": "degrees",
        "extract connected components from a friendship edge CSV": "components",
        "find shortest paths in an edge list table": "shortest_path",
        "format aggregated results as a JSON report": "summary_json",
        "export query results to CSV with header rows": "degrees",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        prefix = ctx.pick(["user", "svc", "pkg", "host"])
        count = {1: 12, 2: 24, 3: 40, 4: 70}[level]
        names = [f"{prefix}{i:03d}" for i in rng.sample(range(1, 400), count)]
        edges = []
        groups = max(2, level + 1)
        for i, node in enumerate(names):
            for _ in range(rng.randint(0, 2)):
                other = names[rng.randrange(len(names))]
                if rng.random() < 0.8 and (names.index(other) % groups) != i % groups:
                    other = names[(i + groups * rng.randint(1, 3)) % len(names)]
                edges.append((node, other))
        for _ in range(level + 1):  # repeats and self-loops
            a, b = rng.choice(edges)
            edges.append((b, a))
        edges.append((names[0], names[0]))
        rng.shuffle(edges)
        adj: dict[str, set[str]] = {}
        for a, b in edges:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
        source = ctx.pick(sorted(n for n in adj if len(adj[n] - {n}) > 0))
        reach, frontier = {source}, [source]
        while frontier:
            frontier = [v for u in frontier for v in sorted(adj[u]) if v not in reach]
            reach.update(frontier)
        pool = sorted(reach - {source}) if rng.random() < 0.85 else sorted(set(adj) - {source})
        target = ctx.pick(pool)
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        kind = ctx.pick(["friendship", "service dependency", "co-authorship"])
        deliver = [
            "`/app/out/degrees.csv`: header `node,degree`, then every node with its number of "
            "distinct neighbours, highest degree first, ties by node name"
        ]
        if level >= 2:
            deliver.append(
                "`/app/out/components.txt`: one connected component per line, its nodes sorted "
                "and separated by single spaces; largest component first, ties by the "
                "component's smallest node name"
            )
        if level >= 3:
            deliver.append(
                f"`/app/out/distances.csv`: header `node,hops`, every node reachable from "
                f"`{source}` (itself included, 0 hops) with its hop distance, nearest first, "
                "ties by node name"
            )
        if level >= 4:
            deliver.append(
                f"`/app/out/path.txt`: one line with a shortest path from `{source}` to "
                f"`{target}` written as `a -> b -> c`; when several exist, take at every step "
                "the smallest node name that still lies on a shortest path; the single word "
                "`none` if there is no path"
            )
            deliver.append(
                "`/app/out/summary.json`: integer keys `nodes`, `edges` (distinct undirected "
                "edges, self-loops excluded), `components`, `largest_component` (its node "
                f"count) and `eccentricity` (the largest hop distance from `{source}`)"
            )
        text = (
            f"`/app/graph/edges.csv` is an undirected {kind} graph, one edge per row with the "
            "header `src,dst`. Rows may repeat (also in reverse) and may contain self-loops: "
            "repeats count once and a self-loop adds no neighbour, but a node only seen in a "
            "self-loop still exists. Node names compare in plain byte order. I need:\n\n"
            + numbered(deliver)
            + "\n\nAll files end with a newline."
        )
        program = program_path(ctx.language, "/app/graphq")
        modes = ["`<edges.csv> degrees` prints the degrees table"]
        if level >= 2:
            modes.append("`<edges.csv> components` prints the components lines")
        if level >= 3:
            modes.append("`<edges.csv> dist <node>` prints the distances table from `<node>`")
        if level >= 4:
            modes.append("`<edges.csv> path <from> <to>` prints the path line")
        if code:
            text += "\n\n" + code_note(
                ctx,
                program,
                "it takes the edge file and a query and prints to stdout exactly the content "
                "of the matching file above: " + "; ".join(modes) + ".",
            )
            if fuzz:
                text += " It will be compared with a reference on many random graphs."
        # --- solution
        binary = "/app/graphq"
        if code:
            body = {"python": _GRAPH_PY, "bash": _GRAPH_SH, "c": _GRAPH_C}[ctx.language]
            lines = program_setup(ctx.language, program, body, binary)
            run = invoke(ctx.language, program, binary)
        else:
            lines = program_setup("bash", "/tmp/graphq.sh", _GRAPH_SH)
            run = "bash /tmp/graphq.sh"
        lines = ["head -n 5 /app/graph/edges.csv", "mkdir -p /app/out", *lines]
        if level >= 3:
            lines.insert(1, "wc -l /app/graph/edges.csv")
        lines.append(f"{run} /app/graph/edges.csv degrees > /app/out/degrees.csv")
        if level >= 2:
            lines.append(f"{run} /app/graph/edges.csv components > /app/out/components.txt")
        if level >= 3:
            lines.append(f"{run} /app/graph/edges.csv dist {source} > /app/out/distances.csv")
            lines.append("tail -n 3 /app/out/distances.csv")
        if level >= 4:
            lines += [
                f"{run} /app/graph/edges.csv path {source} {target} > /app/out/path.txt",
                "nodes=$(tail -n +2 /app/out/degrees.csv | wc -l)",
                "edges=$(awk -F, 'NR > 1 { s += $2 } END { print s / 2 }' /app/out/degrees.csv)",
                "comps=$(wc -l < /app/out/components.txt)",
                "largest=$(head -n 1 /app/out/components.txt | wc -w)",
                "ecc=$(tail -n 1 /app/out/distances.csv | cut -d, -f2)",
                'printf \'{"nodes": %d, "edges": %d, "components": %d, "largest_component": %d,'
                ' "eccentricity": %d}\\n\' "$nodes" "$edges" "$comps" "$largest" "$ecc"'
                " > /app/out/summary.json",
                "cat /app/out/summary.json /app/out/path.txt",
            ]
        edges_text = csv_text(["src", "dst"], edges)
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "source": source,
            "target": target,
            "cases": (4 if not fuzz else 6) * level,
        }
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests={
                "test_task.py": minimal_test_file(params, _GRAPH_TESTS),
                "edges.csv": edges_text,
            },
            files={"graph/edges.csv": edges_text},
        )


# --- family 3: stock lookup tool / service ----------------------------------------------

_STOCK_GEN = """
def make_stock(rng, level, n_skus, warehouses):
    skus = sorted(rng.sample(["%s%03d" % (c, i) for c in "ABKMTZ" for i in range(1000)], n_skus))
    whs = rng.sample(warehouses, min(len(warehouses), 2 + level))
    have, files = {}, {}
    rows = []
    for sku in skus:
        for wh in rng.sample(whs, rng.randint(1, len(whs))):
            qty = rng.randint(0, 60)
            have[(sku, wh)] = have.get((sku, wh), 0) + qty
            rows.append((sku, wh, qty))
    rows.append(rows[rng.randrange(len(rows))][:2] + (rng.randint(1, 9),))
    files["stock.csv"] = "sku,warehouse,qty\\n" + "".join("%s,%s,%d\\n" % r for r in rows)
    if level >= 2:
        unpriced = rng.choice(sorted({s for s, _, q in rows if q > 0} or skus))
        priced = [s for s in skus if s != unpriced and rng.random() < 0.9]
        files["prices.csv"] = "sku,price_cents\\n" + "".join(
            "%s,%d\\n" % (s, rng.randint(1, 400) * 5) for s in priced)
    if level >= 3:
        moves = []
        for _ in range(n_skus):
            sku, wh = rng.choice(skus), rng.choice(whs)
            moves.append((sku, wh, rng.randint(-have.get((sku, wh), 0), 25)))
            have[(sku, wh)] = have.get((sku, wh), 0) + moves[-1][2]
        files["moves.csv"] = "sku,warehouse,delta\\n" + "".join("%s,%s,%d\\n" % m for m in moves)
    queries = []
    for _ in range(4 + 3 * level):
        kind = rng.choice(["STOCK", "VALUE", "WAREHOUSE", "LOW"][:level])
        if kind == "STOCK":
            queries.append("STOCK " + (rng.choice(skus) if rng.random() < 0.85 else "Q999"))
        elif kind == "LOW":
            queries.append("LOW %d" % rng.randint(5, 80))
        else:
            queries.append(kind + " " + (rng.choice(whs) if rng.random() < 0.85 else "xyz"))
    # every query file asks for an unknown sku and a malformed query, and from level 2
    # for an unknown warehouse and the value of a warehouse holding the unpriced sku
    queries += ["STOCK Q999", rng.choice(["PRICE ", "COUNT ", "FIND "]) + rng.choice(skus)]
    if level >= 2:
        queries += ["VALUE xyz"] + ["VALUE " + w for s, w, q in rows if s == unpriced and q > 0][:1]
    rng.shuffle(queries)
    return files, queries


def answer_all(files, queries):
    def rows(name):
        lines = files.get(name, "").splitlines()[1:]
        return [line.split(",") for line in lines if line]

    stock = {}
    for sku, wh, qty in rows("stock.csv") + rows("moves.csv"):
        stock[(sku, wh)] = stock.get((sku, wh), 0) + int(qty)
    price = {s: int(p) for s, p in rows("prices.csv")}
    skus = {s for s, _ in stock}
    whs = {w for _, w in stock}
    total = {}
    for (s, w), q in stock.items():
        total[s] = total.get(s, 0) + q
    out = []
    for query in queries:
        parts = query.split()
        cmd, arg = (parts + ["", ""])[:2]
        if cmd == "STOCK":
            out.append(str(total[arg]) if arg in skus else "UNKNOWN")
        elif cmd == "VALUE":
            if arg not in whs:
                out.append("UNKNOWN")
            else:
                out.append(str(sum(q * price.get(s, 0) for (s, w), q in stock.items() if w == arg)))
        elif cmd == "WAREHOUSE":
            if arg not in whs:
                out.append("UNKNOWN")
            else:
                held = [q for (s, w), q in stock.items() if w == arg and q > 0]
                out.append("%d %d" % (len(held), sum(held)))
        elif cmd == "LOW":
            low = sorted(s for s in skus if total[s] < int(arg))
            out.append(",".join(low) if low else "NONE")
        else:
            out.append("ERROR")
    return out
"""

_stock_ns: dict = {}
exec(_STOCK_GEN, _stock_ns)

_LOOKUP_PY = """import csv
import os
import sys


def rows(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as handle:
        return list(csv.reader(handle))[1:]


def main():
    folder = sys.argv[1]
    stock = {}
    for sku, wh, qty in rows(folder, "stock.csv") + rows(folder, "moves.csv"):
        stock[(sku, wh)] = stock.get((sku, wh), 0) + int(qty)
    price = {sku: int(cents) for sku, cents in rows(folder, "prices.csv")}
    total = {}
    for (sku, _), qty in stock.items():
        total[sku] = total.get(sku, 0) + qty
    warehouses = {wh for _, wh in stock}
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        cmd, arg = parts[0], parts[1] if len(parts) > 1 else ""
        if cmd == "STOCK":
            reply = str(total[arg]) if arg in total else "UNKNOWN"
        elif cmd in ("VALUE", "WAREHOUSE") and arg not in warehouses:
            reply = "UNKNOWN"
        elif cmd == "VALUE":
            reply = str(sum(q * price.get(s, 0) for (s, w), q in stock.items() if w == arg))
        elif cmd == "WAREHOUSE":
            held = [q for (s, w), q in stock.items() if w == arg and q > 0]
            reply = f"{len(held)} {sum(held)}"
        elif cmd == "LOW" and arg.lstrip("-").isdigit():
            low = sorted(s for s in total if total[s] < int(arg))
            reply = ",".join(low) or "NONE"
        else:
            reply = "ERROR"
        print(reply, flush=True)


main()
"""

_LOOKUP_SH = r"""#!/bin/bash
# Answer stock queries (one per stdin line) from the CSV files in $1.
export LC_ALL=C
exec awk -v dir="$1" '
function load(file, kind,   line, f, seen) {
  seen = 0
  while ((getline line < file) > 0) {
    if (seen++ == 0) continue
    split(line, f, ",")
    if (kind == "price") { price[f[1]] = f[2] + 0; continue }
    stock[f[1] SUBSEP f[2]] += f[3]; total[f[1]] += f[3]; wh[f[2]] = 1
  }
  close(file)
}
BEGIN {
  load(dir "/stock.csv", "stock"); load(dir "/moves.csv", "stock"); load(dir "/prices.csv", "price")
}
{
  n = split($0, q, " ")
  if (n == 0) next
  cmd = q[1]; arg = q[2]
  if (cmd == "STOCK") reply = (arg in total) ? total[arg] : "UNKNOWN"
  else if ((cmd == "VALUE" || cmd == "WAREHOUSE") && !(arg in wh)) reply = "UNKNOWN"
  else if (cmd == "VALUE") {
    sum = 0
    for (key in stock) { split(key, k, SUBSEP); if (k[2] == arg) sum += stock[key] * price[k[1]] }
    reply = sum
  } else if (cmd == "WAREHOUSE") {
    cnt = 0; units = 0
    for (key in stock) {
      split(key, k, SUBSEP)
      if (k[2] == arg && stock[key] > 0) { cnt++; units += stock[key] }
    }
    reply = cnt " " units
  } else if (cmd == "LOW" && arg ~ /^-?[0-9]+$/) {
    m = 0
    for (s in total) if (total[s] < arg + 0) {
      m++; i = m
      while (i > 1 && low[i - 1] > s) { low[i] = low[i - 1]; i-- }
      low[i] = s
    }
    reply = "NONE"
    if (m > 0) { reply = low[1]; for (i = 2; i <= m; i++) reply = reply "," low[i] }
  } else reply = "ERROR"
  print reply
  fflush()
}'
"""

_LOOKUP_TESTS = """
HERE = os.path.dirname(__file__)


def pristine():
    files = {}
    for name in ("stock.csv", "prices.csv", "moves.csv"):
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            files[name] = read(path)
    return files


def test_answers_file():
    queries = read(os.path.join(HERE, "queries.txt")).split("\\n")[:-1]
    want = answer_all(pristine(), queries)
    got = read("/app/answers.txt").split("\\n")
    assert got[-1] == "", "answers.txt must end with a newline"
    assert got[:-1] == want, f"answers.txt: expected {want}, got {got[:-1]}"


def hidden_queries(rng, files):
    skus = sorted({line.split(",")[0] for line in files["stock.csv"].splitlines()[1:]})
    whs = sorted({line.split(",")[1] for line in files["stock.csv"].splitlines()[1:]})
    out = ["STOCK " + s for s in rng.sample(skus, 3)] + ["STOCK NOPE1", "FROB x"]
    if CFG["level"] >= 2:
        out += ["VALUE " + w for w in whs] + ["VALUE nowhere"]
    if CFG["level"] >= 3:
        out += ["WAREHOUSE " + w for w in whs]
    if CFG["level"] >= 4:
        out += ["LOW %d" % rng.randint(1, 90) for _ in range(3)] + ["LOW 0"]
    rng.shuffle(out)
    return out


def test_program_on_fresh_data():
    if not CFG["code"]:
        return
    for seed in (3, 17):
        rng = random.Random(seed)
        files, _ = make_stock(rng, CFG["level"], 25, ["osl", "rix", "vno", "tll", "hel"])
        folder = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        queries = hidden_queries(rng, files)
        done = run_program([folder], stdin="\\n".join(queries) + "\\n")
        assert done.returncode == 0, f"program failed: {done.stderr[-2000:]}"
        want = answer_all(files, queries)
        got = done.stdout.splitlines()
        assert got == want, f"queries {queries}: expected {want}, got {got}"


def test_service():
    if not CFG["service"]:
        return
    files = pristine()
    queries = hidden_queries(random.Random(99), files)
    want = answer_all(files, queries)
    got = line_queries(CFG["line_port"], queries)
    assert got == want, f"line protocol: queries {queries}: expected {want}, got {got}"
    if CFG["http_port"]:
        for query, answer in zip(queries, want):
            cmd, arg = query.split()
            if cmd not in ("STOCK", "VALUE", "WAREHOUSE", "LOW"):
                continue
            status, body = http_get(CFG["http_port"], f"/{cmd.lower()}/{arg}")
            assert " 200" in status, f"GET /{cmd.lower()}/{arg}: {status}"
            got = json.loads(body)
            assert got == {"query": query, "answer": answer}, f"GET /{cmd.lower()}/{arg}: {got}"
"""


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
        files, queries = _stock_ns["make_stock"](rng, level, 6 + 6 * level, warehouses)
        http = ctx.verifier_kind == "multi_protocol"
        service = ctx.needs_service or http
        code = ctx.needs_code
        line_port = rng.randint(7100, 7899)
        http_port = rng.randint(8100, 8899) if http else 0
        listing = [
            "`/app/data/stock.csv` (`sku,warehouse,qty`; a sku/warehouse pair may appear "
            "more than once, quantities add up)"
        ]
        if level >= 2:
            listing.append(
                "`/app/data/prices.csv` (`sku,price_cents`; a sku without a price counts as 0)"
            )
        if level >= 3:
            listing.append(
                "`/app/data/moves.csv` (`sku,warehouse,delta`: stock movements that "
                "must be applied on top of stock.csv; they can introduce new pairs)"
            )
        kinds = ["`STOCK <sku>`: total quantity of the sku over all warehouses"]
        if level >= 2:
            kinds.append("`VALUE <warehouse>`: sum of quantity × price_cents in that warehouse")
        if level >= 3:
            kinds.append(
                "`WAREHOUSE <warehouse>`: `<n> <units>` where n is the number of skus "
                "with a positive quantity there and units their total quantity"
            )
        if level >= 4:
            kinds.append(
                "`LOW <n>`: the skus whose total quantity is below n, sorted, joined "
                "with commas, or `NONE`"
            )
        text = (
            "Our warehouse data is in:\n\n" + bullets(listing) + "\n\nQueries are single lines:"
            "\n\n" + bullets(kinds) + "\n\nAn unknown sku or warehouse is answered `UNKNOWN`, "
            "any other malformed query `ERROR`. Answer every query in `/app/queries.txt` and "
            "write one answer per line, in order, to `/app/answers.txt`."
        )
        program = program_path(ctx.language, "/app/lookup")
        if code:
            text += "\n\n" + code_note(
                ctx,
                program,
                "it takes the data folder as its only argument, reads queries from stdin (one "
                "per line) and prints one answer line per query.",
            )
        if service:
            text += (
                f"\n\nThen leave a query service running in the background: on TCP port "
                f"{line_port} (127.0.0.1) a client sends query lines and gets one answer line "
                "back per query, several queries per connection."
            )
            if http:
                text += (
                    f" The same service must also speak HTTP on port {http_port}: `GET "
                    "/<command>/<argument>` with the command in lower case (e.g. `/stock/"
                    'A001`) answers 200 with a JSON object `{"query": "STOCK A001", '
                    '"answer": "..."}` where answer is exactly the line the TCP port gives.'
                )
            if code:
                text += f" The service can get its answers from `{program}`."
            text += " It must read the data from `/app/data` and keep running after you finish."
        # --- solution
        lang = ctx.language if code else ("python" if service else "bash")
        source = program if code else program_path(lang, "/tmp/lookup")
        body = _LOOKUP_PY if lang == "python" else _LOOKUP_SH
        lines = ["head -n 4 /app/data/*.csv", "cat /app/queries.txt"][: 1 + (level > 1)]
        lines += program_setup(lang, source, body)
        run = invoke(lang, source)
        lines.append(f"{run} /app/data < /app/queries.txt > /app/answers.txt")
        if level >= 3:
            lines += ["paste -d'|' /app/queries.txt /app/answers.txt", "wc -l /app/answers.txt"]
        if service:
            cmd = ["python3" if lang == "python" else "bash", source, "/app/data"]
            server = (
                PROGRAM_SERVER_PY.replace("__PROGRAM__", repr(cmd))
                .replace("__LINE_PORT__", str(line_port))
                .replace("__HTTP_PORT__", str(http_port))
                .replace("__PREFIX__", '""')
            )
            lines += [
                "cat > /app/server.py <<'SERVER_EOF'",
                server.rstrip("\n"),
                "SERVER_EOF",
                "nohup python3 /app/server.py > /app/server.log 2>&1 &",
                wait_port(line_port),
            ]
            if http:
                lines.append(wait_port(http_port))
            lines.append(f"head -n 1 /app/queries.txt > /dev/tcp/127.0.0.1/{line_port}")
        if level >= 4:
            lines += [
                "grep -c UNKNOWN /app/answers.txt || true",
                "tail -n 3 /app/answers.txt",
                "wc -l /app/data/*.csv",
                "awk -F, 'NR > 1 { s += $3 } END { print s }' /app/data/stock.csv",
                "grep -c ERROR /app/answers.txt || true",
                "cut -d' ' -f1 /app/queries.txt | sort | uniq -c",
            ]
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
            "test_task.py": minimal_test_file(params, _STOCK_GEN + _LOOKUP_TESTS, service=True)
        }
        tests.update(files)
        tests["queries.txt"] = "\n".join(queries) + "\n"
        app = {f"data/{name}": text_ for name, text_ in files.items()}
        app["queries.txt"] = "\n".join(queries) + "\n"
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files=app,
            keep_agent_processes=service,
        )


# --- family 4: clickstream questions over a JSON-lines event log ----------------------

_EVENTS_GEN = """
def make_events(rng, level, n_users, n_events):
    users = sorted(rng.sample(["u%03d" % i for i in range(1, 400)], n_users))
    kinds = ["search", "view", "view", "view", "cart", "cart", "purchase"]
    lines, ids = [], []
    for i in range(n_events):
        event = {"id": "e%05d" % (i + 1), "ts": 1700000000 + rng.randint(0, 86400 * 3),
                 "user": rng.choice(users), "event": rng.choice(kinds)}
        if event["event"] == "purchase":
            event["amount"] = rng.randint(1, 400) * 25
        if level >= 3 and rng.random() < 0.3:
            keys = list(event)
            rng.shuffle(keys)
            event = {k: event[k] for k in keys}
        lines.append(json.dumps(event))
        if level >= 3 and rng.random() < 0.08:
            lines.append(lines[-1])
    files = {"events.jsonl": "\\n".join(lines) + "\\n"}
    if level >= 4:
        countries = rng.sample(["de", "fr", "nl", "pl", "se", "es", "it"], 4)
        known = [u for u in users if rng.random() < 0.85]
        files["users.csv"] = "user,country\\n" + "".join(
            "%s,%s\\n" % (u, rng.choice(countries)) for u in known)
    return files


def load_events(files):
    seen, events = set(), []
    for line in files["events.jsonl"].splitlines():
        if line.strip():
            event = json.loads(line)
            if event["id"] not in seen:
                seen.add(event["id"])
                events.append(event)
    return events


def report_text(files, report, top_n=5):
    events = load_events(files)
    if report == "counts":
        n = {}
        for e in events:
            n[e["event"]] = n.get(e["event"], 0) + 1
        rows = sorted(n.items(), key=lambda kv: (-kv[1], kv[0]))
        return "event,count\\n" + "".join("%s,%d\\n" % r for r in rows)
    if report == "top_buyers":
        orders, revenue = {}, {}
        for e in events:
            if e["event"] == "purchase":
                orders[e["user"]] = orders.get(e["user"], 0) + 1
                revenue[e["user"]] = revenue.get(e["user"], 0) + e["amount"]
        rows = sorted(orders, key=lambda u: (-revenue[u], u))[:top_n]
        return "user,orders,revenue_cents\\n" + "".join(
            "%s,%d,%d\\n" % (u, orders[u], revenue[u]) for u in rows)
    if report == "funnel":
        steps, reached = ["view", "cart", "purchase"], [0, 0, 0]
        by_user = {}
        for e in events:
            by_user.setdefault(e["user"], []).append(e)
        for evs in by_user.values():
            stage, last = 0, None
            for e in sorted(evs, key=lambda e: e["ts"]):
                if stage < 3 and e["event"] == steps[stage] and (last is None or e["ts"] > last):
                    reached[stage] += 1
                    stage, last = stage + 1, e["ts"]
        return "step,users\\n" + "".join("%s,%d\\n" % p for p in zip(steps, reached))
    if report == "by_country":
        country = {}
        for line in files.get("users.csv", "").splitlines()[1:]:
            if line:
                user, where = line.split(",")
                country[user] = where
        users, buyers, revenue = {}, {}, {}
        for e in events:
            where = country.get(e["user"], "unknown")
            users.setdefault(where, set()).add(e["user"])
            if e["event"] == "purchase":
                buyers.setdefault(where, set()).add(e["user"])
                revenue[where] = revenue.get(where, 0) + e["amount"]
        rows = sorted(users, key=lambda c: (-revenue.get(c, 0), c))
        return "country,users,buyers,revenue_cents\\n" + "".join(
            "%s,%d,%d,%d\\n" % (c, len(users[c]), len(buyers.get(c, ())), revenue.get(c, 0))
            for c in rows)
    raise ValueError(report)
"""

_events_ns: dict = {"json": json}
exec(_EVENTS_GEN, _events_ns)

_EVENTS_REPORTS = ["counts", "top_buyers", "funnel", "by_country"]
# Drawn per task so that instructions differ in the names a real shop would pick.
_EVENTS_DATA_DIRS = ["data", "clickstream", "export", "tracking", "weblogs"]
_EVENTS_OUT_DIRS = ["out", "reports", "analytics", "results", "funnel"]
_EVENTS_PROGRAMS = ["events", "clicks", "shop_stats", "event_report"]
_EVENTS_OPENERS = [
    "Our web shop's clickstream export is in:",
    "The tracking export from our web shop has arrived:",
    "Here is the raw event log our web shop exported:",
    "I downloaded the visitor events of our online shop to:",
    "The shop's clickstream for the last few days is stored in:",
]

_EVENTS_PY = """import json
import os
import sys


def main():
    folder, report = sys.argv[1], sys.argv[2]
    seen, events = set(), []
    with open(os.path.join(folder, "events.jsonl")) as handle:
        for line in handle:
            if not line.strip():
                continue
            event = json.loads(line)
            if event["id"] in seen:
                continue
            seen.add(event["id"])
            events.append(event)
    if report == "counts":
        counts = {}
        for e in events:
            counts[e["event"]] = counts.get(e["event"], 0) + 1
        print("event,count")
        for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{name},{n}")
    elif report == "top_buyers":
        orders, revenue = {}, {}
        for e in events:
            if e["event"] == "purchase":
                orders[e["user"]] = orders.get(e["user"], 0) + 1
                revenue[e["user"]] = revenue.get(e["user"], 0) + int(e["amount"])
        print("user,orders,revenue_cents")
        for user in sorted(orders, key=lambda u: (-revenue[u], u))[:__TOP_N__]:
            print(f"{user},{orders[user]},{revenue[user]}")
    elif report == "funnel":
        steps, reached, per_user = ["view", "cart", "purchase"], [0, 0, 0], {}
        for e in events:
            per_user.setdefault(e["user"], []).append(e)
        for evs in per_user.values():
            stage, last = 0, None
            for e in sorted(evs, key=lambda e: e["ts"]):
                if stage < 3 and e["event"] == steps[stage] and (last is None or e["ts"] > last):
                    reached[stage] += 1
                    stage, last = stage + 1, e["ts"]
        print("step,users")
        for step, n in zip(steps, reached):
            print(f"{step},{n}")
    elif report == "by_country":
        country = {}
        path = os.path.join(folder, "users.csv")
        if os.path.exists(path):
            with open(path) as handle:
                for line in list(handle)[1:]:
                    if line.strip():
                        user, where = line.strip().split(",")
                        country[user] = where
        users, buyers, revenue = {}, {}, {}
        for e in events:
            where = country.get(e["user"], "unknown")
            users.setdefault(where, set()).add(e["user"])
            if e["event"] == "purchase":
                buyers.setdefault(where, set()).add(e["user"])
                revenue[where] = revenue.get(where, 0) + int(e["amount"])
        print("country,users,buyers,revenue_cents")
        for c in sorted(users, key=lambda c: (-revenue.get(c, 0), c)):
            print(f"{c},{len(users[c])},{len(buyers.get(c, ()))},{revenue.get(c, 0)}")
    else:
        sys.exit(f"unknown report {report}")


main()
"""

_EVENTS_SH = r"""#!/bin/bash
# Reports over <folder>/events.jsonl (and users.csv): events.sh <folder> <report>
export LC_ALL=C
dir=$1
report=$2
events() {
  jq -r '[.id, .ts, .user, .event, (.amount // 0)] | @tsv' "$dir/events.jsonl" \
    | awk -F'\t' '!seen[$1]++'
}
case "$report" in
  counts)
    echo "event,count"
    events | awk -F'\t' '{ n[$4]++ } END { for (e in n) print e "," n[e] }' \
      | sort -t, -k2,2nr -k1,1
    ;;
  top_buyers)
    echo "user,orders,revenue_cents"
    events | awk -F'\t' '$4 == "purchase" { o[$3]++; r[$3] += $5 }
      END { for (u in o) print u "," o[u] "," r[u] }' | sort -t, -k3,3nr -k1,1 | head -n __TOP_N__
    ;;
  funnel)
    echo "step,users"
    events | sort -t "$(printf '\t')" -k3,3 -k2,2n | awk -F'\t' '
      $3 != user { user = $3; stage = 0; t = -1 }
      stage == 0 && $4 == "view" { stage = 1; t = $2; a++; next }
      stage == 1 && $4 == "cart" && $2 > t { stage = 2; t = $2; b++; next }
      stage == 2 && $4 == "purchase" && $2 > t { stage = 3; c++ }
      END { print "view," a + 0; print "cart," b + 0; print "purchase," c + 0 }'
    ;;
  by_country)
    echo "country,users,buyers,revenue_cents"
    events | awk -F'\t' -v users="$dir/users.csv" '
      BEGIN {
        while ((getline line < users) > 0) if (k++ > 0) { split(line, f, ","); c[f[1]] = f[2] }
      }
      {
        w = ($3 in c) ? c[$3] : "unknown"
        if (!($3 in seen)) { seen[$3] = 1; nu[w]++ }
        if ($4 == "purchase") { rev[w] += $5; if (!($3 in bought)) { bought[$3] = 1; nb[w]++ } }
      }
      END { for (w in nu) print w "," nu[w] "," nb[w] + 0 "," rev[w] + 0 }' \
      | sort -t, -k4,4nr -k1,1
    ;;
  *)
    echo "unknown report $report" >&2
    exit 1
    ;;
esac
"""

_EVENTS_TESTS = """
HERE = os.path.dirname(__file__)


def pristine():
    files = {}
    for name in ("events.jsonl", "users.csv"):
        if os.path.exists(os.path.join(HERE, name)):
            files[name] = read(os.path.join(HERE, name))
    return files


def test_report_files():
    files = pristine()
    for report in CFG["reports"]:
        path = os.path.join(CFG["out_dir"], report + ".csv")
        want, got = report_text(files, report, CFG["top_n"]), read(path)
        assert got == want, f"{path}:\\nexpected:\\n{want}\\ngot:\\n{got}"


def test_program_on_fresh_logs():
    if not CFG["code"]:
        return
    for seed in range(CFG["cases"]):
        rng = random.Random(1000 + seed)
        files = make_events(rng, CFG["level"], rng.randint(3, 30), rng.randint(5, 160))
        folder = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        for report in CFG["reports"]:
            done = run_program([folder, report])
            assert done.returncode == 0, f"{report}: exit {done.returncode} {done.stderr[-800:]}"
            want = report_text(files, report, CFG["top_n"])
            assert done.stdout == want, f"{seed} {report}: want\\n{want}got\\n{done.stdout}"
"""


@register
class EventFunnel(Family):
    """Answer product-analytics questions over a JSON-lines clickstream: event counts, top
    buyers, an ordered view→cart→purchase funnel and revenue by country (joined from a
    users CSV); duplicates and shuffled keys from level 3. Code asks for a report tool
    fuzzed on fresh logs."""

    name = "data_querying.event_funnel"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("counts", (r"`/app/(?P<out>\w+)/counts\.csv`: header `event,count`",),
             (r'"reports": \["counts"', r'if report == "counts":', r"def test_report_files\(",
              r'"out_dir": "/app/{out}"', r'os\.path\.join\(CFG\["out_dir"\], report')),
        Rule("top_buyers", (r"`/app/\w+/top_buyers\.csv`: header `user,orders,revenue_cents`, "
                            r"the \(at most\) (?P<n>\d+) users with the highest purchase",),
             (r'"reports": \[[^\]]*"top_buyers"', r'if report == "top_buyers":',
              r'"top_n": {n}\b', r"\[:top_n\]"),
             levels=frozenset({2, 3, 4})),
        Rule("funnel", (r"`/app/\w+/funnel\.csv`: header `step,users`",),
             (r'"reports": \[[^\]]*"funnel"', r'if report == "funnel":'),
             levels=frozenset({3, 4})),
        Rule("dedupe_event_ids", (r"Count every event id once",),
             (r"lines\.append\(lines\[-1\]\)", r'if event\["id"\] not in seen:'),
             levels=frozenset({3, 4})),
        Rule("by_country", (r"`/app/\w+/by_country\.csv`: header",),
             (r'"reports": \[[^\]]*"by_country"', r'if report == "by_country":'),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_program_on_fresh_logs\(", r'"program": "{program}"'),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "export query results to CSV with header rows": "counts",
        "find duplicate keys that break expected uniqueness": "dedupe_event_ids",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        files = _events_ns["make_events"](rng, level, 6 + 5 * level, 25 + 35 * level)
        reports = _EVENTS_REPORTS[:level]
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        code = ctx.needs_code or fuzz
        data = f"/app/{rng.choice(_EVENTS_DATA_DIRS)}"
        out = f"/app/{rng.choice(_EVENTS_OUT_DIRS)}"
        top_n = rng.randint(3, 8)
        describe = {
            "counts": f"`{out}/counts.csv`: header `event,count`, one row per event type, "
            "most frequent first (ties in byte order of the event name)",
            "top_buyers": f"`{out}/top_buyers.csv`: header `user,orders,revenue_cents`, the "
            f"(at most) {top_n} users with the highest purchase revenue (sum of `amount`), ties by "
            "user id in byte order; orders = their number of purchase events",
            "funnel": f"`{out}/funnel.csv`: header `step,users`, rows `view`, `cart`, "
            "`purchase`: how many users viewed, how many of those later put something in "
            "the cart, and how many of those then purchased (each step strictly later in "
            "`ts` than the step before it, for the same user)",
            "by_country": f"`{out}/by_country.csv`: header "
            "`country,users,buyers,revenue_cents`, one row per country (users missing from "
            "users.csv count as `unknown`): distinct users with any event, distinct users "
            "with a purchase, purchase revenue; highest revenue first, ties by country",
        }
        inputs = [
            f"`{data}/events.jsonl`: one JSON object per line with `id`, `ts` (unix "
            "seconds), `user`, `event` and, for purchases, `amount` in cents"
        ]
        if level >= 4:
            inputs.append(f"`{data}/users.csv`: `user,country` for the users we know")
        text = (
            rng.choice(_EVENTS_OPENERS)
            + "\n\n"
            + bullets(inputs)
            + "\n\nI need these reports (plain CSV, no spaces, each ending with a newline):\n\n"
            + numbered(describe[r] for r in reports)
        )
        if level >= 3:
            text += (
                "\n\nThe export is messy: the exporter sometimes writes the same event twice "
                "(same `id`) and the key order varies. Count every event id once."
            )
        program = program_path(ctx.language, "/app/" + rng.choice(_EVENTS_PROGRAMS))
        if code:
            text += "\n\n" + code_note(
                ctx,
                program,
                f"called with a data folder (laid out like `{data}`) and a report name ("
                + ", ".join(f"`{r}`" for r in reports)
                + "), it prints exactly that report's CSV.",
            )
            if fuzz:
                text += " I will compare it against a reference on many random logs."
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/events.sh"
        body = (_EVENTS_PY if lang == "python" else _EVENTS_SH).replace("__TOP_N__", str(top_n))
        lines = [f"head -n 3 {data}/events.jsonl", f"mkdir -p {out}"]
        if level >= 3:
            lines += [
                f"wc -l {data}/events.jsonl",
                f"jq -r .id {data}/events.jsonl | sort | uniq -d | head",
            ]
        lines += program_setup(lang, source, body)
        run = invoke(lang, source)
        lines += [f"{run} {data} {r} > {out}/{r}.csv" for r in reports]
        if level >= 4:
            lines += [
                f"head -n 3 {data}/users.csv",
                f"jq -r .event {data}/events.jsonl | sort | uniq -c",
                f"cat {out}/funnel.csv {out}/by_country.csv",
                f"wc -l {out}/*.csv",
            ]
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "reports": reports,
            "out_dir": out,
            "top_n": top_n,
            "cases": (8 if fuzz else 3) + level,
        }
        tests = {"test_task.py": minimal_test_file(params, _EVENTS_GEN + _EVENTS_TESTS)}
        tests.update(files)
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files={f"{data[len('/app/') :]}/{name}": text_ for name, text_ in files.items()},
        )
