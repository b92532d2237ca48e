{{ prelude }}
import gzip

{{ oracle }}

def log_texts():
    texts = []
    for path in CFG["logs"]:
        if path.endswith(".gz"):
            with gzip.open(path, "rt") as handle:
                texts.append(handle.read())
        else:
            texts.append(read(path))
    return texts


def random_log(rng):
    lines = []
    for _ in range(rng.randint(0, 60)):
        ip = "%d.%d.%d.%d" % (rng.choice([10, 192, 203]), rng.randint(0, 2), rng.randint(0, 3),
                              rng.randint(1, 9))
        user = rng.choice(["root", "admin", "alice", "git", "oracle"])
        pid = rng.randint(100, 99999)
        kind = rng.random()
        if kind < 0.5:
            inv = "invalid user " if rng.random() < 0.4 else ""
            port = rng.randint(1024, 65535)
            msg = f"sshd[{pid}]: Failed password for {inv}{user} from {ip} port {port} ssh2"
        elif kind < 0.65:
            msg = f"sshd[{pid}]: Accepted publickey for {user} from {ip} port 22 ssh2"
        elif kind < 0.8:
            msg = f"sshd[{pid}]: Connection closed by {ip} port 4444 [preauth]"
        elif kind < 0.9:
            msg = f"CRON[{pid}]: pam_unix(cron:session): session opened for user {user}"
        else:
            msg = f"sudo: {user} : Failed password for {user} from {ip} port 1 (not sshd)"
        lines.append(f"Mar {rng.randint(1, 28):2d} 0{rng.randint(0, 9)}:12:33 web01 {msg}")
    return "\n".join(lines) + ("\n" if lines else "")


def test_ranking():
    fails, accepted, users = auth_scan(log_texts())
    got = read("/app/out/failures.txt")
    assert got == ranking(fails), f"failures.txt:\nexpected\n{ranking(fails)}\ngot\n{got}"
    if CFG["level"] >= 2:
        got = read("/app/out/users.txt")
        assert got == ranking(users), f"users.txt:\nexpected\n{ranking(users)}\ngot\n{got}"
    if CFG["level"] >= 3:
        want = sorted((ip for ip, n in fails.items()
                       if n >= CFG["limit"] and ip not in accepted),
                      key=lambda ip: tuple(int(x) for x in ip.split(".")))
        got = [l for l in read("/app/out/blocklist.txt").split("\n") if l]
        assert got == want, f"blocklist.txt should be {want}, got {got}"
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        want = {"failed_attempts": sum(fails.values()), "sources": len(fails),
                "blocked": len([ip for ip, n in fails.items()
                                if n >= CFG["limit"] and ip not in accepted])}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", ["/app/out/failures.txt",
                       "/app/out/users.txt", "/app/out/blocklist.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(22)
    folder = workdir()
    for i in range(CFG["fresh"]):
        paths, texts = [], []
        for j in range(rng.randint(1, 3)):
            text = random_log(rng)
            path = os.path.join(folder, f"auth{i}_{j}.log")
            with open(path, "w") as handle:
                handle.write(text)
            paths.append(path)
            texts.append(text)
        want = ranking(auth_scan(texts)[0])
        got = run_program(paths).stdout
        assert got == want, f"fresh logs {texts}:\nexpected\n{want}\ngot\n{got}"
