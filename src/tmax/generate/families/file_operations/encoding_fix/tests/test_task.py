{{ head }}

EF_WORDS = {{ words | py }}
EF_KINDS = {{ kinds | py }}

{{ functions }}

{{ settings }}

LEVEL = CFG["level"]
SOURCES = {p: Path("{{ inbox }}", p).read_bytes() for p in CFG["paths"]}


def score(pairs):
    """Share of (got, expected) pairs that are equal."""
    return sum(got == want for got, want in pairs) / len(pairs)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_converted_files():
    pairs = []
    for path, data in SOURCES.items():
        out = Path("{{ dest }}", path)
        pairs.append((out.read_bytes() if out.is_file() else None, ef_convert(data, LEVEL)))
    share = score(pairs)
    print(f"metric: {share:.3f} of the files converted exactly")
    need = CFG["threshold"] if CFG["metric"] else 1.0
    wrong = [p for p, (g, w) in zip(SOURCES, pairs) if g != w]
    assert share >= need, f"converted exactly: {share:.2f} < {need:.2f}; wrong: {wrong[:6]}"


def test_encodings():
    if CFG["level"] >= 2:
        lines = read("{{ report }}").splitlines()
        paths = [line.split(" ", 1)[0] for line in lines]
        assert paths == list(SOURCES), "encodings.txt must list every file once, sorted by path"
        pairs = [(line, f"{p} {ef_detect(d)}") for line, (p, d) in zip(lines, SOURCES.items())]
        share = score(pairs)
        print(f"metric: {share:.3f} of the encodings reported right")
        need = CFG["threshold"] if CFG["metric"] else 1.0
        assert share >= need, f"encodings right: {share:.2f} < {need:.2f}"


def test_manifest_and_summary():
    if CFG["level"] >= 4:
        reported = dict(line.split(" ", 1) for line in read("{{ report }}").splitlines())
        rows, total, by = [], 0, {}
        for path in SOURCES:
            data = Path("{{ dest }}", path).read_bytes()
            total += len(data)
            by[reported[path]] = by.get(reported[path], 0) + 1
            digest, lines = hashlib.sha256(data).hexdigest(), data.count(b"\n")
            rows.append(f"{path}\t{reported[path]}\t{lines}\t{digest}\n")
        assert read("{{ out }}/manifest.tsv") == "".join(rows), "manifest.tsv is wrong"
        data = json.loads(read("{{ out }}/summary.json"))
        want = {"files": len(SOURCES), "by_encoding": by, "bytes": total}
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_converter_on_fresh_files(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1252)
    pairs = []
    for i in range(CFG["fresh"]):
        data, _kind = ef_file(rng, LEVEL, EF_KINDS[i % len(EF_KINDS)])
        path = tmp_path / f"drop{i}.txt"
        path.write_bytes(data)
        done = subprocess.run(program() + [str(path)], capture_output=True, timeout=60)
        pairs.append((done.stdout if done.returncode == 0 else None, ef_convert(data, LEVEL)))
    share = score(pairs)
    print(f"metric: the converter got {share:.3f} of fresh files exactly right")
    need = CFG["threshold"] if CFG["metric"] else 1.0
    assert share >= need, f"fresh files converted exactly: {share:.2f} < {need:.2f}"
