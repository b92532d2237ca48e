{{ prelude }}
HERE = os.path.dirname(__file__)


def expect(text):
    rows = []
    for line in text.splitlines()[1:]:
        if line.strip():
            name, score = line.split(",")
            rows.append((name.strip(), int(score)))
    rows.sort(key=lambda r: (-r[1], r[0]))
    out = "".join(f"{i} {n} {s}\n" for i, (n, s) in enumerate(rows, 1))
    return out + f"total {sum(s for _, s in rows)}\n"


def test_report_file():
    want, got = expect(read(os.path.join(HERE, "scores.csv"))), read("/app/out/ranking.txt")
    assert got == want, f"/app/out/ranking.txt differs.\nexpected:\n{want}\ngot:\n{got}"


def test_bug_lines():
    if CFG["level"] >= 4:
        got = read("/app/out/bugs.txt").split()
        assert got == [str(n) for n in CFG["bug_lines"]], f"bugs.txt: got {got}"


def test_fixed_program_on_fresh_inputs():
    rng = random.Random(31337)
    work = tempfile.mkdtemp()
    names = ["ana", "bo", "cy", "dan", "eve", "fil", "gus", "hu", "ida", "jon", "kai", "li"]
    for case in range(CFG["cases"]):
        rows = [(rng.choice(names) + str(rng.randint(1, 9)), rng.randint(-20, 40))
                for _ in range(rng.randint(1, 25))]
        if len(rows) > 2:
            rows.append((rows[0][0][:-1] + "0", rows[0][1]))
        text = "name,score\n" + "".join(f"{n},{s}\n" for n, s in rows)
        path = os.path.join(work, f"s{case}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        done = run_program([path])
        want = expect(text)
        assert done.returncode == 0, f"case {case}: exit {done.returncode} {done.stderr[-500:]}"
        assert done.stdout == want, f"case {case}:\n{text}\nwant:\n{want}\ngot:\n{done.stdout}"
