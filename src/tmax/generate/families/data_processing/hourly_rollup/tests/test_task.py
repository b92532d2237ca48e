{{ prelude }}
{{ oracle }}

def random_file(rng):
    lines = ["timestamp,sensor,value"]
    for _ in range(rng.randint(1, 50)):
        if rng.random() < 0.08:
            lines.append(rng.choice(["garbage", "2024-01-01T00:00:00Z,t1", ",,", "x,y,z",
                                     "2024-01-01T00:00:00Z,t1,-3.5",
                                     "2024-01-01T00:00:00Z,t2,12.25",
                                     "2024-1-01T00:00:00Z,t1,1.0",
                                     "2024-01-01 00:00:00Z,t1,1.0"]))
            continue
        zone = rng.choice(["Z", "Z", "+02:00", "-05:30", "+00:00"])
        stamp = "2024-%02d-%02dT%02d:%02d:%02d%s" % (rng.choice([2, 12]), rng.choice([1, 28, 29]),
                rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), zone)
        sensor = rng.choice(["t1", "t2", "hum"])
        lines.append(f"{stamp},{sensor},{rng.randint(0, 999)}.{rng.randint(0, 9)}")
    return "\n".join(lines) + "\n"


def test_rollup_file():
    texts = [read(p) for p in CFG["inputs"]]
    want = rollup(texts)
    got = read("/app/out/hourly.csv")
    assert got == want, f"hourly.csv:\nexpected\n{want}\ngot\n{got}"


def test_derived():
    level = CFG["level"]
    rows = [r.split(",") for r in rollup([read(p) for p in CFG["inputs"]]).splitlines()[1:]]
    if level >= 2:
        busiest = sorted(rows, key=lambda r: (-int(r[2]), r[0], r[1]))[0]
        got = read("/app/out/busiest.txt").strip()
        want = f"{busiest[0]} {busiest[1]}"
        assert got == want, f"busiest.txt should be {want!r}, got {got!r}"
    if level >= 3:
        sensors = sorted({r[1] for r in rows})
        want = "".join(f"{s} {max(float(r[4]) for r in rows if r[1] == s):.1f}\n" for s in sensors)
        got = read("/app/out/peaks.txt")
        assert got == want, f"peaks.txt:\nexpected\n{want}\ngot\n{got}"
    if level >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        want = {"rows": len(rows), "readings": sum(int(r[2]) for r in rows)}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/hourly.csv", "/app/out/busiest.txt", "/app/out/peaks.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(1234)
    folder = workdir()
    for i in range(CFG["fresh"]):
        paths, texts = [], []
        for j in range(rng.randint(1, 3)):
            text = random_file(rng)
            path = os.path.join(folder, f"r{i}_{j}.csv")
            with open(path, "w") as handle:
                handle.write(text)
            paths.append(path)
            texts.append(text)
        want = rollup(texts)
        got = run_program(paths).stdout
        assert got == want, f"fresh inputs {texts}:\nexpected\n{want}\ngot\n{got}"
