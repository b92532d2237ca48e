{{ head }}
{{ generator }}
HERE = os.path.dirname(__file__)


def pristine():
    files = {}
    for name in ("events.jsonl", "users.csv"):
        if os.path.exists(os.path.join(HERE, name)):
            files[name] = read(os.path.join(HERE, name))
    return files


def test_report_files():
    files = pristine()
    for report in CFG["reports"]:
        path = os.path.join(CFG["out_dir"], report + ".csv")
        want, got = report_text(files, report, CFG["top_n"]), read(path)
        assert got == want, f"{path}:\nexpected:\n{want}\ngot:\n{got}"


def test_program_on_fresh_logs():
    if not CFG["code"]:
        return
    for seed in range(CFG["cases"]):
        rng = random.Random(1000 + seed)
        files = make_events(rng, CFG["level"], rng.randint(3, 30), rng.randint(5, 160))
        folder = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        for report in CFG["reports"]:
            done = run_program([folder, report])
            assert done.returncode == 0, f"{report}: exit {done.returncode} {done.stderr[-800:]}"
            want = report_text(files, report, CFG["top_n"])
            assert done.stdout == want, f"{seed} {report}: want\n{want}got\n{done.stdout}"
