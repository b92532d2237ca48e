{{ prelude }}
{{ oracle }}

def test_rotation_applied():
    deleted_all, kept_all = [], []
    for host, files in sorted(CFG["dirs"].items()):
        names = sorted(files)
        gone = to_delete(names, CFG["keep"], CFG["level"])
        stay = sorted(set(names) - set(gone))
        path = "/app/backups/" + host
        assert os.path.isdir(path), f"{path} is gone"
        now = sorted(n for n in os.listdir(path) if n != "LATEST")
        assert now == stay, f"{path} should hold {stay}, holds {now}"
        deleted_all += [f"{host}/{n}" for n in gone]
        kept_all += [f"{host}/{n}" for n in stay if n.startswith("db-")]
        if CFG["level"] >= 4:
            newest = max(n for n in stay if n.startswith("db-"))
            assert read(path + "/LATEST").strip() == newest, f"{path}/LATEST should be {newest}"
    got = [l for l in read("/app/out/deleted.txt").split("\n") if l]
    assert got == sorted(deleted_all), f"deleted.txt should be {sorted(deleted_all)}, got {got}"
    if CFG["level"] >= 3:
        got = [l for l in read("/app/out/kept.txt").split("\n") if l]
        assert got == sorted(kept_all), f"kept.txt should be {sorted(kept_all)}, got {got}"
    if CFG["level"] >= 4:
        freed = sum(CFG["dirs"][d.split("/")[0]][d.split("/")[1]] for d in deleted_all)
        summary = json.loads(read("/app/out/summary.json"))
        want = {"deleted": len(deleted_all), "kept": len(kept_all), "freed_bytes": freed}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", ["/app/out/deleted.txt", "/app/out/kept.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(99)
    for i in range(CFG["fresh"]):
        folder = workdir()
        names = set()
        for _ in range(rng.randint(0, 30)):
            names.add("db-%04d%02d%02d.tar.gz" % (rng.choice([2023, 2024]), rng.randint(1, 12),
                                                   rng.randint(1, 28)))
        names |= set(rng.sample(["notes.txt", "db-latest.tar.gz", "db-2024.tar.gz",
                                 "db-20240101.tar.gz.part", "xdb-20240101.tar.gz"], 2))
        for name in names:
            open(os.path.join(folder, name), "w").close()
        want = to_delete(sorted(names), CFG["keep"], CFG["level"])
        got = [l for l in run_program([folder]).stdout.split("\n") if l]
        assert got == want, f"fresh dir {sorted(names)}: expected {want}, got {got}"
        assert sorted(os.listdir(folder)) == sorted(names), "the program must not delete files"
