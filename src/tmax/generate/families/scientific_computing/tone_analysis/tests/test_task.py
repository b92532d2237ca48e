{{ prelude }}
{{ oracle }}


def make_recording(path, rng, freq=None):
    rate = rng.choice([8000, 11025, 16000])
    n = rng.randint(1600, 3200) if CFG["mode"] == "freq" else rng.randint(400, 1600)
    freq = freq or rng.uniform(150, 900)
    amp = rng.randint(2000, 30000)
    offset = rng.randint(-300, 300)
    samples = [max(-32768, min(32767, int(amp * math.sin(2 * math.pi * freq * i / rate)
               + rng.uniform(-0.1, 0.1) * amp + offset))) for i in range(n)]
    if path.endswith(".wav"):
        with wave.open(path, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(struct.pack("<%dh" % n, *samples))
    else:
        with open(path, "w") as out:
            out.write(f"rate {rate}\n" + "".join(f"{s}\n" for s in samples))
    return freq


def expected_line(path):
    rate, samples = load_samples(path)
    if CFG["mode"] == "freq":
        return None
    return tone_stats(samples, CFG["level"], CFG["threshold"])


def test_report():
    lines = read("/app/out/report.txt").splitlines()
    names = CFG["names"]
    assert len(lines) == len(names), f"report.txt needs {len(names)} lines, has {len(lines)}"
    errors = {}
    for line, name in zip(lines, names):
        got_name, _, rest = line.partition(" ")
        assert got_name == name, f"expected a line for {name}, got {line!r} (sorted by name?)"
        if CFG["mode"] == "freq":
            assert rest == "%.2f" % float(rest), f"{name}: {rest!r} is not Hz with two decimals"
            errors[name] = abs(float(rest) - CFG["truth"][name]) / CFG["truth"][name]
        else:
            want = expected_line("/app/" + name)
            assert rest.strip() == want, f"{name}: expected {want!r}, got {rest!r}"
    if errors:
        worst = max(errors.values())
        assert worst <= CFG["tolerance"], (
            f"worst relative frequency error {worst:.4%} exceeds {CFG['tolerance']:.2%}")


def test_derived_files():
    level = CFG["level"]
    if level >= 2:
        if CFG["mode"] == "freq":
            want = max(CFG["names"], key=lambda n: CFG["truth"][n])
            got = read("/app/out/highest.txt").strip()
            assert got == want, "highest.txt names the wrong file"
        else:
            rms = {n: tone_stats(load_samples("/app/" + n)[1], 2, 0) for n in CFG["names"]}
            rms = {n: int(v.split("rms=")[1]) for n, v in rms.items()}
            want = sorted(CFG["names"], key=lambda n: (-rms[n], n))[0]
            got = read("/app/out/loudest.txt").strip()
            assert got == want, "loudest.txt names the wrong file"
    if level >= 3:
        if CFG["mode"] == "freq":
            want = [n for n in CFG["names"] if CFG["truth"][n] >= 500]
        else:
            want = [n for n in CFG["names"]
                    if max(abs(s) for s in load_samples("/app/" + n)[1]) >= 32000]
        got = read("/app/out/flagged.txt").split()
        assert got == want, f"flagged.txt should list {want}, lists {got}"
    if level >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        total = sum(len(load_samples("/app/" + n)[1]) for n in CFG["names"])
        assert summary == {"recordings": len(CFG["names"]), "total_samples": total}, (
            f"summary.json is {summary}")
        check_manifest("/app/out/checksums.sha256",
                       [f"/app/out/{n}" for n in ("report.txt", "flagged.txt", "summary.json")])


def test_program_on_fresh_recordings():
    if not CFG["code"]:
        return
    rng = random.Random(4242)
    folder = workdir()
    errors = []
    for i in range(CFG["fresh"]):
        path = os.path.join(folder, f"fresh{i}.{CFG['ext']}")
        freq = make_recording(path, rng)
        got = run_program([path]).stdout.strip()
        if CFG["mode"] == "freq":
            assert got == "%.2f" % float(got), f"{got!r} is not Hz with two decimals"
            errors.append(abs(float(got) - freq) / freq)
        else:
            want = expected_line(path)
            assert got == want, f"on a fresh recording expected {want!r}, got {got!r}"
    if errors:
        worst = max(errors)
        assert worst <= CFG["tolerance"], (
            f"program: worst relative frequency error {worst:.4%} > {CFG['tolerance']:.2%}")
