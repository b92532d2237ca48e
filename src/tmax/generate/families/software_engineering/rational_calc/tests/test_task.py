{{ head }}

{{ functions }}

{{ settings }}
from fractions import Fraction

LEVEL = CFG["level"]
RESULTS = {}
for _name in CFG["inputs"]:
    _path = Path("/app/{{ in_dir }}") / _name
    RESULTS[_name] = [rc_eval(e) for e in _path.read_text().splitlines()] if _path.is_file() else []


def lines(items):
    return "".join(f"{i}\n" for i in items)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_results():
    if LEVEL <= 2:
        (only,) = RESULTS.values()
        assert read("{{ out }}/{{ res_file }}") == lines(only), "{{ res_file }} is wrong"
        return
    for name, results in RESULTS.items():
        assert read(f"{{ out }}/{name}") == lines(results), f"{{ out }}/{name} is wrong"
    errors = [f"{n}:{i}" for n, rs in RESULTS.items() for i, r in enumerate(rs, 1) if r == "ERROR"]
    assert read("{{ out }}/{{ err_file }}") == lines(errors), "{{ err_file }} is wrong"


def good():
    return [r for rs in RESULTS.values() for r in rs if r != "ERROR"]


def test_extremes():
    if CFG["level"] >= 2:
        values = good()
        big, small = max(values, key=Fraction), min(values, key=Fraction)
        want = f"max {big}\nmin {small}\n"
        assert read("{{ out }}/{{ ext_file }}") == want, "{{ ext_file }} is wrong"


def test_summary():
    if CFG["level"] >= 4:
        values = good()
        everything = [r for rs in RESULTS.values() for r in rs]
        want = {
            "expressions": len(everything),
            "errors": everything.count("ERROR"),
            "integers": sum("/" not in v for v in values),
            "max": max(values, key=Fraction),
            "min": min(values, key=Fraction),
        }
        data = json.loads(read("{{ out }}/{{ sum_file }}"))
        for key, value in want.items():
            assert data.get(key) == value, f"{{ sum_file }} {key}: {data.get(key)!r} != {value!r}"


def test_calculator_on_fresh_expressions():
    if not CFG["code"]:
        return
    rng = random.Random(65537)
    exprs = [rc_expression(rng, LEVEL) for _ in range(CFG["fuzz"])]
    exprs += ["7", "1/0", "0/5", "6/4", "10 / 4 * 2 - 5"]
    if CFG["level"] >= 4:
        exprs += ["2 - 0^-1", "(1/2)^-3"]
    done = run([], stdin=lines(exprs))
    assert done.returncode == 0, f"the calculator failed: {done.stderr[-1500:]}"
    got = done.stdout.splitlines()
    want = [rc_eval(e) for e in exprs]
    assert len(got) == len(exprs), f"{len(got)} result lines for {len(exprs)} expressions"
    wrong = [(e, g, w) for e, g, w in zip(exprs, got, want) if g.strip() != w]
    assert not wrong, f"{len(wrong)} wrong results (expression, got, expected): {wrong[:5]}"
