{{ head }}

{{ oracle }}

{{ functions }}

{{ settings }}
import sys

LEVEL = CFG["level"]
INDEX = sv_index(Path("/app/{{ index_file }}").read_text())
REQUIREMENTS = Path("/app/{{ req_file }}").read_text()
RESOLVED = sv_resolve(INDEX, REQUIREMENTS, LEVEL)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_resolved():
    expected = "".join(f"{p} {v or 'NONE'}\n" for p, v in RESOLVED)
    assert read("{{ out }}/{{ res_file }}") == expected, "{{ res_file }} is wrong"


def test_versions():
    if CFG["level"] >= 2:
        expected = "".join(f"{p} {' '.join(sv_sorted(INDEX[p]))}\n" for p in sorted(INDEX))
        assert read("{{ out }}/{{ ver_file }}") == expected, "{{ ver_file }} is wrong"


def test_outdated():
    if CFG["level"] >= 3:
        rows = []
        for package, version in RESOLVED:
            stable = [v for v in INDEX.get(package, []) if "-" not in v]
            if version and stable:
                latest = sv_sorted(stable)[-1]
                if sv_cmp(version, latest) < 0:
                    rows.append(f"{package} {version} {latest}\n")
        assert read("{{ out }}/{{ old_file }}") == "".join(rows), "{{ old_file }} is wrong"


def test_lock():
    if CFG["level"] >= 4:
        assert json.loads(read("{{ out }}/{{ lock_file }}")) == dict(RESOLVED), "{{ lock_file }} is wrong"


def test_vendored_library_fixed():
    if not CFG["vendored"]:
        return
    assert Path("/app/vendor/semverlite/__init__.py").is_file(), "the vendored library is gone"
    sys.path.insert(0, "/app/vendor")
    for name in [m for m in sys.modules if m.startswith("semverlite")]:
        del sys.modules[name]
    import semverlite

    rng = random.Random(404)
    for _ in range(300):
        a, b = sv_version(rng, LEVEL), sv_version(rng, LEVEL)
        assert semverlite.compare(a, b) == sv_cmp(a, b), f"compare({a!r}, {b!r}) is wrong"
    pool = [sv_version(rng, LEVEL) for _ in range(12)]
    for _ in range(300):
        version, constraint = rng.choice(pool), sv_constraint(rng, pool, LEVEL)
        try:
            got = semverlite.satisfies(version, constraint)
        except Exception as error:
            raise AssertionError(f"satisfies({version!r}, {constraint!r}) raised {error!r}")
        assert got == sv_satisfies(version, constraint, 4), (
            f"satisfies({version!r}, {constraint!r}) returned {got}"
        )
    for _ in range(200):
        if LEVEL >= 2:
            version = f"0.{rng.randint(0, 4)}.{rng.randint(0, 6)}"
            constraint = f"^0.{rng.randint(0, 3)}.{rng.randint(0, 5)}"
            got = semverlite.satisfies(version, constraint)
            assert got == sv_satisfies(version, constraint, 4), (
                f"satisfies({version!r}, {constraint!r}) returned {got}"
            )
        if LEVEL >= 3:
            tag = rng.choice(["rc", "beta", "alpha"])
            a = f"1.0.0-{tag}.{rng.randint(0, 20)}"
            b = f"1.0.0-{tag}.{rng.randint(0, 20)}"
            assert semverlite.compare(a, b) == sv_cmp(a, b), f"compare({a!r}, {b!r}) is wrong"
    want = sv_pick(pool, [">=0.0.0"], 4)
    assert semverlite.max_satisfying(pool, ">=0.0.0") == want, "max_satisfying is wrong"
    patch = read("{{ out }}/semverlite.patch")
    assert "core.py" in patch and "\n+" in patch, "semverlite.patch does not show the fix"


def test_picker_on_fresh_indexes(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1729)
    for case in range(CFG["cases"]):
        index, requirements = sv_world(rng, LEVEL, rng.randint(2, 8))
        path = tmp_path / f"index{case}.txt"
        path.write_text(sv_index_text(index, rng))
        text = "".join(f"{p} {c}\n" for p, c in requirements)
        done = run([path], stdin=text)
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]}"
        want = "".join(
            f"{p} {v or 'NONE'}\n" for p, v in sv_resolve(sv_index(path.read_text()), text, LEVEL)
        )
        assert done.stdout == want, (
            f"case {case}: requirements\n{text}--- got\n{done.stdout}--- expected\n{want}"
        )
