{{ head }}

{{ functions }}

{{ settings }}
LEVEL = CFG["level"]


def final_state():
    files = list(CFG["replay"])
    snapshot = None
    if files[0].endswith(".kv"):
        snapshot = kv_load(Path(files.pop(0)).read_text())
    return snapshot, kv_replay([Path(f).read_text() for f in files], LEVEL, snapshot)


SNAPSHOT, (STATE, COUNTERS) = final_state()


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_state():
    assert read("/app/out/state.txt") == kv_dump(STATE), "state.txt is not the replayed state"


def test_stats():
    if CFG["level"] >= 2:
        want = kv_stats(STATE, COUNTERS, LEVEL)
        assert read("/app/out/stats.txt") == want, "stats.txt is wrong"


def test_changed():
    if CFG["level"] >= 4:
        rows = []
        for key in sorted(set(SNAPSHOT) | set(STATE)):
            if key not in SNAPSHOT:
                rows.append(f"+ {key}\n")
            elif key not in STATE:
                rows.append(f"- {key}\n")
            elif SNAPSHOT[key] != STATE[key]:
                rows.append(f"~ {key}\n")
        assert read("/app/out/changed.txt") == "".join(rows), "changed.txt is wrong"


def test_program_on_fresh_journals(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1234)
    for case in range(CFG["cases"]):
        keys = kv_keys(rng, rng.randint(3, 12))
        texts = [kv_journal(rng, keys, rng.randint(5, 60), LEVEL) for _ in range(rng.randint(1, 3))]
        paths = []
        snapshot = None
        if LEVEL >= 4 and rng.random() < 0.5:
            snapshot, _ = kv_replay([kv_journal(rng, keys, 20, LEVEL)], LEVEL)
            snap = tmp_path / f"c{case}.kv"
            snap.write_text("# snapshot\n" + kv_dump(snapshot))
            paths.append(snap)
        for i, text in enumerate(texts):
            path = tmp_path / f"c{case}-{i}.log"
            path.write_text(text)
            paths.append(path)
        done = run(paths)
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]}"
        expected = kv_dump(kv_replay(texts, LEVEL, snapshot)[0])
        assert done.stdout == expected, (
            f"case {case} ({[p.name for p in paths]}): wrong state\n--- got\n{done.stdout[:600]}"
            f"\n--- expected\n{expected[:600]}"
        )


def test_service():
    if not CFG["serve"]:
        return
    rng = random.Random(5)
    keys = sorted(STATE)
    probe = rng.sample(keys, min(6, len(keys))) + ["no:such:key"]
    requests = [f"GET {k}" for k in probe] + [f"EXISTS {k}" for k in probe] + ["COUNT"]
    if CFG["level"] >= 2:
        requests += [f"PREFIX {k[:5]}" for k in probe[:3]]
    replies = ask_lines(CFG["ports"][0], requests)
    for request, reply in zip(requests, replies):
        verb, _, arg = request.partition(" ")
        if verb == "GET":
            want = STATE.get(arg, "(nil)")
        elif verb == "EXISTS":
            want = "1" if arg in STATE else "0"
        elif verb == "COUNT":
            want = str(len(STATE))
        else:
            want = str(sum(1 for k in STATE if k.startswith(arg)))
        assert reply == want, f"{request!r} answered {reply!r}, expected {want!r}"
    if CFG["http"]:
        for key in probe:
            status, body = http_get(CFG["ports"][1], "/kv/" + key)
            if key in STATE:
                assert status == 200, f"GET /kv/{key}: HTTP {status}"
                assert json.loads(body).get("value") == STATE[key], f"GET /kv/{key}: {body}"
            else:
                assert status == 404, f"GET /kv/{key} for a missing key: HTTP {status}"
        status, body = http_get(CFG["ports"][1], "/stats")
        assert status == 200 and json.loads(body).get("keys") == len(STATE), f"/stats: {body}"
