{{ head }}

{{ sources }}

{{ settings }}
NAMES = []
for _q in CFG["queues"]:
    NAMES += Path(_q).read_text().splitlines() if os.path.isfile(_q) else []
RULES = [upload_verdict(n, CFG["level"], CFG["allowed"], CFG["maxlen"]) for n in NAMES]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_accepted():
    expected = "".join(n + "\n" for n, r in zip(NAMES, RULES) if r is None)
    assert read("/app/out/accepted.txt") == expected, "accepted.txt does not match the policy"


def test_rejected():
    if CFG["level"] >= 2:
        expected = "".join(f"{r}\t{n}\n" for n, r in zip(NAMES, RULES) if r is not None)
    else:
        expected = "".join(n + "\n" for n, r in zip(NAMES, RULES) if r is not None)
    got = read("/app/out/rejected.txt")
    assert got == expected, "rejected.txt does not match the policy"


def counts():
    tally = {}
    for r in RULES:
        if r is not None:
            tally[r] = tally.get(r, 0) + 1
    return sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))


def test_rule_counts():
    if CFG["level"] >= 3:
        expected = "".join(f"{r} {c}\n" for r, c in counts())
        assert read("/app/out/rule_counts.txt") == expected, "rule_counts.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        data = json.loads(read("/app/out/summary.json"))
        rejected = sum(r is not None for r in RULES)
        assert data.get("total") == len(NAMES), f"total: {data.get('total')}"
        assert data.get("accepted") == len(NAMES) - rejected, f"accepted: {data.get('accepted')}"
        assert data.get("rejected") == rejected, f"rejected: {data.get('rejected')}"
        assert data.get("rules") == dict(counts()), f"rules: {data.get('rules')}"


def test_gate_on_unseen_names():
    if not CFG["code"]:
        return
    rng = random.Random(90210)
    names = upload_names(rng, CFG["hidden"], CFG["allowed"], CFG["level"])
    want = [upload_line(n, CFG["level"], CFG["allowed"], CFG["maxlen"]) for n in names]
    done = run([], stdin="".join(n + "\n" for n in names))
    assert done.returncode == 0, f"the gate failed: {done.stderr[-1500:]}"
    got = done.stdout.splitlines()
    assert len(got) == len(names), f"{len(got)} verdict lines for {len(names)} names"
    if CFG["adversarial"]:
        clean = sum(w == "ACCEPT" for w in want)
        assert 0 < clean < len(names)
        rows = list(zip(names, got, want))
        missed = [n for n, g, w in rows if w != "ACCEPT" and g.split()[:1] != ["REJECT"]]
        blocked = [n for n, g, w in rows if w == "ACCEPT" and g.strip() != "ACCEPT"]
        assert not missed, f"{len(missed)} hostile names were not rejected, e.g. {missed[:5]}"
        assert not blocked, f"{len(blocked)} legitimate names were rejected, e.g. {blocked[:5]}"
    else:
        wrong = [(n, g, w) for n, g, w in zip(names, got, want) if g.strip() != w]
        assert not wrong, f"{len(wrong)} verdicts differ (name, got, expected): {wrong[:5]}"
