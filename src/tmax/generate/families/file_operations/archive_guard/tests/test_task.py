{{ head }}

AG_RULES = {{ rules | py }}

{{ functions }}

{{ settings }}

LEVEL = CFG["level"]
LIMITS = tuple(CFG["limits"])
MEMBERS = {n: ag_members(Path("/app/incoming", n).read_bytes()) for n in CFG["names"]}
VERDICTS = {n: ag_verdict(m, LEVEL, LIMITS) for n, m in MEMBERS.items()}


def stem(name):
    return name.removesuffix(".gz").removesuffix(".tar")


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_verdicts():
    rows = []
    for name in CFG["names"]:
        rule = VERDICTS[name]
        if rule is None:
            rows.append(f"{name} OK\n")
        else:
            rows.append(f"{name} REJECT {rule}\n" if LEVEL >= 2 else f"{name} REJECT\n")
    assert read("/app/out/verdicts.txt") == "".join(rows), "verdicts.txt is wrong"


def test_extraction():
    if CFG["level"] >= 2:
        for name, members in MEMBERS.items():
            target = Path("/app/extracted", stem(name))
            if VERDICTS[name] is not None:
                assert not target.exists(), f"{name} was rejected but {target} exists"
                continue
            import io
            import tarfile

            with tarfile.open(fileobj=io.BytesIO(Path("/app/incoming", name).read_bytes())) as tar:
                for m in tar.getmembers():
                    path = target / m.name
                    if m.isfile():
                        data = tar.extractfile(m).read()
                        assert path.is_file() and path.read_bytes() == data, f"{path} is wrong"
                    elif m.issym():
                        assert path.is_symlink(), f"{path} should be a symlink"


def inventory():
    rows = []
    for name, members in MEMBERS.items():
        if VERDICTS[name] is None:
            rows += [(name, n, size) for n, kind, size, _t in members if kind == "file"]
    return sorted(rows)


def test_inventory():
    if CFG["level"] >= 3:
        expected = "".join(f"{a}\t{p}\t{s}\n" for a, p, s in inventory())
        assert read("/app/out/inventory.tsv") == expected, "inventory.tsv is wrong"


def test_summary():
    if CFG["level"] >= 4:
        rejected = {}
        for rule in VERDICTS.values():
            if rule is not None:
                rejected[rule] = rejected.get(rule, 0) + 1
        rows = inventory()
        want = {
            "archives": len(VERDICTS),
            "safe": sum(r is None for r in VERDICTS.values()),
            "rejected": rejected,
            "files": len(rows),
            "bytes": sum(s for _a, _p, s in rows),
        }
        data = json.loads(read("/app/out/summary.json"))
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_checker_on_unseen_archives(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(2024)
    corpus = ag_corpus(rng, LEVEL, CFG["hidden"], LIMITS)
    missed, blocked, wrong = [], [], []
    for name, data in corpus:
        path = tmp_path / name
        path.write_bytes(data)
        rule = ag_verdict(ag_members(data), LEVEL, LIMITS)
        want = "OK" if rule is None else f"REJECT {rule}"
        done = run([path])
        assert done.returncode == 0, f"the checker failed on {name}: {done.stderr[-800:]}"
        got = done.stdout.strip()
        if CFG["mode"] == "adversarial_corpus":
            if rule is not None and not got.startswith("REJECT"):
                missed.append((name, want))
            if rule is None and got != "OK":
                blocked.append((name, got))
        elif got != want:
            wrong.append((name, got, want))
    assert not missed, f"hostile archives accepted: {missed}"
    assert not blocked, f"clean archives rejected: {blocked}"
    assert not wrong, f"wrong verdicts (archive, got, expected): {wrong}"
