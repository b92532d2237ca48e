{{ head }}

DD_EXCLUDED = {{ excluded | py }}

{{ functions }}

{{ settings }}

LEVEL = CFG["level"]
MANIFEST = CFG["manifest"]
EMPTY = hashlib.sha256(b"").hexdigest()
# the content digest stands for the content; empty files keep an empty marker
CONTENT = {p: (b"" if d == EMPTY else d) for p, d in MANIFEST.items()}
GROUPS = dd_groups(CONTENT, LEVEL)


def digests(root):
    return {p: hashlib.sha256(d).hexdigest() for p, d in dd_scan(root).items()}


def test_library_intact():
    now = digests("/app/photos")
    if LEVEL >= 4 and os.path.isdir("/app/trash"):
        trashed = digests("/app/trash")
        overlap = set(now) & set(trashed)
        assert not overlap, f"files both in photos and trash: {sorted(overlap)[:5]}"
        now.update(trashed)
    assert now == MANIFEST, "files were lost, added or altered in /app/photos (and /app/trash)"


def test_duplicates():
    assert read("/app/report/duplicates.txt") == dd_text(GROUPS), "duplicates.txt is wrong"


def wasted():
    return sum((len(g) - 1) * size_of(g[0]) for g in GROUPS)


def size_of(path):
    for root in ("/app/photos", "/app/trash"):
        full = os.path.join(root, path)
        if os.path.isfile(full):
            return os.path.getsize(full)
    raise AssertionError(f"{path} vanished")


def test_wasted():
    if CFG["level"] >= 2:
        got = read("/app/report/wasted_bytes.txt").strip()
        assert got == str(wasted()), f"wasted_bytes.txt says {got}, expected {wasted()}"


def test_keep():
    if CFG["level"] >= 3:
        expected = "".join(dd_keep(g) + "\n" for g in GROUPS)
        assert read("/app/report/keep.txt") == expected, "keep.txt is wrong"


def test_cleanup():
    if CFG["level"] >= 4:
        moved = sorted(p for g in GROUPS for p in g if p != dd_keep(g))
        want = "".join(p + "\n" for p in moved)
        assert read("/app/report/moved.txt") == want, "moved.txt is wrong"
        for path in moved:
            assert os.path.isfile("/app/trash/" + path), f"{path} is not in /app/trash"
            assert not os.path.exists("/app/photos/" + path), f"{path} is still in /app/photos"
        for group in GROUPS:
            assert os.path.isfile("/app/photos/" + dd_keep(group)), f"{dd_keep(group)} was moved"
        for link in CFG["links"]:
            assert os.path.islink("/app/photos/" + link), f"the symlink {link} was touched"
        data = json.loads(read("/app/report/summary.json"))
        want = {"groups": len(GROUPS), "moved": len(moved), "wasted_bytes": wasted()}
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value}"


def test_program_on_fresh_trees(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(99)
    for case in range(CFG["cases"]):
        tree, links = dd_tree(rng, LEVEL, rng.randint(3, 30))
        root = tmp_path / f"tree{case}"
        for path, data in tree.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        root.mkdir(exist_ok=True)
        for link, target in links:
            os.symlink(target, root / link)
        done = run([root])
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]}"
        expected = dd_text(dd_groups(tree, LEVEL))
        assert done.stdout == expected, (
            f"case {case}: wrong groups\n--- got\n{done.stdout[:800]}"
            f"\n--- expected\n{expected[:800]}"
        )


def test_service():
    if not CFG["service"]:
        return
    rng = random.Random(3)
    members = {p: len(g) for g in GROUPS for p in g}
    considered = [p for p in CONTENT if dd_considered(p, b"x", LEVEL)]
    uniques = sorted(set(considered) - set(members))
    ignored = sorted(set(CONTENT) - set(considered))
    probe = rng.sample(sorted(members), min(4, len(members))) + uniques[:3] + ignored[:2]
    probe.append("no/such/file.jpg")
    requests = [f"GROUP {p}" for p in probe] + ["WASTED"]
    replies = ask_lines(CFG["port"], requests)
    for request, reply in zip(requests, replies):
        path = request[6:]
        if request == "WASTED":
            want = str(wasted())
        elif path in members:
            want = str(members[path])
        else:
            want = "1" if path in considered else "0"
        assert reply == want, f"{request!r} answered {reply!r}, expected {want!r}"
