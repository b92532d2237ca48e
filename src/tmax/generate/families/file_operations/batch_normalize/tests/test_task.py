{{ prelude }}
import csv
import io
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def pristine(name):
    with open(os.path.join(HERE, "pristine", name), "rb") as handle:
        return handle.read()

{{ oracle }}

def expected():
    return {name: normalize(pristine(name)) for name in CFG["files"]}


def test_originals_untouched():
    for name in CFG["files"]:
        path = os.path.join(CFG["data"], name)
        with open(path, "rb") as handle:
            assert handle.read() == pristine(name), f"{path} was modified"


def test_clean_copies():
    for name, (text, _, _) in expected().items():
        path = os.path.join(CFG["clean"], name)
        assert os.path.isfile(path), f"{path} was not written"
        with open(path, "rb") as handle:
            got = handle.read()
        assert got == text.encode("utf-8"), f"{path} is not the UTF-8/LF form of {name}"


def test_report_and_json():
    exp = expected()
    if CFG["level"] >= 2:
        want = "".join(f"{n} {e} {l} {len(as_records(t))}\n"
                       for n, (t, e, l) in sorted(exp.items()))
        got = read(CFG["report"])
        assert got == want, f"{CFG['report']}:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 3:
        for name, (text, _, _) in exp.items():
            path = os.path.join(CFG["json"], name[: -len(".csv")] + ".json")
            got = json.loads(read(path))
            assert got == as_records(text), f"{path} does not hold the rows of {name}"
    if CFG["level"] >= 4:
        got = json.loads(read(CFG["summary"]))
        want = {"files": len(exp), "rows": sum(len(as_records(t)) for t, _, _ in exp.values()),
                "converted": sorted(n for n, (_, e, _) in exp.items() if e == "latin-1")}
        assert got == want, f"{CFG['summary']} should be {want}, got {got}"
        check_manifest(CFG["checksums"], [os.path.join(CFG["clean"], n) for n in sorted(exp)])


def random_text(rng):
    chars = "abcXYZ019 ,;\"\t-" + "éüñöåçÉ" * (rng.random() < 0.8)
    lines = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 25)))
             for _ in range(rng.randint(0, 12))]
    text = ("\r\n" if rng.random() < 0.5 else "\n").join(lines)
    if rng.random() < 0.7:
        text += "\n"
    if rng.random() < 0.2:
        text = "\ufeff" + text
    enc = rng.choice(["utf-8", "latin-1"])
    if enc == "latin-1":
        text = text.replace("\ufeff", "")
    return text.encode(enc)


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(37)
    folder = workdir()
    for i in range(CFG["fresh"]):
        data = random_text(rng)
        path = os.path.join(folder, f"f{i}.txt")
        with open(path, "wb") as handle:
            handle.write(data)
        done = subprocess.run(program() + [path], capture_output=True, env=ENV, timeout=30)
        assert done.returncode == 0, f"program failed on {data!r}: {done.stderr[-500:]}"
        want = normalize(data)[0].encode("utf-8")
        assert done.stdout == want, f"input {data!r}: expected {want!r}, got {done.stdout!r}"
