{{ head }}
{{ generator }}

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
    files["region_revenue.csv"] = "region,revenue_cents\n" + "".join(
        f"{r},{v}\n" for r, v in rows)
    if level >= 2:
        top = sorted((c for c in spend if count[c] >= min_orders), key=lambda c: (-spend[c], c))
        files["top_customers.csv"] = "customer_id,name,orders,spend_cents\n" + "".join(
            f"{c},{customers[c][1]},{count[c]},{spend[c]}\n" for c in top)
    if level >= 3:
        cats = sorted({p[2] for p in data["products"]})
        cells = {}
        for oid, pid, qty in data["items"]:
            if oid in done:
                key = (orders[oid][2][:7], products[pid][2])
                cells[key] = cells.get(key, 0) + qty * products[pid][3]
        months = sorted({orders[o][2][:7] for o in done})
        text = "month," + ",".join(cats) + "\n"
        for m in months:
            text += m + "," + ",".join(str(cells.get((m, c), 0)) for c in cats) + "\n"
        files["monthly_by_category.csv"] = text
    if level >= 4:
        best = {}
        for cid in spend:
            reg = customers[cid][2]
            if reg not in best or (-spend[cid], cid) < (-spend[best[reg]], best[reg]):
                best[reg] = cid
        files["region_leaders.csv"] = "region,customer_id,name,spend_cents\n" + "".join(
            f"{r},{c},{customers[c][1]},{spend[c]}\n" for r, c in sorted(best.items()))
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
            assert got == want, f"{path} differs.\nexpected:\n{want}\ngot:\n{got}"


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
