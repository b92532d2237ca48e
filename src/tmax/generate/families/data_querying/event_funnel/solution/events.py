import json
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
        for user in sorted(orders, key=lambda u: (-revenue[u], u))[:{{ top_n }}]:
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
