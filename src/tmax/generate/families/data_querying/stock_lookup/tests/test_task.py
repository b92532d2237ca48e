{{ head }}
{{ generator }}
HERE = os.path.dirname(__file__)


def pristine():
    files = {}
    for name in ("stock.csv", "prices.csv", "moves.csv"):
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            files[name] = read(path)
    return files


def test_answers_file():
    queries = read(os.path.join(HERE, "queries.txt")).split("\n")[:-1]
    want = answer_all(pristine(), queries)
    got = read("/app/answers.txt").split("\n")
    assert got[-1] == "", "answers.txt must end with a newline"
    assert got[:-1] == want, f"answers.txt: expected {want}, got {got[:-1]}"


def hidden_queries(rng, files):
    skus = sorted({line.split(",")[0] for line in files["stock.csv"].splitlines()[1:]})
    whs = sorted({line.split(",")[1] for line in files["stock.csv"].splitlines()[1:]})
    out = ["STOCK " + s for s in rng.sample(skus, 3)] + ["STOCK NOPE1", "FROB x"]
    if CFG["level"] >= 2:
        out += ["VALUE " + w for w in whs] + ["VALUE nowhere"]
    if CFG["level"] >= 3:
        out += ["WAREHOUSE " + w for w in whs]
    if CFG["level"] >= 4:
        out += ["LOW %d" % rng.randint(1, 90) for _ in range(3)] + ["LOW 0"]
    rng.shuffle(out)
    return out


def test_program_on_fresh_data():
    if not CFG["code"]:
        return
    for seed in (3, 17):
        rng = random.Random(seed)
        files, _ = make_stock(rng, CFG["level"], 25, ["osl", "rix", "vno", "tll", "hel"])
        folder = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        queries = hidden_queries(rng, files)
        done = run_program([folder], stdin="\n".join(queries) + "\n")
        assert done.returncode == 0, f"program failed: {done.stderr[-2000:]}"
        want = answer_all(files, queries)
        got = done.stdout.splitlines()
        assert got == want, f"queries {queries}: expected {want}, got {got}"


def test_service():
    if not CFG["service"]:
        return
    files = pristine()
    queries = hidden_queries(random.Random(99), files)
    want = answer_all(files, queries)
    got = line_queries(CFG["line_port"], queries)
    assert got == want, f"line protocol: queries {queries}: expected {want}, got {got}"
    if CFG["http_port"]:
        for query, answer in zip(queries, want):
            cmd, arg = query.split()
            if cmd not in ("STOCK", "VALUE", "WAREHOUSE", "LOW"):
                continue
            status, body = http_get(CFG["http_port"], f"/{cmd.lower()}/{arg}")
            assert " 200" in status, f"GET /{cmd.lower()}/{arg}: {status}"
            got = json.loads(body)
            assert got == {"query": query, "answer": answer}, f"GET /{cmd.lower()}/{arg}: {got}"
