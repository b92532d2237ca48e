SPANS = {"age": (18, 80), "income": (12, 250), "tenure": (0, 40), "visits": (0, 500)}


def make_table(rng, level, n_rows, numeric, cities, holdout=False):
    header = ["id"] + numeric + ["city"] + ([] if holdout else ["label"])
    lines = [",".join(header)]
    for i in range(n_rows):
        cells = ["%s%04d" % ("h" if holdout else "r", i + 1)]
        for col in numeric:
            lo, hi = SPANS[col]
            value = rng.randint(lo, hi) + (rng.randint(0, hi // 4) if holdout else 0)
            cells.append("" if i > 0 and rng.random() < 0.12 else str(value))
        cells.append(rng.choice(cities))
        if not holdout:
            cells.append("" if level >= 3 and i > 0 and rng.random() < 0.1 else rng.choice("01"))
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"
