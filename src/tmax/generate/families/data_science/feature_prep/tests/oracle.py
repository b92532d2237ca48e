def parse(text):
    lines = [line.split(",") for line in text.splitlines() if line.strip()]
    return lines[0], [dict(zip(lines[0], cells)) for cells in lines[1:]]


def fit(text, level):
    header, rows = parse(text)
    if level >= 3:
        rows = [r for r in rows if r["label"] != ""]
    numeric = [c for c in header if c not in ("id", "city", "label")]
    stats = {}
    for col in numeric:
        xs = [float(r[col]) for r in rows if r[col] != ""]
        mean = sum(xs) / len(xs)
        std = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
        s, n = sorted(xs), len(xs)
        median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        stats[col] = (len(rows) - len(xs), median, mean, std)
    cities = sorted({r["city"] for r in rows}) if level >= 3 else []
    return numeric, stats, cities, rows


def features(numeric, stats, cities, rows, with_label):
    head = ["id"] + numeric + ["city=" + c for c in cities] + (["label"] if with_label else [])
    out = [",".join(head)]
    for r in rows:
        cells = [r["id"]]
        for col in numeric:
            _, median, mean, std = stats[col]
            x = float(r[col]) if r[col] != "" else median
            cells.append("%.4f" % ((x - mean) / std if std else 0.0))
        cells += ["1" if r["city"] == c else "0" for c in cities]
        out.append(",".join(cells + ([r["label"]] if with_label else [])))
    return "\n".join(out) + "\n"


def prep(report, train, level, other=None):
    numeric, stats, cities, rows = fit(train, level)
    if report == "summary":
        out = ["column,missing,median,mean,std"]
        for col in numeric:
            missing, median, mean, std = stats[col]
            out.append("%s,%d,%.4f,%.4f,%.4f" % (col, missing, median, mean, std))
        return "\n".join(out) + "\n"
    if report == "features":
        return features(numeric, stats, cities, rows, True)
    _, others = parse(other)
    if report == "apply":
        return features(numeric, stats, cities, others, False)
    if report == "drift":
        out = ["column,train_mean,holdout_mean,shift"]
        for col in numeric:
            _, _, mean, std = stats[col]
            xs = [float(r[col]) for r in others if r[col] != ""]
            held = sum(xs) / len(xs)
            shift = (held - mean) / std if std else 0.0
            out.append("%s,%.4f,%.4f,%.4f" % (col, mean, held, shift))
        return "\n".join(out) + "\n"
    raise ValueError(report)
