{{ prelude }}
{{ oracle }}

def close(a, b, rel):
    return abs(a - b) <= rel * max(1.0, abs(b))


def parse(text):
    rows = {}
    for line in text.splitlines():
        if line.strip():
            name, value = line.split()
            rows[name] = float(value)
    return rows


def random_cases(rng, count):
    lines = []
    for i in range(count):
        k = rng.choice([50.0, 120.0, 1000.0, 7.5])
        lines.append("c%d %.3f %g %.4f %g %d" % (i, rng.uniform(0.05, 2.5), k,
                     rng.uniform(0.01, 0.9) * k, rng.choice([0.01, 0.05, 0.1, 0.25]),
                     rng.randint(1, 200)))
    return "\n".join(lines) + "\n"


def check_against(text, got, label):
    want = parse(solve_cases(text, CFG["mode"]))
    got = parse(got)
    assert list(got) == list(want), (
        f"{label}: expected cases {list(want)} in input order, got {list(got)}")
    for name in want:
        if CFG["mode"] == "metric":
            err = abs(got[name] - want[name]) / abs(want[name])
            assert err <= CFG["tol"], (
                f"{label}: {name} relative error {err:.3g} vs exact solution > {CFG['tol']:g}")
        else:
            assert close(got[name], want[name], 1e-6), (
                f"{label}: {name} expected {want[name]:.6f}, got {got[name]}")


def test_final_values():
    for src, out in CFG["pairs"]:
        check_against(read(src), read(out), out)


def test_derived():
    if CFG["level"] >= 2:
        src = CFG["pairs"][0][0]
        first = [l.split() for l in read(src).splitlines() if l.strip() and l[0] != "#"][0]
        ys = rk4_final(float(first[1]), float(first[2]), float(first[3]), float(first[4]),
                       int(first[5]))
        rows = [l.split() for l in read("/app/out/trajectory.tsv").splitlines() if l.strip()]
        assert len(rows) == len(ys), f"trajectory.tsv needs {len(ys)} rows, has {len(rows)}"
        for i, (row, y) in enumerate(zip(rows, ys)):
            assert int(row[0]) == i and close(float(row[1]), y, 1e-6), (
                f"trajectory.tsv row {i}: expected {i} {y:.6f}, got {row}")
    if CFG["level"] >= 3:
        got = read("/app/out/largest.txt").split()
        best = None
        for src, _ in CFG["pairs"]:
            for name, value in parse(solve_cases(read(src), CFG["mode"])).items():
                if best is None or value > best[1]:
                    best = (name, value)
        assert got and got[0] == best[0], f"largest.txt should name {best[0]}, got {got}"
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        count = sum(len(parse(solve_cases(read(src), CFG["mode"]))) for src, _ in CFG["pairs"])
        assert summary.get("cases") == count, f"summary.json cases should be {count}: {summary}"
        check_manifest("/app/out/checksums.sha256", [out for _, out in CFG["pairs"]])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(777)
    folder = workdir()
    for i in range(CFG["fresh"]):
        path = os.path.join(folder, f"cases{i}.txt")
        text = random_cases(rng, rng.randint(1, 6))
        with open(path, "w") as handle:
            handle.write(text)
        check_against(text, run_program([path]).stdout, f"fresh input #{i}")


def test_service():
    if not CFG["service"]:
        return
    rng = random.Random(99)
    for _ in range(8):
        r, k = rng.uniform(0.1, 2.0), rng.choice([10.0, 100.0])
        y0, h, steps = rng.uniform(0.05, 0.9) * k, rng.choice([0.05, 0.1]), rng.randint(1, 100)
        status, body = http_get(CFG["port"], f"/solve?r={r}&k={k}&y0={y0}&h={h}&steps={steps}")
        want = rk4_final(r, k, y0, h, steps)[-1]
        assert status == 200 and close(float(body), want, 1e-6), (
            f"service: expected {want:.6f}, got {status} {body!r}")
    try:
        status, _ = http_get(CFG["port"], "/solve?r=oops")
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 400, f"a malformed query should get HTTP 400, got {status}"
