{{ head }}

FW_NAMES = {{ names | py }}
FW_TRICKY = {{ tricky | py }}
FW_ACCENTED = {{ accented | py }}

{{ functions }}

{{ settings }}

LEVEL = CFG["level"]
LAYOUT = fw_parse_layout(Path("{{ layout_path }}").read_text())
CONVERTED = {
    n: fw_convert(Path("{{ folder }}", n).read_bytes(), LAYOUT, LEVEL, CFG["group"])
    for n in CFG["names"]
}


def read_utf8(path):
    p = Path(path)
    assert p.is_file(), f"{path} is missing"
    return p.read_bytes().decode("utf-8")


def good_rows():
    return [(n, row) for n in CFG["names"] for row in CONVERTED[n][1]]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_records_csv():
    header = [name for name, _s, _w, _k in LAYOUT]
    if LEVEL <= 2:
        expected = fw_csv_text(header, CONVERTED[CFG["names"][0]][1])
    else:
        expected = fw_csv(["file"] + header) + "\n"
        expected += "".join(fw_csv([n] + row[0]) + "\n" for n, row in good_rows())
    assert read_utf8("{{ out }}/records.csv") == expected, "records.csv is wrong"


def test_group_totals():
    if CFG["level"] >= 2:
        totals = {}
        for _n, (_values, cents, key) in good_rows():
            totals[key] = totals.get(key, 0) + cents
        expected = "".join(f"{k} {fw_money(c)}\n" for k, c in sorted(totals.items()))
        assert read("{{ out }}/{{ group }}_totals.txt") == expected, "{{ group }}_totals.txt is wrong"


def validation():
    rows = []
    for name in CFG["names"]:
        data = Path("{{ folder }}", name).read_bytes().decode("latin-1")
        lines = [l.rstrip("\r") for l in data.split("\n")]
        count = sum(1 for l in lines if l.startswith("D"))
        total = sum(cents for _v, cents, _d in CONVERTED[name][1])
        trailer = [l for l in lines if l.startswith("T")][0]
        ok = int(trailer[1:9]) == count and int(trailer[9:]) == total
        rows.append((name, count, total, "OK" if ok else "MISMATCH"))
    return rows


def test_validation():
    if CFG["level"] >= 3:
        expected = "".join(f"{n} {c} {fw_money(t)} {s}\n" for n, c, t, s in validation())
        assert read("{{ out }}/validation.txt") == expected, "validation.txt is wrong"


def test_rejects_and_summary():
    if CFG["level"] >= 4:
        rejects = [f"{n}:{line} {why}\n" for n in CFG["names"] for line, why in CONVERTED[n][2]]
        assert read("{{ out }}/rejects.txt") == "".join(rejects), "rejects.txt is wrong"
        data = json.loads(read("{{ out }}/summary.json"))
        want = {
            "files": len(CFG["names"]),
            "records": len(good_rows()),
            "rejected": len(rejects),
            "total": fw_money(sum(row[1] for _n, row in good_rows())),
            "mismatched": [n for n, _c, _t, s in validation() if s == "MISMATCH"],
        }
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_converter_on_fresh_files(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(7070)
    for case in range(CFG["cases"]):
        layout = fw_layout(rng, LEVEL)
        layout_path = tmp_path / f"layout{case}.txt"
        layout_path.write_text(fw_layout_text(layout))
        broken = rng.randint(0, 3) if LEVEL >= 4 else 0
        data = fw_file(rng, layout, LEVEL, rng.randint(1, 25), broken, rng.random() < 0.5)
        data_path = tmp_path / f"data{case}.dat"
        data_path.write_bytes(data)
        done = subprocess.run(
            program() + [str(layout_path), str(data_path)], capture_output=True, timeout=60
        )
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]!r}"
        header, rows, _rejects = fw_convert(data, layout, LEVEL)
        expected = fw_csv_text(header, rows)
        got = done.stdout.decode("utf-8", "replace")
        assert got == expected, (
            f"case {case}: wrong CSV\n--- got\n{got[:800]}\n--- expected\n{expected[:800]}"
        )
