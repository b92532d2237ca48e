{{ prelude }}
{{ oracle }}

def rand_seq(rng, n):
    return "".join(rng.choice("ACGTACGTACGTN") for _ in range(n))


def clean_fasta(rng):
    out = []
    for i in range(rng.randint(1, 5)):
        header = f">seq{i}_{rng.randint(0, 999)}" + rng.choice(["", " sample=lake", " len ok"])
        out.append(header)
        seq = rand_seq(rng, rng.randint(1, 150))
        out += [seq[j:j + 60] for j in range(0, len(seq), 60)]
    return "\n".join(out) + "\n"


def evil_fasta(rng, level, index):
    # an invalid file; index walks through every kind of malformation in turn
    base = clean_fasta(rng).split("\n")[:-1]
    kinds = ["noheader", "badres", "lower", "emptyhdr", "emptyrec", "blank", "nonewline",
             "empty", "spacehdr", "crlf", "tabhdr"]
    if level >= 2:
        kinds.append("dup")
    if level >= 3:
        kinds.append("long")
    kind = kinds[index % len(kinds)]
    if kind == "noheader":
        base = [rand_seq(rng, 10)] + base
    elif kind == "badres":
        i = rng.randrange(1, len(base)) if len(base) > 1 else 0
        base.insert(i + 1, rand_seq(rng, 5) + rng.choice("XBZ-*1 ") + rand_seq(rng, 3))
    elif kind == "lower":
        base.append(rand_seq(rng, 4).lower() + "a")
    elif kind == "emptyhdr":
        base += [">", rand_seq(rng, 7)]
    elif kind == "emptyrec":
        base.insert(0, ">orphan")
    elif kind == "blank":
        base.insert(len(base) // 2 + 1, "")
    elif kind == "nonewline":
        return "\n".join(base)
    elif kind == "empty":
        return ""
    elif kind == "spacehdr":
        base += ["> spaced", rand_seq(rng, 5)]
    elif kind == "crlf":
        return "\r\n".join(base) + "\r\n"
    elif kind == "tabhdr":
        base += [">id\tx", rand_seq(rng, 5)]
    elif kind == "dup":
        base += [">dupe", "ACGT", ">dupe other", "GGCC"]
    elif kind == "long":
        base += [">wide", rand_seq(rng, 61)]
    text = "\n".join(base) + "\n"
    assert fasta_problem(text, level), kind
    return text


def test_table():
    if not CFG["table"]:
        return
    for src, out in CFG["pairs"]:
        text = read(src)
        want = [record_row(r, s, CFG["level"]) for r, s in fasta_records(text)]
        if CFG["level"] >= 3:
            want = [w for w in want if int(w.split("\t")[1]) >= CFG["min_len"]]
        got = [l for l in read(out).split("\n") if l.strip()]
        assert got == want, f"{out}: expected\n" + "\n".join(want) + "\ngot\n" + "\n".join(got)
    if CFG["level"] >= 4:
        rows = [l.split("\t") for _, out in CFG["pairs"] for l in read(out).split("\n") if l]
        longest = sorted(rows, key=lambda r: (-int(r[1]), r[0]))[0][0]
        assert read("/app/out/longest.txt").strip() == longest, "longest.txt is wrong"
        gc = sum(int(r[2]) for r in rows)
        total = sum(int(r[1]) for r in rows)
        summary = json.loads(read("/app/out/summary.json"))
        assert summary == {"records": len(rows), "bases": total, "gc": gc}, summary
        check_manifest("/app/out/checksums.sha256", [out for _, out in CFG["pairs"]])


def test_verdicts():
    if not CFG["check"]:
        return
    lines = [l.split() for l in read("/app/out/verdicts.txt").splitlines() if l.strip()]
    want = [[n.rsplit("/", 1)[1], "BAD" if fasta_problem(open(n, encoding="latin-1",
            newline="").read(), CFG["level"]) else "OK"] for n in CFG["samples"]]
    assert lines == want, f"verdicts.txt: expected {want}, got {lines}"
    if CFG["level"] >= 3:
        folder = "/app/out/accepted"
        got = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        assert got == [n for n, v in want if v == "OK"], f"accepted/ holds {got}"
        for name in got:
            with open(os.path.join(folder, name), "rb") as a:
                copy = a.read()
            with open("/app/incoming/" + name, "rb") as b:
                assert copy == b.read(), f"accepted/{name} differs from the original"
    if CFG["level"] >= 4:
        ok = sum(v == "OK" for _, v in want)
        summary = json.loads(read("/app/out/summary.json"))
        assert summary == {"ok": ok, "bad": len(want) - ok}, f"summary.json is {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/verdicts.txt", "/app/out/summary.json"])


def test_program():
    if not CFG["code"]:
        return
    rng = random.Random(2024)
    folder = workdir()
    missed, rejected = [], []
    for i in range(CFG["fresh"]):
        for kind in ("clean", "evil"):
            text = clean_fasta(rng) if kind == "clean" else evil_fasta(rng, CFG["level"], i)
            if CFG["table"] and i % 2:  # soft-masked: bases count case-insensitively
                text = "\n".join(l if l.startswith(">") else l.lower() for l in text.split("\n"))
            path = os.path.join(folder, f"{kind}{i}.fa")
            with open(path, "w", newline="") as handle:
                handle.write(text)
            if CFG["mode"] == "check":
                code = run_program([path], check=False).returncode
                if kind == "evil" and code == 0:
                    missed.append(text)
                if kind == "clean" and code != 0:
                    rejected.append(text)
            elif kind == "clean":
                want = [record_row(r, s, CFG["level"]) for r, s in fasta_records(text)]
                got = [l for l in run_program([path]).stdout.split("\n") if l.strip()]
                assert got == want, f"fresh file {text!r}: expected {want}, got {got}"
    assert not missed, f"{len(missed)} invalid files accepted, e.g. {missed[0]!r}"
    assert not rejected, f"{len(rejected)} valid files rejected, e.g. {rejected[0]!r}"
