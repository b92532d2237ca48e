{{ prelude }}
{{ tables }}
{{ oracle }}
import re

HERE = os.path.dirname(__file__)
TOL = CFG["tolerance"]


def compare(got, want, what):
    got_rows = [line.split(",") for line in got.splitlines()]
    want_rows = [line.split(",") for line in want.splitlines()]
    assert got.endswith("\n"), f"{what}: must end with a newline"
    assert len(got_rows) == len(want_rows), f"{what}: {len(got_rows)} lines, want {len(want_rows)}"
    assert got_rows[0] == want_rows[0], f"{what}: header {got_rows[0]}, want {want_rows[0]}"
    for i, (g, w) in enumerate(zip(got_rows, want_rows)):
        assert len(g) == len(w), f"{what} line {i + 1}: {len(g)} cells, want {len(w)}"
        for a, b in zip(g, w):
            if "." not in b:
                assert a == b, f"{what} line {i + 1}: {a!r}, want {b!r}"
                continue
            if CFG["exact"]:
                assert re.fullmatch(r"-?[0-9]+[.][0-9]{4}", a), f"{what} line {i + 1}: {a!r}"
            try:
                value = float(a)
            except ValueError:
                raise AssertionError(f"{what} line {i + 1}: {a!r} is not a number")
            assert abs(value - float(b)) <= TOL, f"{what} line {i + 1}: {a}, want {b}"


def pristine(name):
    return read(os.path.join(HERE, name))


def test_outputs():
    train = pristine("train.csv")
    holdout = pristine("holdout.csv") if CFG["level"] >= 4 else None
    for report, path in CFG["outputs"].items():
        compare(read(path), prep(report, train, CFG["level"], holdout), path)


def test_program_on_fresh_tables():
    if not CFG["code"]:
        return
    level = CFG["level"]
    for seed in range(CFG["cases"]):
        rng = random.Random(500 + seed)
        numeric = rng.sample(sorted(SPANS), 2 + level // 2)
        cities = rng.sample(["oslo", "rome", "kyiv", "lima", "pune", "baku"], rng.randint(2, 4))
        folder = tempfile.mkdtemp()
        train = make_table(rng, level, rng.randint(5, 60), numeric, cities)
        holdout = make_table(rng, level, rng.randint(3, 20), numeric, cities + ["zug"], True)
        for name, text in (("train.csv", train), ("holdout.csv", holdout)):
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        for report in CFG["outputs"]:
            args = [report, os.path.join(folder, "train.csv")]
            if report in ("apply", "drift"):
                args.append(os.path.join(folder, "holdout.csv"))
            done = run_program(args)
            assert done.returncode == 0, f"{report}: exit {done.returncode} {done.stderr[-800:]}"
            compare(done.stdout, prep(report, train, level, holdout), f"seed {seed} {report}")
