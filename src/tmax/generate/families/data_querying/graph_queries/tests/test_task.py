{{ head }}
from collections import deque

HERE = os.path.dirname(__file__)


def load(text):
    adj = {}
    for line in text.splitlines()[1:]:
        if "," not in line:
            continue
        a, b = line.strip().split(",", 1)
        adj.setdefault(a, set())
        adj.setdefault(b, set())
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    return adj


def bfs(adj, start):
    dist, queue = {start: 0}, deque([start])
    while queue:
        u = queue.popleft()
        for v in sorted(adj[u]):
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def expect(adj, mode, args=()):
    if mode == "degrees":
        rows = sorted(adj, key=lambda n: (-len(adj[n]), n))
        return "node,degree\n" + "".join(f"{n},{len(adj[n])}\n" for n in rows)
    if mode == "components":
        comps, seen = [], set()
        for node in sorted(adj):
            if node not in seen:
                members = sorted(bfs(adj, node))
                seen.update(members)
                comps.append(members)
        comps.sort(key=lambda m: (-len(m), m[0]))
        return "".join(" ".join(m) + "\n" for m in comps)
    if mode == "dist":
        dist = bfs(adj, args[0])
        rows = sorted(dist, key=lambda n: (dist[n], n))
        return "node,hops\n" + "".join(f"{n},{dist[n]}\n" for n in rows)
    src, dst = args
    dist = bfs(adj, dst)
    if src not in dist:
        return "none\n"
    path = [src]
    while path[-1] != dst:
        here = path[-1]
        path.append(min(v for v in adj[here] if dist.get(v) == dist[here] - 1))
    return " -> ".join(path) + "\n"


def modes(level, adj, rng):
    nodes = sorted(adj)
    out = [("degrees", ())]
    if level >= 2:
        out.append(("components", ()))
    if level >= 3:
        out.append(("dist", (rng.choice(nodes),)))
    if level >= 4:
        out.append(("path", (rng.choice(nodes), rng.choice(nodes))))
    return out


def test_report_files():
    adj = load(read(os.path.join(HERE, "edges.csv")))
    files = {"degrees.csv": ("degrees", ())}
    if CFG["level"] >= 2:
        files["components.txt"] = ("components", ())
    if CFG["level"] >= 3:
        files["distances.csv"] = ("dist", (CFG["source"],))
    if CFG["level"] >= 4:
        files["path.txt"] = ("path", (CFG["source"], CFG["target"]))
    for name, (mode, args) in files.items():
        want, got = expect(adj, mode, args), read("/app/out/" + name)
        assert got == want, f"/app/out/{name} differs.\nexpected:\n{want}\ngot:\n{got}"
    if CFG["level"] >= 4:
        comps = expect(adj, "components").splitlines()
        dist = bfs(adj, CFG["source"])
        want = {
            "nodes": len(adj),
            "edges": sum(len(v) for v in adj.values()) // 2,
            "components": len(comps),
            "largest_component": len(comps[0].split()),
            "eccentricity": max(dist.values()),
        }
        got = json.loads(read("/app/out/summary.json"))
        assert got == want, f"summary.json: expected {want}, got {got}"


def test_program_equivalence():
    if not CFG["code"]:
        return
    rng = random.Random(4242)
    work = tempfile.mkdtemp()
    for case in range(CFG["cases"]):
        count = rng.randint(3, 40)
        names = rng.sample([f"{p}{i}" for p in "abq" for i in range(60)], count)
        lines = ["src,dst"]
        for _ in range(rng.randint(1, count * 2)):
            lines.append(rng.choice(names) + "," + rng.choice(names))
        text = "\n".join(lines) + "\n"
        path = os.path.join(work, f"g{case}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        adj = load(text)
        for mode, args in modes(CFG["level"], adj, rng):
            done = run_program([path, mode, *args])
            want = expect(adj, mode, args)
            assert done.returncode == 0, f"case {case} {mode}: exit {done.returncode}"
            assert done.stdout == want, (
                f"case {case} `{mode} {' '.join(args)}` on\n{text}\nexpected:\n{want}\n"
                f"got:\n{done.stdout}"
            )
