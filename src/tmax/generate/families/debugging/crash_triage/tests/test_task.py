{{ prelude }}
import signal

HERE = os.path.dirname(__file__)


def model(text):
    """What the calculator does with an input: (status, failing line)."""
    ops = CFG["ops"]
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#") or line == "":
            continue
        parts = line.split()
        try:
            nums = [int(p) for p in parts[1:3]]
        except ValueError:
            nums = []
        if parts and parts[0] == ops["add"] and len(nums) == 2:
            continue
        if parts and parts[0] == ops["div"] and len(nums) == 2:
            if nums[1] == 0:
                return "signal:SIGFPE", n
            continue
        if parts and parts[0] == ops["get"] and len(nums) >= 1:
            if nums[0] < 0 or nums[0] >= CFG["limit"]:
                return "signal:SIGSEGV", n
            continue
        return "exit:%d" % CFG["badexit"], n
    return "ok", 0


def expect(files, mode):
    out = ["file,status" if mode == "status" else "file,line"]
    for name in sorted(files):
        status, line = model(files[name])
        if mode == "status":
            out.append(f"{name},{status}")
        elif status != "ok":
            out.append(f"{name},{line}")
    return "\n".join(out) + "\n"


def pristine():
    data = json.loads(read(os.path.join(HERE, "inputs.json")))
    return data


def check(path, want):
    got = read(path)
    assert got == want, f"{path} differs.\nexpected:\n{want}\ngot:\n{got}"


def test_reports():
    files = pristine()
    check(CFG["out"] + "/status.csv", expect(files, "status"))
    if CFG["level"] >= 3:
        check(CFG["out"] + "/first_bad.csv", expect(files, "first"))


def test_untouched():
    if CFG["level"] >= 2:
        for name, text in pristine().items():
            path = CFG["inputs"] + "/" + name
            assert read(path) == text, f"{path} was modified"
            done = subprocess.run([CFG["binary"]], input=text.encode(), capture_output=True)
            code = done.returncode
            status = "ok" if code == 0 else f"exit:{code}" if code > 0 else (
                "signal:" + signal.Signals(-code).name)
            assert status == model(text)[0], f"{CFG['binary']} was modified ({name}: {status})"


def test_reproducers():
    if CFG["level"] >= 4:
        for sig in ("FPE", "SEGV"):
            path = CFG["out"] + f"/repro_{sig.lower()}.txt"
            text = read(path)
            assert text.count("\n") <= 1, f"{path} must be a single line"
            with open(path, "rb") as handle:
                done = subprocess.run([CFG["binary"]], stdin=handle, capture_output=True)
            code = done.returncode
            assert code == -getattr(signal, "SIG" + sig), f"{path}: exit {code}"


def test_counts():
    if CFG["level"] >= 4:
        counts = json.loads(read(CFG["out"] + "/counts.json"))
        statuses = [model(t)[0] for t in pristine().values()]
        want = {
            "ok": statuses.count("ok"),
            "exit": sum(s.startswith("exit") for s in statuses),
            "signal": sum(s.startswith("signal") for s in statuses),
        }
        assert counts == want, f"counts.json: expected {want}, got {counts}"


def test_triage_program():
    if not CFG["code"]:
        return
    rng = random.Random(808)
    work = tempfile.mkdtemp()
    files = {}
    ops = CFG["ops"]
    for i in range(8):
        lines = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.random()
            if kind < 0.3:
                lines.append(f"{ops['add']} {rng.randint(-9, 9)} {rng.randint(-9, 9)}")
            elif kind < 0.55:
                den = rng.choice([0, 1, 2, 3, 5, 7])
                lines.append(f"{ops['div']} {rng.randint(-50, 50)} {den}")
            elif kind < 0.8:
                lines.append(f"{ops['get']} {rng.randint(-2, CFG['limit'] + 2)}")
            elif kind < 0.9:
                lines.append("# note")
            else:
                lines.append(rng.choice(["nop", "mul 2 3", "halt"]))
        files[f"case{i:02d}.txt"] = "\n".join(lines) + "\n"
    for name, text in files.items():
        with open(os.path.join(work, name), "w") as handle:
            handle.write(text)
    modes = ["status"] + (["first"] if CFG["level"] >= 3 else [])
    for mode in modes:
        done = run_program([work] + ([] if mode == "status" else ["first"]))
        assert done.returncode == 0, f"program failed: {done.stderr[-1500:]}"
        want = expect(files, mode)
        assert done.stdout == want, f"{mode}: expected\n{want}got\n{done.stdout}\nfiles {files}"
