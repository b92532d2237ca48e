{{ prelude }}
{{ oracle }}

def export_texts():
    texts = []
    for path in CFG["inputs"]:
        texts.append(read(path))
    return texts


def random_export(rng, ids):
    lines = ["txn_id,date,customer,amount,status"]
    for _ in range(rng.randint(1, 40)):
        if ids and rng.random() < 0.15:
            lines.append(rng.choice(ids))
            continue
        row = "T%05d,2024-0%d-%02d,%s,%d.%02d,%s" % (
            rng.randint(0, 99999), rng.randint(1, 9), rng.randint(1, 28),
            rng.choice(["acme", "zeta", "bolt", "kiwi", "Mango", "a_1"]), rng.randint(0, 5000),
            rng.randint(0, 99), rng.choice(["settled", "settled", "refund", "pending", "failed"]))
        ids.append(row)
        lines.append(row)
    return "\n".join(lines) + "\n"


def test_totals_file():
    want = totals_csv(export_texts(), CFG["level"])
    got = read("/app/out/totals.csv")
    assert got == want, f"totals.csv:\nexpected\n{want}\ngot\n{got}"


def test_derived():
    level = CFG["level"]
    totals, counts = customer_totals(export_texts(), level)
    if level >= 2:
        rows = sum(len([l for l in t.splitlines()[1:] if l.strip()]) for t in export_texts())
        kept = len({l.split(",")[0] for t in export_texts() for l in t.splitlines()[1:] if l})
        got = read("/app/out/duplicates.txt").strip()
        assert got == str(rows - kept), f"duplicates.txt should be {rows - kept}, got {got!r}"
    if level >= 3:
        top = sorted(totals, key=lambda c: (-totals[c], c))[:3]
        got = read("/app/out/top3.txt").split()
        assert got == top, f"top3.txt should be {top}, got {got}"
    if level >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        want = {"customers": len(totals), "grand_total": money(sum(totals.values()))}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/totals.csv", "/app/out/top3.txt", "/app/out/summary.json"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(31337)
    folder = workdir()
    for i in range(CFG["fresh"]):
        ids, paths, texts = [], [], []
        for j in range(rng.randint(1, 3)):
            text = random_export(rng, ids)
            path = os.path.join(folder, f"e{i}_{j}.csv")
            with open(path, "w") as handle:
                handle.write(text)
            paths.append(path)
            texts.append(text)
        want = totals_csv(texts, CFG["level"])
        got = run_program(paths).stdout
        assert got == want, f"fresh inputs {texts}:\nexpected\n{want}\ngot\n{got}"


def test_service():
    if not CFG["service"]:
        return
    totals, counts = customer_totals(export_texts(), CFG["level"])
    for customer in sorted(totals):
        status, body = http_get(CFG["port"], f"/customer/{customer}")
        data = json.loads(body)
        want = {"customer": customer, "total": money(totals[customer]), "count": counts[customer]}
        assert status == 200 and data == want, f"/customer/{customer}: want {want}, got {data}"
    try:
        status, _ = http_get(CFG["port"], "/customer/nobody-here")
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 404, f"an unknown customer should get 404, got {status}"
