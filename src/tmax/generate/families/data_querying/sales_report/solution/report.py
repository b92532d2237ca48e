import json
import os
import sqlite3
import sys

QUERIES = json.loads({{ queries | py }})
LEVEL = {{ level }}


def main():
    db, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    con = sqlite3.connect(db)

    def dump(name, sql):
        cur = con.execute(sql)
        with open(os.path.join(out, name), "w") as handle:
            handle.write(",".join(d[0] for d in cur.description) + "\n")
            for row in cur:
                handle.write(",".join(str(v) for v in row) + "\n")

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
            handle.write(summary + "\n")


main()
