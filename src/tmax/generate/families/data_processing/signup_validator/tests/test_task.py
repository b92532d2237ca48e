{{ prelude }}
{{ oracle }}

def clean_line(rng, used):
    while True:
        rid = ID_PREFIX + "%06d" % rng.randint(0, 999999)
        if rid not in used:
            used.add(rid)
            break
    local = rng.choice(["ana", "bo.li", "x_y", "k+tag", "lee-9", "m"])
    domain = rng.choice(["mail.example", "corp-1.co", "uni.ac", "xy"])
    tld = rng.choice(["com", "org", "io", "museum"])
    year = rng.choice([2020, 2023, 2024])
    day = "%04d-%02d-%02d" % (year, rng.randint(1, 12), rng.randint(1, 28))
    amount = "%d.%02d" % (rng.randint(0, AMOUNT_CAP - 1), rng.randint(0, 99))
    return f"{rid},{local}@{domain}.{tld},{day},{amount}"


def evil_line(rng, used, level):
    good = clean_line(rng, used).split(",")
    kinds = ["fields", "id", "email_upper", "email_noat", "email_dots", "email_tld", "date_fmt",
             "amount_fmt", "quoted", "space", "empty"]
    if level >= 2:
        kinds += ["feb30", "month13", "feb29"]
    if level >= 3:
        kinds += ["negative", "huge"]
    kind = rng.choice(kinds)
    if kind == "fields":
        good.append("extra")
    elif kind == "id":
        p = ID_PREFIX
        good[0] = rng.choice([p + "12345", p.lower() + "123456", p + "1234567", "X123456",
                              p + "12345a"])
    elif kind == "email_upper":
        good[1] = good[1].upper()
    elif kind == "email_noat":
        good[1] = good[1].replace("@", "")
    elif kind == "email_dots":
        good[1] = rng.choice([".a@b.com", "a.@b.com", "a..b@c.com", "a@b..com", "a@.b.com"])
    elif kind == "email_tld":
        good[1] = rng.choice(["a@b.c", "a@b.c0m", "a@b.abcdefghijk", "a@b"])
    elif kind == "date_fmt":
        good[2] = rng.choice(["2024/01/02", "24-01-02", "2024-1-02", "2024-01-2x"])
    elif kind == "amount_fmt":
        good[3] = rng.choice(["12", "12.5", "1,00", "12.345", "abc", ".50", "+1.00"])
    elif kind == "quoted":
        good[1] = '"' + good[1] + '"'
    elif kind == "space":
        good[rng.randrange(4)] += " "
    elif kind == "empty":
        return ""
    elif kind == "feb30":
        good[2] = "2024-02-30"
    elif kind == "month13":
        good[2] = "2023-13-01"
    elif kind == "feb29":
        good[2] = rng.choice(["2023-02-29", "1900-02-29"])
    elif kind == "negative":
        good[3] = "-" + good[3]
    elif kind == "huge":
        good[3] = "%d.01" % AMOUNT_CAP
    return ",".join(good)


def test_fixture_outputs():
    if not CFG["files_out"]:
        return
    text = read(CFG["input"])
    keep, bad = filter_signups(text, CFG["level"])
    got = read("/app/out/clean.csv")
    want = "".join(line + "\n" for _, line in keep)
    assert got == want, f"clean.csv:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 2:
        got = read("/app/out/rejected.txt").split()
        assert got == [str(n) for n, _ in bad], f"rejected.txt should list {[n for n, _ in bad]}"
    if CFG["level"] >= 3:
        by_year = {}
        for _, line in keep:
            by_year[line.split(",")[2][:4]] = by_year.get(line.split(",")[2][:4], 0) + 1
        want = "".join(f"{y} {c}\n" for y, c in sorted(by_year.items()))
        got = read("/app/out/per_year.txt")
        assert got == want, f"per_year.txt:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        want = {"accepted": len(keep), "rejected": len(bad)}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/clean.csv", "/app/out/rejected.txt", "/app/out/per_year.txt"])


def test_hidden_corpus():
    if not CFG["code"]:
        return
    rng = random.Random(8080)
    used = set()
    lines = []
    for _ in range(CFG["fresh"]):
        lines.append((clean_line(rng, used), True))
        lines.append((evil_line(rng, used, CFG["level"]), False))
    rng.shuffle(lines)
    if CFG["level"] >= 4:
        originals = [line for line, ok in lines if ok]
        for line in rng.sample(originals, min(3, len(originals))):
            lines.append((line.split(",")[0] + ",dup@x.org,2024-01-01,1.00", False))
    text = "".join(line + "\n" for line, _ in lines)
    path = os.path.join(workdir(), "signups.csv")
    with open(path, "w", newline="") as handle:
        handle.write(text)
    keep, _ = filter_signups(text, CFG["level"])
    assert [l for l, ok in lines if ok] == [l for _, l in keep], "test corpus self-check"
    got = run_program([path]).stdout.split("\n")[:-1]
    want = [l for l, ok in lines if ok]
    missed = [l for l in got if l not in want]
    lost = [l for l in want if l not in got]
    assert not missed, f"{len(missed)} invalid records accepted, e.g. {missed[:3]}"
    assert not lost, f"{len(lost)} valid records rejected, e.g. {lost[:3]}"
    assert got == want, "valid records must be printed unchanged and in input order"
