import sys


def rows(path):
    with open(path) as handle:
        return [line.rstrip("\n").split(",") for line in handle][1:]


def main():
    train = rows(sys.argv[1])
    d = len(train[0]) - 1
    sums, counts = {}, {}
    for row in train:
        lab = row[d]
        sums.setdefault(lab, [0.0] * d)
        counts.setdefault(lab, [0] * d)
        for i, cell in enumerate(row[:d]):
            if cell != "":
                sums[lab][i] += float(cell)
                counts[lab][i] += 1
    means = {lab: [s / max(c, 1) for s, c in zip(sums[lab], counts[lab])] for lab in sums}
    var, seen = [0.0] * d, [0] * d
    for row in train:
        for i, cell in enumerate(row[:d]):
            if cell != "":
                var[i] += (float(cell) - means[row[d]][i]) ** 2
                seen[i] += 1
    var = [v / max(n, 1) + 1e-9 for v, n in zip(var, seen)]
    for row in rows(sys.argv[2]):
        best, label = None, None
        for lab in sorted(means):
            dist = sum((float(c) - means[lab][i]) ** 2 / var[i]
                       for i, c in enumerate(row[:d]) if c != "")
            if best is None or dist < best:
                best, label = dist, lab
        print(label, flush=True)


main()
