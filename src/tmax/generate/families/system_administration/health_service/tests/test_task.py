{{ prelude }}
{{ oracle }}

def texts():
    return [read(p) for p in CFG["logs"]]


def random_log(rng):
    lines = []
    for _ in range(rng.randint(1, 40)):
        if rng.random() < 0.1:
            lines.append(rng.choice(["garbage", "2024-01-01T00:00:00Z db", "x y maybe 1ms"]))
            continue
        lines.append("2024-05-%02dT%02d:%02d:00Z %s %s %dms" % (rng.randint(1, 9),
                     rng.randint(0, 23), rng.randint(0, 59), rng.choice(["db", "web", "queue"]),
                     rng.choice(["ok", "ok", "fail", "degraded"]), rng.randint(1, 900)))
    return "\n".join(lines) + "\n"


def test_status_file():
    want = status_lines(texts(), CFG["level"])
    got = read("/app/out/status.txt")
    assert got == want, f"status.txt:\nexpected\n{want}\ngot\n{got}"
    table = health_table(texts(), CFG["level"])
    if CFG["level"] >= 3:
        flagged = sorted(s for s, e in table.items() if "fail" in e["recent"])
        got = [l for l in read("/app/out/flapping.txt").split("\n") if l]
        assert got == flagged, f"flapping.txt should be {flagged}, got {got}"
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        want = {"services": len(table), "down": sorted(s for s, e in table.items()
                                                       if e["state"] == "fail")}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/status.txt", "/app/out/flapping.txt", "/app/out/summary.json"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(61)
    folder = workdir()
    for i in range(CFG["fresh"]):
        logs = [random_log(rng) for _ in range(rng.randint(1, 3))]
        paths = []
        for j, text in enumerate(logs):
            paths.append(os.path.join(folder, f"h{i}_{j}.log"))
            with open(paths[-1], "w") as handle:
                handle.write(text)
        want = status_lines(logs, CFG["level"])
        got = run_program(paths).stdout
        assert got == want, f"fresh logs {logs}:\nexpected\n{want}\ngot\n{got}"


def test_service_protocols():
    if not CFG["service"]:
        return
    table = health_table(texts(), CFG["level"])
    listed = tcp_line(CFG["line_port"], "LIST")
    assert listed == " ".join(sorted(table)), f"LIST answered {listed!r}"
    for service, e in sorted(table.items()):
        want = f"{service} {e['state']} {e['failures']} {availability(e)}"
        got = tcp_line(CFG["line_port"], f"STATUS {service}")
        assert got == want, f"line protocol STATUS {service}: expected {want!r}, got {got!r}"
        status, body = http_get(CFG["http_port"], f"/status/{service}")
        data = json.loads(body)
        assert status == 200 and data == {"service": service, "state": e["state"],
                                          "failures": e["failures"],
                                          "availability": availability(e)}, (
            f"HTTP /status/{service} answered {status} {data}")
    assert tcp_line(CFG["line_port"], "STATUS no-such-service") == "ERR unknown"
    status, body = http_get(CFG["http_port"], "/health")
    assert status == 200 and json.loads(body).get("ok") is True, f"/health answered {body!r}"
    try:
        status, _ = http_get(CFG["http_port"], "/status/no-such-service")
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 404, f"unknown service over HTTP should be 404, got {status}"
