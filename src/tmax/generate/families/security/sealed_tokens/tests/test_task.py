{{ head }}

{{ sources }}

{{ settings }}
KEY, STEP, LEVEL = CFG["key"], CFG["step"], CFG["level"]
SEALER = CFG["sealer"]
OUT = CFG["outputs"]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_sealer_matches_the_scheme():
    assert os.access(SEALER, os.X_OK), "the sealer binary is gone or not executable"
    for text in ["a", "HELLO probe", "x y z 123 ~!"]:
        done = subprocess.run([SEALER, text], capture_output=True, text=True, timeout=10)
        assert done.stdout.strip() == seal(text, KEY, STEP, LEVEL), "the sealer binary was altered"


def test_decoded_and_key():
    if not CFG["captured"]:
        return
    tokens = Path(CFG["capture"]).read_text().split()
    expected = "".join(unseal(t, KEY, STEP, LEVEL) + "\n" for t in tokens)
    assert read(OUT["decoded"]) == expected, f"{OUT['decoded']} is wrong"
    assert read(OUT["key"]).strip() == bytes(KEY).hex(), f"{OUT['key']} is wrong"


def session():
    rows = []
    for number, line in enumerate(Path(CFG["capture"]).read_text().splitlines(), 1):
        stamp, source, _arrow, _dst, token = line.split(" ")
        rows.append((number, source, unseal(token, KEY, STEP, LEVEL)))
    return rows


def test_capture_reports():
    if not CFG["session"]:
        return
    rows = session()
    good = [r for r in rows if r[2] is not None]
    expected = "".join(f"{n}\t{s}\t{t}\n" for n, s, t in good)
    assert read(OUT["decoded"]) == expected, f"{OUT['decoded']} is wrong"
    users, creds = {}, []
    for _n, source, text in good:
        if text.startswith("USER "):
            users[source] = text[5:]
        elif text.startswith("PASS ") and source in users:
            creds.append(f"{source} {users[source]} {text[5:]}\n")
    assert read(OUT["credentials"]) == "".join(creds), f"{OUT['credentials']} is wrong"
    if CFG["level"] >= 4:
        bad = "".join(f"{n}\n" for n, _s, t in rows if t is None)
        assert read(OUT["tampered"]) == bad, f"{OUT['tampered']} is wrong"
        paths = sorted({t[4:] for _n, _s, t in good if t.startswith("GET ")})
        want = "".join(p + "\n" for p in paths)
        assert read(OUT["exfil"]) == want, f"{OUT['exfil']} is wrong"


def test_decoder_on_fresh_tokens():
    if not CFG["code"]:
        return
    rng = random.Random(31337)
    texts = seal_texts(rng, CFG["fuzz"])
    tokens = [seal(t, KEY, STEP, LEVEL) for t in texts]
    if LEVEL >= 4:
        tokens = [seal_tamper(rng, t) if rng.random() < 0.3 else t for t in tokens]
    expected = []
    for token in tokens:
        text = unseal(token, KEY, STEP, LEVEL)
        expected.append("INVALID" if text is None else text)
    mode = os.stat(SEALER).st_mode if os.path.exists(SEALER) else None
    if mode is not None:
        os.chmod(SEALER, 0o600)
    try:
        done = run([], stdin="".join(t + "\n" for t in tokens))
    finally:
        if mode is not None:
            os.chmod(SEALER, mode)
    assert done.returncode == 0, f"the decoder failed: {done.stderr[-1500:]}"
    got = done.stdout.split("\n")
    assert len(got) >= len(tokens), f"{len(got)} output lines for {len(tokens)} tokens"
    wrong = [(t, g, w) for t, g, w in zip(tokens, got, expected) if g != w]
    assert not wrong, (
        f"{len(wrong)} of {len(tokens)} tokens decoded wrongly (token, got, expected): {wrong[:4]}"
    )
