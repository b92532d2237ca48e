def make_centers(rng, k, d):
    while True:
        centers = [[round(rng.uniform(0, 9), 2) for _ in range(d)] for _ in range(k)]
        gaps = [sum((a - b) ** 2 for a, b in zip(p, q)) ** 0.5
                for i, p in enumerate(centers) for q in centers[i + 1:]]
        if min(gaps) >= 4.5:
            return centers


def make_rows(rng, centers, labels, n, noise, missing):
    rows = []
    for _ in range(n):
        c = rng.randrange(len(centers))
        values = [rng.gauss(m, 1.0) for m in centers[c]]
        values += [rng.gauss(50.0, 40.0) for _ in range(noise)]
        cells = ["" if rng.random() < missing else "%.3f" % v for v in values]
        rows.append((cells, labels[c]))
    return rows


def table(rows, with_label):
    d = len(rows[0][0])
    head = ",".join("f%d" % (i + 1) for i in range(d)) + (",label" if with_label else "")
    body = "".join(",".join(cells) + ("," + lab if with_label else "") + "\n"
                   for cells, lab in rows)
    return head + "\n" + body
