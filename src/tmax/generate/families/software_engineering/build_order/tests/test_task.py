{{ head }}

BO_NAMES = {{ names | py }}
BO_EXTERNAL = {{ external | py }}

{{ functions }}

{{ settings }}
LEVEL = CFG["level"]


def load():
    if LEVEL <= 2:
        return bo_parse(Path("/app/repo/{{ manifest }}").read_text()), {}
    graph, dirs = {}, {}
    for ini in sorted(Path("/app/repo").glob("*/{{ ini }}")):
        fields = {}
        for line in ini.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key.strip()] = value.strip()
        requires = fields.get("{{ key }}", "").split(",")
        graph[fields["name"]] = [r.strip() for r in requires if r.strip()]
        dirs[ini.parent.name] = fields["name"]
    return graph, dirs


GRAPH, DIRS = load()
ORDER, BLOCKED = bo_order(GRAPH)


def lines(items):
    return "".join(f"{i}\n" for i in items)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_build_order():
    assert read("{{ out }}/build_order.txt") == lines(ORDER), "build_order.txt is wrong"


def test_blocked():
    if CFG["level"] >= 2:
        assert read("{{ out }}/blocked.txt") == lines(BLOCKED), "blocked.txt is wrong"


def rebuild():
    changed = set()
    for path in Path("/app/{{ change_list }}").read_text().split():
        parts = path.split("/")
        if parts[0] == "repo" and len(parts) > 2 and parts[1] in DIRS:
            changed.add(DIRS[parts[1]])
    return bo_rebuild(GRAPH, ORDER, sorted(changed))


def test_rebuild():
    if CFG["level"] >= 3:
        assert read("{{ out }}/rebuild.txt") == lines(rebuild()), "rebuild.txt is wrong"


def test_waves_and_summary():
    if CFG["level"] >= 4:
        waves = bo_waves(GRAPH, ORDER)
        expected = "".join(f"{k}: {' '.join(w)}\n" for k, w in enumerate(waves, 1))
        assert read("{{ out }}/waves.txt") == expected, "waves.txt is wrong"
        summary = json.loads(read("{{ out }}/summary.json"))
        want = {
            "packages": len(GRAPH),
            "buildable": len(ORDER),
            "blocked": len(BLOCKED),
            "waves": len(waves),
            "rebuild": len(rebuild()),
        }
        for key, value in want.items():
            got = summary.get(key)
            assert got == value, f"summary.json {key}: {got!r} != {value}"


def test_program_on_fresh_graphs(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(8086)
    for case in range(CFG["cases"]):
        graph = bo_graph(rng, rng.randint(1, 30), max(LEVEL, 2) if case % 2 else LEVEL)
        path = tmp_path / f"deps{case}.txt"
        path.write_text(bo_manifest(graph, rng))
        done = run([path])
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]}"
        expected = lines(bo_order(graph)[0])
        assert done.stdout == expected, (
            f"case {case}: wrong order for\n{path.read_text()}\n--- got\n{done.stdout}"
            f"\n--- expected\n{expected}"
        )
