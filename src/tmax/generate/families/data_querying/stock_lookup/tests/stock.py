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
    files["stock.csv"] = "sku,warehouse,qty\n" + "".join("%s,%s,%d\n" % r for r in rows)
    if level >= 2:
        unpriced = rng.choice(sorted({s for s, _, q in rows if q > 0} or skus))
        priced = [s for s in skus if s != unpriced and rng.random() < 0.9]
        files["prices.csv"] = "sku,price_cents\n" + "".join(
            "%s,%d\n" % (s, rng.randint(1, 400) * 5) for s in priced)
    if level >= 3:
        moves = []
        for _ in range(n_skus):
            sku, wh = rng.choice(skus), rng.choice(whs)
            moves.append((sku, wh, rng.randint(-have.get((sku, wh), 0), 25)))
            have[(sku, wh)] = have.get((sku, wh), 0) + moves[-1][2]
        files["moves.csv"] = "sku,warehouse,delta\n" + "".join("%s,%s,%d\n" % m for m in moves)
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
