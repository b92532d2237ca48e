{{ prelude }}
{{ oracle }}

def mangle(rng, name, edits):
    s = list(name)
    for _ in range(edits):
        i = rng.randrange(len(s))
        op = rng.choice("sdi")
        if op == "s":
            s[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif op == "d" and len(s) > 3:
            del s[i]
        else:
            s.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz"))
    out = "".join(s)
    if rng.random() < 0.4:
        out = out.upper() if rng.random() < 0.5 else out.lower()
    if rng.random() < 0.3:
        out = out.replace(" ", "  ") + rng.choice([".", ",", " "])
    return out


def fresh_case(rng):
    canon = rng.sample(CFG["pool"], rng.randint(4, 10))
    names, truth = [], []
    for _ in range(rng.randint(3, 12)):
        if CFG["limit"] is not None and rng.random() < 0.2:
            names.append("".join(rng.choice("qwxzjkvb") for _ in range(rng.randint(10, 16))))
            truth.append("UNMATCHED")
        else:
            c = rng.choice(canon)
            names.append(mangle(rng, c, rng.randint(0, 3)))
            truth.append(c)
    return canon, names, truth


def accuracy(lines, names, truth, label):
    assert len(lines) == len(names), f"{label}: {len(names)} lines expected, got {len(lines)}"
    hits = 0
    for line, name, want in zip(lines, names, truth):
        got_name, _, got = line.partition("\t")
        assert got_name == name, f"{label}: line for {name!r} expected, got {line!r}"
        hits += got == want
    return hits / len(names)


def test_matches():
    for src, out in CFG["pairs"]:
        got = [l for l in read(out).split("\n") if l.strip()]
        names = [l for l in read(src).splitlines() if l.strip()]
        if CFG["mode"] == "metric":
            acc = accuracy(got, names, CFG["truth"][src], out)
            assert acc >= CFG["threshold"], f"{out}: accuracy {acc:.3f} < {CFG['threshold']}"
        else:
            want = match_lines(read(CFG["canon"]), read(src), CFG["limit"])
            assert got == want, f"{out}:\nexpected\n" + "\n".join(want) + "\ngot\n" + "\n".join(got)


def test_derived():
    level = CFG["level"]
    if level >= 3:
        rows = [l.split("\t") for _, out in CFG["pairs"] for l in read(out).split("\n")
                if l.strip()]
        counts = {}
        for _, c in rows:
            if c != "UNMATCHED":
                counts[c] = counts.get(c, 0) + 1
        want = "".join(f"{n} {c}\n" for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
        got = read(CFG["outdir"] + "/counts.txt")
        assert got == want, f"counts.txt (from your matches):\nexpected\n{want}\ngot\n{got}"
        if level >= 4:
            unmatched = sorted(n for n, c in rows if c == "UNMATCHED")
            got = [l for l in read(CFG["outdir"] + "/unmatched.txt").split("\n") if l]
            assert got == unmatched, f"unmatched.txt should be {unmatched}, got {got}"
            summary = json.loads(read(CFG["outdir"] + "/summary.json"))
            want = {"names": len(rows), "matched": len(rows) - len(unmatched)}
            assert summary == want, f"summary.json should be {want}, got {summary}"
            outdir = CFG["outdir"]
            check_manifest(outdir + "/checksums.sha256", [out for _, out in CFG["pairs"]]
                           + [outdir + "/counts.txt", outdir + "/unmatched.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(555)
    folder = workdir()
    scores = []
    for i in range(CFG["fresh"]):
        canon, names, truth = fresh_case(rng)
        a, b = os.path.join(folder, f"canon{i}.txt"), os.path.join(folder, f"names{i}.txt")
        with open(a, "w") as handle:
            handle.write("\n".join(canon) + "\n")
        with open(b, "w") as handle:
            handle.write("\n".join(names) + "\n")
        got = [l for l in run_program([a, b]).stdout.split("\n") if l.strip()]
        if CFG["mode"] == "metric":
            scores.append(accuracy(got, names, truth, f"fresh case {i}"))
        else:
            want = match_lines("\n".join(canon), "\n".join(names), CFG["limit"])
            assert got == want, f"fresh case {i}: expected {want}, got {got}"
    if scores:
        acc = sum(scores) / len(scores)
        assert acc >= CFG["threshold"], f"program accuracy {acc:.3f} < {CFG['threshold']}"
