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
    files = {"events.jsonl": "\n".join(lines) + "\n"}
    if level >= 4:
        countries = rng.sample(["de", "fr", "nl", "pl", "se", "es", "it"], 4)
        known = [u for u in users if rng.random() < 0.85]
        files["users.csv"] = "user,country\n" + "".join(
            "%s,%s\n" % (u, rng.choice(countries)) for u in known)
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
        return "event,count\n" + "".join("%s,%d\n" % r for r in rows)
    if report == "top_buyers":
        orders, revenue = {}, {}
        for e in events:
            if e["event"] == "purchase":
                orders[e["user"]] = orders.get(e["user"], 0) + 1
                revenue[e["user"]] = revenue.get(e["user"], 0) + e["amount"]
        rows = sorted(orders, key=lambda u: (-revenue[u], u))[:top_n]
        return "user,orders,revenue_cents\n" + "".join(
            "%s,%d,%d\n" % (u, orders[u], revenue[u]) for u in rows)
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
        return "step,users\n" + "".join("%s,%d\n" % p for p in zip(steps, reached))
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
        return "country,users,buyers,revenue_cents\n" + "".join(
            "%s,%d,%d,%d\n" % (c, len(users[c]), len(buyers.get(c, ())), revenue.get(c, 0))
            for c in rows)
    raise ValueError(report)
