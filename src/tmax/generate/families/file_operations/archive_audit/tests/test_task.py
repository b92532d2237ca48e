{{ prelude }}
{{ oracle }}
HERE = os.path.dirname(os.path.abspath(__file__))


def pristine(name):
    with open(os.path.join(HERE, "pristine", name), "rb") as handle:
        return handle.read()


def expected():
    manifest = pristine(CFG["manifest"]).decode("utf-8")
    paths = [os.path.join(HERE, "pristine", os.path.basename(a)) for a in CFG["archives"]]
    return audit(manifest, paths)


def test_deliveries_untouched():
    for name in [CFG["manifest"]] + [os.path.basename(a) for a in CFG["archives"]]:
        path = os.path.join(CFG["incoming"], name)
        with open(path, "rb") as handle:
            assert handle.read() == pristine(name), f"{path} was modified"


def test_audit_report():
    status, _ = expected()
    want = audit_text(status)
    got = read(CFG["report"])
    assert got == want, f"{CFG['report']}:\nexpected\n{want}\ngot\n{got}"


def test_repack():
    if not CFG["repack"]:
        return
    status, have = expected()
    path = CFG["verified"]
    assert os.path.isfile(path), f"{path} was not written"
    with open(path, "rb") as handle:
        assert handle.read(2) == b"\x1f\x8b", f"{path} is not gzip-compressed"
    got = members(path)
    ok = {n: have[n] for n, s in status.items() if s == "OK"}
    assert sorted(got) == sorted(ok), f"{path} should hold exactly {sorted(ok)}, has {sorted(got)}"
    for name, data in ok.items():
        assert got[name] == data, f"{name} differs in {path}"
    if CFG["ratio"]:
        raw = sum(len(d) for d in ok.values())
        ratio = os.path.getsize(path) / raw
        assert ratio <= CFG["ratio"], (
            f"{path} is {os.path.getsize(path)} bytes for {raw} bytes of members: ratio "
            f"{ratio:.3f} is above {CFG['ratio']}")


def test_level4():
    if CFG["level"] >= 4:
        status, have = expected()
        for name, s in status.items():
            path = os.path.join(CFG["quarantine"], name)
            if s in ("CORRUPT", "EXTRA"):
                assert os.path.isfile(path), f"{path} should hold the {s} member"
                with open(path, "rb") as handle:
                    assert handle.read() == have[name], f"{path} has the wrong bytes"
            else:
                assert not os.path.exists(path), f"{path} should not be quarantined"
        counts = {k.lower(): 0 for k in ("OK", "CORRUPT", "MISSING", "EXTRA")}
        for s in status.values():
            counts[s.lower()] += 1
        got = json.loads(read(CFG["summary"]))
        assert got == counts, f"{CFG['summary']} should be {counts}, got {got}"
        check_manifest(CFG["checksums"], [CFG["report"], CFG["verified"], CFG["summary"]])


def random_case(rng, folder, index):
    names = [f"d{rng.randint(0, 3)}/m{i}_{rng.choice('abcxyz')}.dat" for i in range(8)]
    names = sorted(set(names))
    blobs = {n: os.urandom(rng.randint(0, 300)) for n in names}
    manifest, archives = [], []
    for n in names:
        r = rng.random()
        if r < 0.8:
            digest = hashlib.sha256(blobs[n]).hexdigest()
            if r > 0.65:
                digest = hashlib.sha256(blobs[n] + b"!").hexdigest()
            manifest.append(f"{digest}  {n}")
    if not manifest:
        manifest.append(f"{'0' * 64}  never/there.dat")
    for k in range(rng.randint(1, 3)):
        kind = rng.choice(["tgz", "zip", "txz"])
        path = os.path.join(folder, f"a{index}_{k}." + {"tgz": "tar.gz", "zip": "zip",
                                                         "txz": "tar.xz"}[kind])
        chosen = [n for j, n in enumerate(names) if j % 3 == k and rng.random() < 0.85]
        if kind == "zip":
            with zipfile.ZipFile(path, "w") as zf:
                for n in chosen:
                    zf.writestr(n, blobs[n])
        else:
            with tarfile.open(path, "w:gz" if kind == "tgz" else "w:xz") as tf:
                for n in chosen:
                    info = tarfile.TarInfo(n)
                    info.size = len(blobs[n])
                    tf.addfile(info, io.BytesIO(blobs[n]))
        archives.append(path)
    mpath = os.path.join(folder, f"m{index}.sha256")
    with open(mpath, "w") as handle:
        handle.write("\n".join(manifest) + "\n")
    return mpath, archives


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(13)
    folder = workdir()
    for i in range(CFG["fresh"]):
        mpath, archives = random_case(rng, folder, i)
        with open(mpath) as handle:
            want = audit_text(audit(handle.read(), archives)[0])
        got = run_program([mpath] + archives).stdout
        assert got == want, f"fresh case {i}:\nexpected\n{want}\ngot\n{got}"
