{{ prelude }}
{{ blobs }}
HERE = os.path.dirname(__file__)


def accuracy(pred, truth):
    hits = sum(1 for p, t in zip(pred, truth) if p == t)
    return hits / len(truth)


def test_predictions_accuracy():
    truth = read(os.path.join(HERE, "truth.txt")).split()
    got = read("/app/out/predictions.txt").split("\n")
    assert got[-1] == "", "predictions.txt must end with a newline"
    got = got[:-1]
    assert len(got) == len(truth), f"expected {len(truth)} predictions, got {len(got)}"
    acc = accuracy(got, truth)
    assert acc >= CFG["threshold"], f"accuracy {acc:.4f} < {CFG['threshold']}"
    if CFG["level"] >= 2:
        counts = {}
        for label in got:
            counts[label] = counts.get(label, 0) + 1
        want = "label,count\n" + "".join(f"{k},{v}\n" for k, v in sorted(counts.items()))
        have = read("/app/out/class_counts.csv")
        assert have == want, f"class_counts.csv must count predictions: want\n{want}got\n{have}"


def test_program_on_fresh_split():
    if not CFG["code"]:
        return
    rng = random.Random(1234)
    p = CFG
    centers = make_centers(rng, len(p["labels"]), p["dims"])
    train = make_rows(rng, centers, p["labels"], 300, p["noise"], p["missing"])
    test = make_rows(rng, centers, p["labels"], 200, p["noise"], p["missing"])
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "train.csv"), "w") as handle:
        handle.write(table(train, True))
    with open(os.path.join(work, "test.csv"), "w") as handle:
        handle.write(table(test, False))
    done = run_program([os.path.join(work, "train.csv"), os.path.join(work, "test.csv")])
    assert done.returncode == 0, f"program failed: {done.stderr[-2000:]}"
    got = done.stdout.split()
    assert len(got) == len(test), f"expected {len(test)} predictions, got {len(got)}"
    acc = accuracy(got, [lab for _, lab in test])
    assert acc >= p["threshold"], f"accuracy on a fresh split {acc:.4f} < {p['threshold']}"


def test_service():
    if not CFG["service"]:
        return
    rng = random.Random(77)
    p = CFG
    rows = make_rows(rng, p["centers"], p["labels"], 60, p["noise"], p["missing"])
    sock = connect(p["port"])
    stream = sock.makefile("rw")
    got = []
    for cells, _ in rows:
        stream.write(",".join(cells) + "\n")
        stream.flush()
        got.append(stream.readline().strip())
    sock.close()
    acc = accuracy(got, [lab for _, lab in rows])
    assert acc >= p["threshold"], f"service accuracy {acc:.4f} < {p['threshold']}"
