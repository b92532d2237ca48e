def health_table(texts, level):
    """{service: (state, failures, checks, ok_checks, last3)} from check logs."""
    rows = []
    for text in texts:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 4 or parts[2] not in ("ok", "fail", "degraded"):
                continue
            rows.append((parts[0], parts[1], parts[2]))
    rows.sort()
    table = {}
    for stamp, service, state in rows:
        entry = table.setdefault(service, {"state": None, "failures": 0, "checks": 0, "ok": 0,
                                           "recent": []})
        entry["state"] = state
        entry["checks"] += 1
        entry["failures"] += state == "fail"
        entry["ok"] += state == "ok"
        entry["recent"] = (entry["recent"] + [state])[-3:]
    return table


def availability(entry):
    permille = (2000 * entry["ok"] + entry["checks"]) // (2 * entry["checks"])
    return "%d.%d" % (permille // 10, permille % 10)


def status_lines(texts, level):
    table = health_table(texts, level)
    out = []
    for service in sorted(table):
        e = table[service]
        line = f"{service} {e['state']} {e['failures']}"
        if level >= 2:
            line += " " + availability(e)
        out.append(line)
    return "".join(l + "\n" for l in out)
