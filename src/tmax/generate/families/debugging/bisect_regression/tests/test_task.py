{{ prelude }}
HERE = os.path.dirname(__file__)


def expect(text):
    totals = {}
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        sku, qty = line.split(",")
        totals[sku.strip()] = totals.get(sku.strip(), 0) + int(qty)
    kept = sorted(s for s in totals if totals[s] != 0)
    return "".join(f"{s} {totals[s]}\n" for s in kept) + f"skus {len(kept)}\n"


def test_first_bad_release():
    got = read("/app/out/first_bad.txt").split()
    want = CFG["bad"] if CFG["level"] >= 4 else CFG["bad"][:1]
    assert got == want, f"first_bad.txt: expected {want}, got {got}"


def test_changed_lines():
    if CFG["level"] >= 3:
        got = read("/app/out/changed_lines.txt").split()
        want = [str(n) for n in CFG["lines"]]
        if CFG["level"] < 4:
            want = want[:1]
        assert got == want, f"changed_lines.txt: expected {want}, got {got}"


def test_totals():
    if CFG["level"] >= 2:
        for name in CFG["data"]:
            stem = name.rsplit(".", 1)[0]
            want = expect(read(os.path.join(HERE, name)))
            got = read(f"/app/out/totals_{stem}.txt")
            assert got == want, f"totals_{stem}.txt:\nexpected:\n{want}\ngot:\n{got}"


def corpus():
    cases = [
        "sku,qty\n",
        "sku,qty\nAB1,5\n",
        "sku,qty\nAB1,5\n\nAB1,-5\nZZ9,-3\n",
        "sku,qty\nLONGSKU001,4\nLONGSKU002,7\nLONGSK,1\n",
        "sku,qty\nQ1,-2\nQ2,-9\nQ1,-1\n",
        "sku,qty\nX1,3\nX2,4\nX3,5\n",
        "sku,qty\nB7,10\nA7,-10\nA7,10\nC77777777,2\n",
    ]
    rng = random.Random(4242)
    for _ in range(CFG["cases"]):
        skus = ["S" + "".join(rng.choice("ABCDEFGHJK0123456789") for _ in range(rng.randint(2, 9)))
                for _ in range(rng.randint(1, 8))]
        rows = [f"{rng.choice(skus)},{rng.randint(-30, 60)}" for _ in range(rng.randint(1, 30))]
        cases.append("sku,qty\n" + "\n".join(rows) + "\n")
    return cases


def test_fixed_program_on_corpus():
    work = tempfile.mkdtemp()
    for i, text in enumerate(corpus()):
        path = os.path.join(work, f"case{i}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        done = run_program([path])
        assert done.returncode == 0, f"case {i}: exit {done.returncode} {done.stderr[-500:]}"
        want = expect(text)
        assert done.stdout == want, f"input:\n{text}\nexpected:\n{want}\ngot:\n{done.stdout}"
