{{ prelude }}
{{ oracle }}

def tree():
    return {k: v.encode("utf-8") for k, v in CFG["tree"].items()}


def test_report():
    files = tree()
    want = dupe_text(files)
    got = read("/app/out/duplicates.txt")
    assert got == want, f"duplicates.txt:\nexpected\n{want}\ngot\n{got}"
    groups = dupe_groups(files)
    waste = sum(len(files[g[0]]) * (len(g) - 1) for g in groups)
    if CFG["level"] >= 2:
        got = read("/app/out/reclaimable.txt").strip()
        assert got == str(waste), f"reclaimable.txt should say {waste}, says {got!r}"
    if CFG["level"] >= 4:
        got = json.loads(read("/app/out/summary.json"))
        want = {"groups": len(groups), "redundant_files": sum(len(g) - 1 for g in groups),
                "reclaimable_bytes": waste}
        assert got == want, f"summary.json should be {want}, got {got}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/duplicates.txt", "/app/out/reclaimable.txt",
                        "/app/out/summary.json"])


def test_tree_state():
    files = tree()
    for rel, data in files.items():
        path = os.path.join(CFG["root"], rel)
        assert os.path.isfile(path), f"{path} is gone"
        with open(path, "rb") as handle:
            assert handle.read() == data, f"{path} changed content"
    if CFG["level"] >= 3:
        for group in dupe_groups(files):
            first = os.stat(os.path.join(CFG["root"], group[0]))
            for other in group[1:]:
                st = os.stat(os.path.join(CFG["root"], other))
                assert (st.st_ino, st.st_dev) == (first.st_ino, first.st_dev), (
                    f"{other} should be a hard link to {group[0]}")
        singles = [p for p in files if files[p] and not any(p in g for g in dupe_groups(files))]
        for p in singles:
            assert os.stat(os.path.join(CFG["root"], p)).st_nlink == 1, f"{p} was linked"


def random_tree(rng, folder):
    blobs = [("x" * rng.randint(1, 30) + str(i)).encode() for i in range(rng.randint(1, 6))]
    blobs.append(b"")
    files = {}
    for _ in range(rng.randint(0, 14)):
        depth = rng.randint(0, 3)
        parts = ["".join(rng.choice("abcdz019_-.") for _ in range(rng.randint(1, 6)))
                 for _ in range(depth)]
        name = "f" + "".join(rng.choice("abcxyz0129_-.") for _ in range(rng.randint(1, 8)))
        rel = "/".join(["d" + p for p in parts] + [name])
        if any(rel.startswith(k + "/") or k.startswith(rel + "/") for k in files):
            continue
        files[rel] = rng.choice(blobs)
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(files[rel])
    return files


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(5)
    for i in range(CFG["fresh"]):
        folder = workdir()
        files = random_tree(rng, folder)
        want = dupe_text(files)
        got = run_program([folder]).stdout
        assert got == want, f"fresh tree {sorted(files.items())}:\nexpected\n{want}\ngot\n{got}"
