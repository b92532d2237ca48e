{{ prelude }}
{{ oracle }}
import urllib.error
import urllib.parse


def rules():
    return parse_rules(CFG["rules"])


def test_moved_and_manifest():
    moves = plan(list(CFG["inbox"]), rules())
    want = "".join(f"{a}\t{b}\n" for a, b in moves)
    got = read("/app/out/moves.tsv")
    assert got == want, f"moves.tsv:\nexpected\n{want}\ngot\n{got}"
    for source, target in moves:
        path = os.path.join("/app/sorted", target)
        assert os.path.isfile(path), f"{path} is missing"
        with open(path, "rb") as handle:
            assert handle.read() == CFG["inbox"][source].encode("utf-8"), f"{path} differs"
    left = [os.path.join(d, n) for d, _, names in os.walk("/app/inbox") for n in names]
    assert not left, f"files left in /app/inbox: {left}"
    if CFG["level"] >= 3:
        dirs = [d for d, _, _ in os.walk("/app/inbox") if d != "/app/inbox"]
        assert not dirs, f"empty folders left in /app/inbox: {dirs}"


def test_counts_and_index():
    moves = plan(list(CFG["inbox"]), rules())
    counts = {}
    for _, target in moves:
        counts[target.split("/")[0]] = counts.get(target.split("/")[0], 0) + 1
    if CFG["level"] >= 2:
        want = "".join(f"{c} {n}\n" for c, n in sorted(counts.items()))
        got = read("/app/out/counts.txt")
        assert got == want, f"counts.txt:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 4:
        index = {}
        for _, target in moves:
            cat, year, name = target.split("/", 2)
            index.setdefault(cat, {}).setdefault(year, []).append(name)
        index = {c: {y: sorted(v) for y, v in ys.items()} for c, ys in index.items()}
        got = json.loads(read("/app/out/index.json"))
        assert got == index, f"index.json should be {index}, got {got}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/moves.tsv", "/app/out/counts.txt", "/app/out/index.json"])


ODD = ["-n report 2024-01-05.PDF", "two  spaces.txt", ".hidden", ".env.CSV", "..dots.Png",
       "noext", "trailing.", "archive.tar.gz", "été 2023-07-14.jpg", "a'quote\".txt",
       "$(touch pwned).txt", "*.csv", "back\\slash.md", "x 1999-12-31 2005-01-01.TXT"]


def fresh_inbox(rng, folder, adversarial):
    files = {}
    for i in range(rng.randint(1, 9)):
        if adversarial and rng.random() < 0.6:
            name = rng.choice(ODD)
        else:
            name = f"f{i}_{rng.choice(['2021-03-04', 'x', '1999-12-31'])}." + rng.choice(
                ["pdf", "JPG", "csv", "md", "bin", "txt"])
        sub = rng.choice(["", "a/", "a/b c/", "-d/"]) if CFG["level"] >= 3 else ""
        rel = sub + name
        if any(r.rsplit("/", 1)[-1] == name for r in files):
            continue
        files[rel] = f"content {i} {rng.random()}\n"
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(files[rel])
    return files


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(3)
    for i in range(CFG["fresh"]):
        base = workdir()
        src, dest = os.path.join(base, "in"), os.path.join(base, "out")
        os.makedirs(src)
        files = fresh_inbox(rng, src, CFG["adversarial"])
        rules_path = os.path.join(base, "rules.conf")
        with open(rules_path, "w") as handle:
            handle.write(CFG["rules"])
        moves = plan(list(files), rules())
        want = "".join(f"{a}\t{b}\n" for a, b in moves)
        got = run_program([rules_path, src, dest], timeout=60).stdout
        assert got == want, f"fresh inbox {sorted(files)}:\nexpected\n{want}\ngot\n{got}"
        for source, target in moves:
            path = os.path.join(dest, target)
            assert os.path.isfile(path), f"{source} was not moved to {path}"
    assert not os.path.exists(os.path.join(os.getcwd(), "pwned")), "a file name was executed"


def test_service():
    if not CFG["service"]:
        return
    port = CFG["port"]
    status, body = http_get(port, "/categories")
    counts = {}
    for _, target in plan(list(CFG["inbox"]), rules()):
        counts[target.split("/")[0]] = counts.get(target.split("/")[0], 0) + 1
    assert status == 200 and json.loads(body) == counts, f"/categories answered {body!r}"
    probe_dir = "/app/sorted/probe_cat/2020"
    os.makedirs(probe_dir, exist_ok=True)
    with open(os.path.join(probe_dir, "probe.txt"), "w") as handle:
        handle.write("probe\n")
    status, body = http_get(port, "/categories")
    assert json.loads(body).get("probe_cat") == 1, f"/categories is not live: {body!r}"
    for source, target in plan(list(CFG["inbox"]), rules())[:4]:
        status, body = http_get(port, "/where?name=" + urllib.parse.quote(source))
        assert status == 200 and body.strip() == target, f"/where {source!r} answered {body!r}"
    try:
        status, _ = http_get(port, "/where?name=no-such-file.zzz")
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 404, f"/where for an unknown file should be 404, got {status}"
