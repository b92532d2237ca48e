{{ prelude }}
{{ oracle }}

def clean_entry(rng, level):
    if level >= 3 and rng.random() < 0.15:
        return rng.choice(["@daily", "@reboot", "@weekly", "@annually"]) + " /usr/local/bin/job.sh"
    if level >= 4 and rng.random() < 0.1:
        return rng.choice(["MAILTO=ops@example.com", "PATH=/usr/bin:/bin", "SHELL=/bin/bash"])
    fields = []
    for k, (lo, hi) in enumerate([(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]):
        kind = rng.random()
        if kind < 0.3:
            fields.append("*")
        elif kind < 0.45:
            fields.append(f"*/{rng.randint(1, 15)}")
        elif kind < 0.6:
            a = rng.randint(lo, hi)
            fields.append(f"{a}-{rng.randint(a, hi)}" + rng.choice(["", f"/{rng.randint(1, 5)}"]))
        elif kind < 0.75:
            fields.append(",".join(str(rng.randint(lo, hi)) for _ in range(rng.randint(2, 4))))
        elif level >= 2 and k == 3:
            fields.append(rng.choice(["jan", "MAR", "Dec", "jun-aug"]))
        elif level >= 2 and k == 4:
            fields.append(rng.choice(["mon", "Fri", "mon-fri", "sun,sat"]))
        else:
            fields.append(str(rng.randint(lo, hi)))
    sep = rng.choice([" ", "\t", "  "])
    return sep.join(fields) + sep + rng.choice(["/opt/backup.sh --full", "echo hi > /dev/null",
                                                  "run-parts /etc/cron.hourly"])


def evil_entry(rng, level):
    good = clean_entry(rng, 1).split()
    while len(good) < 6:
        good = clean_entry(rng, 1).split()
    bad = [
        lambda: good[:4],
        lambda: ["60"] + good[1:],
        lambda: good[:1] + ["24"] + good[2:],
        lambda: good[:2] + ["0"] + good[3:],
        lambda: good[:3] + ["13"] + good[4:],
        lambda: good[:4] + ["8"] + good[5:],
        lambda: ["*/0"] + good[1:],
        lambda: ["5-2"] + good[1:],
        lambda: ["1,,2"] + good[1:],
        lambda: ["abc"] + good[1:],
        lambda: ["-1"] + good[1:],
        lambda: ["*/"] + good[1:],
        lambda: ["5/2"] + good[1:],
        lambda: ["jan"] + good[1:],
        lambda: good[:5],
        lambda: good[:3] + ["1-"] + good[4:],
        lambda: good[:3] + ["7-3"] + good[4:],
    ]
    if level < 2:
        bad.append(lambda: good[:3] + ["jan"] + good[4:])
        bad.append(lambda: good[:4] + ["mon"] + good[5:])
    else:
        bad.append(lambda: good[:4] + ["monday"] + good[5:])
        bad.append(lambda: good[:3] + ["janfeb"] + good[4:])
    if level < 3:
        bad.append(lambda: ["@daily", "/bin/job"])
    else:
        bad.append(lambda: ["@hourlyy", "/bin/job"])
        bad.append(lambda: ["@daily"])
    if level < 4:
        bad.append(lambda: ["MAILTO=root"])
    else:
        bad.append(lambda: ["1X=3"])
    line = " ".join(rng.choice(bad)())
    assert cron_line_state(line, level) == "bad", line
    return line


def test_invalid_report():
    if not CFG["files_out"]:
        return
    want = [f"{os.path.basename(p)}:{n}" for p in CFG["tabs"]
            for n in invalid_lines(read(p), CFG["level"])]
    got = [l for l in read("/app/out/invalid.txt").split("\n") if l.strip()]
    assert got == want, f"invalid.txt should be {want}, got {got}"
    if CFG["level"] >= 2:
        rows = []
        for p in CFG["tabs"]:
            states = [cron_line_state(l, CFG["level"]) for l in read(p).split("\n")]
            rows.append(f"{os.path.basename(p)} {states.count('ok')} {states.count('bad')}")
        got = [l for l in read("/app/out/counts.txt").split("\n") if l.strip()]
        assert got == rows, f"counts.txt should be {rows}, got {got}"
    if CFG["level"] >= 3:
        for p in CFG["tabs"]:
            text = read(p)
            bad = set(invalid_lines(text, CFG["level"]))
            want = "".join(l + "\n" for n, l in enumerate(text.split("\n"), 1)
                           if n not in bad and not (n == len(text.split("\n")) and l == ""))
            out = "/app/out/clean/" + os.path.basename(p)
            assert read(out) == want, f"{out} should hold the file minus its invalid lines"
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        total = sum(len(invalid_lines(read(p), CFG["level"])) for p in CFG["tabs"])
        want = {"files": len(CFG["tabs"]), "invalid": total}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", ["/app/out/invalid.txt",
                       "/app/out/counts.txt"])


def test_hidden_corpus():
    if not CFG["code"]:
        return
    rng = random.Random(4711)
    lines, evil = [], set()
    for _ in range(CFG["fresh"]):
        lines.append(clean_entry(rng, CFG["level"]))
        lines.append(evil_entry(rng, CFG["level"]))
        evil.add(len(lines))
        if rng.random() < 0.2:
            lines.append(rng.choice(["# nightly jobs", "", "   ", "\t# indented comment"]))
    path = os.path.join(workdir(), "crontab")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    got = [int(x) for x in run_program([path]).stdout.split()]
    assert invalid_lines("\n".join(lines) + "\n", CFG["level"]) == sorted(evil), "self-check"
    missed = sorted(evil - set(got))
    wrong = sorted(set(got) - evil)
    shown = [lines[n - 1] for n in missed[:5]]
    assert not missed, f"invalid entries not reported: {shown}"
    shown = [lines[n - 1] if n <= len(lines) else n for n in wrong[:5]]
    assert not wrong, f"valid lines reported: {shown}"
    assert got == sorted(evil), "report each invalid line number once, ascending"
