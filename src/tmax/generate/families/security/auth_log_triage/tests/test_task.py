{{ head }}

{{ sources }}

{{ settings }}

def load_logs(paths):
    text = ""
    for path in paths:
        assert os.path.isfile(path), f"input {path} is missing"
        if path.endswith(".gz"):
            text += gzip.decompress(Path(path).read_bytes()).decode()
        else:
            text += Path(path).read_text()
    return text


EVENTS = auth_events(load_logs(CFG["paths"]))


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_failed_by_ip():
    assert read("/app/report/failed_by_ip.txt") == auth_table(EVENTS), (
        "failed_by_ip.txt does not match the failed attempts in the logs"
    )


def test_invalid_users_and_blocklist():
    if CFG["level"] >= 2:
        expected = "".join(u + "\n" for u in auth_invalid_users(EVENTS))
        assert read("/app/report/invalid_users.txt") == expected, "invalid_users.txt is wrong"
        block = auth_blocklist(EVENTS, CFG["threshold"], CFG["networks"])
        assert read("/app/report/blocklist.txt") == "".join(ip + "\n" for ip in block), (
            "blocklist.txt is wrong"
        )


def test_compromised():
    if CFG["level"] >= 3:
        expected = "".join(line + "\n" for line in auth_compromised(EVENTS, CFG["threshold"]))
        assert read("/app/report/compromised.txt") == expected, "compromised.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/report/summary.json"))
        failed = auth_failed(EVENTS)
        block = auth_blocklist(EVENTS, CFG["threshold"], CFG["networks"])
        users = sorted({line.split()[0] for line in auth_compromised(EVENTS, CFG["threshold"])})
        expected = {
            "total_failed": sum(n for _ip, n in failed),
            "unique_ips": len(failed),
            "blocked": len(block),
            "top_ip": failed[0][0],
            "compromised_users": users,
        }
        for key, value in expected.items():
            got = summary.get(key)
            assert got == value, f"summary.json {key}: {got!r} != {value!r}"


def test_program_on_fresh_logs(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(4242)
    for case in range(CFG["fuzz_cases"]):
        pool = auth_pool(rng, rng.randint(3, 9), rng.randint(2, 5))
        count = rng.randint(1, 3) if CFG["level"] >= 3 else 1
        texts = [
            auth_log(rng, pool, rng.randint(20, 90), 5 + i, CFG["level"] >= 2) for i in range(count)
        ]
        paths = []
        for i, text in enumerate(texts):
            path = tmp_path / f"c{case}_{i}.log"
            if CFG["level"] >= 3 and i == 0 and count > 1:
                path = tmp_path / f"c{case}_{i}.log.gz"
                path.write_bytes(gzip.compress(text.encode()))
            else:
                path.write_text(text)
            paths.append(str(path))
        done = run(paths)
        assert done.returncode == 0, f"the program failed on case {case}: {done.stderr[-1500:]}"
        expected = auth_table(auth_events("".join(texts)))
        assert done.stdout == expected, (
            f"case {case}: wrong table for {paths}\n--- got\n{done.stdout[:800]}"
            f"\n--- expected\n{expected[:800]}"
        )


def test_service():
    if not CFG["serve"]:
        return
    failed = dict(auth_failed(EVENTS))
    block = set(auth_blocklist(EVENTS, CFG["threshold"], CFG["networks"]))
    rng = random.Random(7)
    ips = sorted(failed)
    probe = rng.sample(ips, min(6, len(ips))) + ["10.255.255.254", "198.18.0.9"]
    requests = [f"FAILED {ip}" for ip in probe]
    if CFG["level"] >= 2:
        requests += [f"BLOCKED {ip}" for ip in probe]
    replies = ask_lines(CFG["ports"][0], requests)
    for request, reply in zip(requests, replies):
        verb, ip = request.split()
        want = str(failed.get(ip, 0)) if verb == "FAILED" else ("yes" if ip in block else "no")
        assert reply.strip() == want, f"{request!r} answered {reply!r}, expected {want!r}"
    if CFG["http"]:
        for ip in probe:
            status, body = http_get(CFG["ports"][1], "/ip/" + ip)
            assert status == 200, f"GET /ip/{ip} returned HTTP {status}"
            data = json.loads(body)
            assert data.get("ip") == ip, f"HTTP answer for {ip} names another address: {data}"
            assert data.get("failed") == failed.get(ip, 0), f"HTTP failed count for {ip}: {data}"
            if CFG["level"] >= 2:
                assert data.get("blocked") is (ip in block), f"HTTP blocked flag for {ip}: {data}"
