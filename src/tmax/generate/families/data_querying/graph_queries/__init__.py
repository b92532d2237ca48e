"""Graph questions over an undirected edge list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    code_note,
    csv_text,
    invoke,
    minimal_test_file,
    numbered,
    program_path,
    program_setup,
)
from tmax.generate.family import Draft, Family, RenderContext, register

_GRAPH_PY = """import sys
from collections import deque


def load(path):
    adj = {}
    with open(path) as handle:
        next(handle, None)
        for line in handle:
            line = line.strip()
            if "," not in line:
                continue
            a, b = line.split(",", 1)
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
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def main():
    adj, mode = load(sys.argv[1]), sys.argv[2]
    if mode == "degrees":
        print("node,degree")
        for node in sorted(adj, key=lambda n: (-len(adj[n]), n)):
            print(f"{node},{len(adj[node])}")
    elif mode == "components":
        seen, comps = set(), []
        for node in sorted(adj):
            if node not in seen:
                members = sorted(bfs(adj, node))
                seen.update(members)
                comps.append(members)
        for members in sorted(comps, key=lambda m: (-len(m), m[0])):
            print(" ".join(members))
    elif mode == "dist":
        dist = bfs(adj, sys.argv[3])
        print("node,hops")
        for node in sorted(dist, key=lambda n: (dist[n], n)):
            print(f"{node},{dist[node]}")
    elif mode == "path":
        src, dst = sys.argv[3], sys.argv[4]
        dist = bfs(adj, dst) if dst in adj else {}
        if src not in dist:
            print("none")
            return
        path = [src]
        while path[-1] != dst:
            here = path[-1]
            path.append(min(v for v in adj[here] if dist.get(v) == dist[here] - 1))
        print(" -> ".join(path))


main()
"""

_GRAPH_SH = r"""#!/bin/bash
set -euo pipefail
export LC_ALL=C
edges=$1
mode=$2
LOAD='
NR > 1 && NF >= 2 {
  a = $1; b = $2
  if (!(a in seen)) { seen[a] = 1; nodes[++n] = a }
  if (!(b in seen)) { seen[b] = 1; nodes[++n] = b }
  if (a != b && !((a, b) in e)) {
    e[a, b] = 1; e[b, a] = 1; deg[a]++; deg[b]++
    nb[a] = nb[a] " " b; nb[b] = nb[b] " " a
  }
}
function bfs(s,   head, tail, u, k, m, parts, v) {
  split("", dist); head = 1; tail = 1; queue[1] = s; dist[s] = 0
  while (head <= tail) {
    u = queue[head++]; m = split(nb[u], parts, " ")
    for (k = 1; k <= m; k++) {
      v = parts[k]
      if (!(v in dist)) { dist[v] = dist[u] + 1; queue[++tail] = v }
    }
  }
}'
case "$mode" in
  degrees)
    echo "node,degree"
    awk -F, "$LOAD"' END { for (i = 1; i <= n; i++) print nodes[i] "," (deg[nodes[i]] + 0) }' \
      "$edges" \
      | sort -t, -k2,2nr -k1,1
    ;;
  components)
    awk -F, "$LOAD"' END {
      for (i = 1; i <= n; i++) if (!(nodes[i] in comp)) {
        c++; bfs(nodes[i]); for (v in dist) comp[v] = c
      }
      for (v in comp) print comp[v] "\t" v }' "$edges" \
      | sort -t "$(printf '\t')" -k1,1n -k2,2 \
      | awk -F'\t' '{ if ($1 != last && NR > 1) { print size "\t" first "\t" line; line = "" }
          if ($1 != last) { size = 0; first = $2 } last = $1; size++
          line = (line == "" ? $2 : line " " $2) }
        END { if (NR) print size "\t" first "\t" line }' \
      | sort -t "$(printf '\t')" -k1,1nr -k2,2 | cut -f3
    ;;
  dist)
    echo "node,hops"
    awk -F, -v s="$3" "$LOAD"' END {
      if (s in seen) { bfs(s); for (v in dist) print v "," dist[v] } }' \
      "$edges" | sort -t, -k2,2n -k1,1
    ;;
  path)
    awk -F, -v s="$3" -v t="$4" "$LOAD"' END {
      if (!(t in seen)) { print "none"; exit }
      bfs(t)
      if (!(s in dist)) { print "none"; exit }
      u = s; out = s
      while (u != t) {
        best = ""; m = split(nb[u], parts, " ")
        for (k = 1; k <= m; k++) {
          v = parts[k]
          if (dist[v] == dist[u] - 1 && (best == "" || v < best)) best = v
        }
        u = best; out = out " -> " u
      }
      print out }' "$edges"
    ;;
esac
"""

_GRAPH_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 20000
static char *names[MAXN];
static int *adj[MAXN], deg[MAXN], cap[MAXN], dist[MAXN], queue_[MAXN], order[MAXN];
static int label[MAXN], first[MAXN], size[MAXN], comps[MAXN];
static int n;

static int find(const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

static int intern(const char *s) {
    int i = find(s);
    if (i >= 0) return i;
    size_t len = strlen(s) + 1;
    names[n] = malloc(len);
    memcpy(names[n], s, len);
    return n++;
}

static int linked(int a, int b) {
    for (int i = 0; i < deg[a]; i++)
        if (adj[a][i] == b) return 1;
    return 0;
}

static void add(int a, int b) {
    if (deg[a] == cap[a]) {
        cap[a] = cap[a] ? 2 * cap[a] : 4;
        adj[a] = realloc(adj[a], cap[a] * sizeof(int));
    }
    adj[a][deg[a]++] = b;
}

static void bfs(int s) {
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++) dist[i] = -1;
    dist[s] = 0;
    queue_[tail++] = s;
    while (head < tail) {
        int u = queue_[head++];
        for (int k = 0; k < deg[u]; k++) {
            int v = adj[u][k];
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                queue_[tail++] = v;
            }
        }
    }
}

static int by_degree(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (deg[a] != deg[b]) return deg[b] - deg[a];
    return strcmp(names[a], names[b]);
}

static int by_name(const void *x, const void *y) {
    return strcmp(names[*(const int *)x], names[*(const int *)y]);
}

static int by_dist(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (dist[a] != dist[b]) return dist[a] - dist[b];
    return strcmp(names[a], names[b]);
}

static int by_comp(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (size[a] != size[b]) return size[b] - size[a];
    return strcmp(names[first[a]], names[first[b]]);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return 1;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, in)) {
        if (lineno++ == 0) continue;
        line[strcspn(line, "\r\n")] = 0;
        char *comma = strchr(line, ',');
        if (!comma) continue;
        *comma = 0;
        int a = intern(line), b = intern(comma + 1);
        if (a != b && !linked(a, b)) {
            add(a, b);
            add(b, a);
        }
    }
    fclose(in);
    for (int i = 0; i < n; i++) order[i] = i;
    const char *mode = argv[2];
    if (strcmp(mode, "degrees") == 0) {
        qsort(order, n, sizeof(int), by_degree);
        printf("node,degree\n");
        for (int i = 0; i < n; i++) printf("%s,%d\n", names[order[i]], deg[order[i]]);
    } else if (strcmp(mode, "components") == 0) {
        qsort(order, n, sizeof(int), by_name);
        int c = 0;
        for (int i = 0; i < n; i++) label[i] = -1;
        for (int i = 0; i < n; i++) {
            int s = order[i];
            if (label[s] >= 0) continue;
            bfs(s);
            first[c] = s;
            size[c] = 0;
            for (int v = 0; v < n; v++)
                if (dist[v] >= 0) {
                    label[v] = c;
                    size[c]++;
                }
            comps[c] = c;
            c++;
        }
        qsort(comps, c, sizeof(int), by_comp);
        for (int k = 0; k < c; k++) {
            int printed = 0;
            for (int i = 0; i < n; i++)
                if (label[order[i]] == comps[k])
                    printf(printed++ ? " %s" : "%s", names[order[i]]);
            printf("\n");
        }
    } else if (strcmp(mode, "dist") == 0 && argc > 3) {
        printf("node,hops\n");
        int s = find(argv[3]);
        if (s < 0) return 0;
        bfs(s);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (dist[i] >= 0) order[m++] = i;
        qsort(order, m, sizeof(int), by_dist);
        for (int i = 0; i < m; i++) printf("%s,%d\n", names[order[i]], dist[order[i]]);
    } else if (strcmp(mode, "path") == 0 && argc > 4) {
        int s = find(argv[3]), t = find(argv[4]);
        if (s < 0 || t < 0) {
            printf("none\n");
            return 0;
        }
        bfs(t);
        if (dist[s] < 0) {
            printf("none\n");
            return 0;
        }
        printf("%s", names[s]);
        int u = s;
        while (u != t) {
            int best = -1;
            for (int k = 0; k < deg[u]; k++) {
                int v = adj[u][k];
                if (dist[v] == dist[u] - 1 && (best < 0 || strcmp(names[v], names[best]) < 0))
                    best = v;
            }
            u = best;
            printf(" -> %s", names[u]);
        }
        printf("\n");
    }
    return 0;
}
"""

_GRAPH_TESTS = """
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
        return "node,degree\\n" + "".join(f"{n},{len(adj[n])}\\n" for n in rows)
    if mode == "components":
        comps, seen = [], set()
        for node in sorted(adj):
            if node not in seen:
                members = sorted(bfs(adj, node))
                seen.update(members)
                comps.append(members)
        comps.sort(key=lambda m: (-len(m), m[0]))
        return "".join(" ".join(m) + "\\n" for m in comps)
    if mode == "dist":
        dist = bfs(adj, args[0])
        rows = sorted(dist, key=lambda n: (dist[n], n))
        return "node,hops\\n" + "".join(f"{n},{dist[n]}\\n" for n in rows)
    src, dst = args
    dist = bfs(adj, dst)
    if src not in dist:
        return "none\\n"
    path = [src]
    while path[-1] != dst:
        here = path[-1]
        path.append(min(v for v in adj[here] if dist.get(v) == dist[here] - 1))
    return " -> ".join(path) + "\\n"


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
        assert got == want, f"/app/out/{name} differs.\\nexpected:\\n{want}\\ngot:\\n{got}"
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
        text = "\\n".join(lines) + "\\n"
        path = os.path.join(work, f"g{case}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        adj = load(text)
        for mode, args in modes(CFG["level"], adj, rng):
            done = run_program([path, mode, *args])
            want = expect(adj, mode, args)
            assert done.returncode == 0, f"case {case} {mode}: exit {done.returncode}"
            assert done.stdout == want, (
                f"case {case} `{mode} {' '.join(args)}` on\\n{text}\\nexpected:\\n{want}\\n"
                f"got:\\n{done.stdout}"
            )
"""


@register
class GraphQueries(Family):
    """Answer graph questions over a friendship/dependency edge list (degrees, components,
    hop distances, canonical shortest path); level adds questions and a summary, code asks
    for a query program that is fuzzed against an oracle on random graphs."""

    name = "data_querying.graph_queries"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("repeats_and_self_loops", (r"repeats count once and a self-loop adds no neighbour",),
             (r"if a != b:\n\s+adj\[a\]\.add\(b\)",)),
        Rule("degrees", (r"`/app/out/degrees\.csv`: header `node,degree`",),
             (r"def test_report_files\(", r'files = \{{"degrees\.csv": \("degrees", \(\)\)\}}')),
        Rule("components", (r"`/app/out/components\.txt`: one connected component per line",),
             (r'files\["components\.txt"\] = \("components"',), levels=frozenset({2, 3, 4})),
        Rule("distances", (r"`/app/out/distances\.csv`: header `node,hops`",),
             (r'files\["distances\.csv"\] = \("dist"',), levels=frozenset({3, 4})),
        Rule("shortest_path", (r"`/app/out/path\.txt`: one line with a shortest path",),
             (r'files\["path\.txt"\] = \("path"',), levels=frozenset({4})),
        Rule("summary_json", (r"`/app/out/summary\.json`: integer keys `nodes`",),
             (r'read\("/app/out/summary\.json"\)',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/graphq",),
             (r"def test_program_equivalence\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "count node degrees from relationship records": "degrees",
        "extract connected components from a friendship edge CSV": "components",
        "find shortest paths in an edge list table": "shortest_path",
        "format aggregated results as a JSON report": "summary_json",
        "export query results to CSV with header rows": "degrees",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        prefix = ctx.pick(["user", "svc", "pkg", "host"])
        count = {1: 12, 2: 24, 3: 40, 4: 70}[level]
        names = [f"{prefix}{i:03d}" for i in rng.sample(range(1, 400), count)]
        edges = []
        groups = max(2, level + 1)
        for i, node in enumerate(names):
            for _ in range(rng.randint(0, 2)):
                other = names[rng.randrange(len(names))]
                if rng.random() < 0.8 and (names.index(other) % groups) != i % groups:
                    other = names[(i + groups * rng.randint(1, 3)) % len(names)]
                edges.append((node, other))
        for _ in range(level + 1):  # repeats and self-loops
            a, b = rng.choice(edges)
            edges.append((b, a))
        edges.append((names[0], names[0]))
        rng.shuffle(edges)
        adj: dict[str, set[str]] = {}
        for a, b in edges:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
        source = ctx.pick(sorted(n for n in adj if len(adj[n] - {n}) > 0))
        reach, frontier = {source}, [source]
        while frontier:
            frontier = [v for u in frontier for v in sorted(adj[u]) if v not in reach]
            reach.update(frontier)
        pool = sorted(reach - {source}) if rng.random() < 0.85 else sorted(set(adj) - {source})
        target = ctx.pick(pool)
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        kind = ctx.pick(["friendship", "service dependency", "co-authorship"])
        deliver = [
            "`/app/out/degrees.csv`: header `node,degree`, then every node with its number of "
            "distinct neighbours, highest degree first, ties by node name"
        ]
        if level >= 2:
            deliver.append(
                "`/app/out/components.txt`: one connected component per line, its nodes sorted "
                "and separated by single spaces; largest component first, ties by the "
                "component's smallest node name"
            )
        if level >= 3:
            deliver.append(
                f"`/app/out/distances.csv`: header `node,hops`, every node reachable from "
                f"`{source}` (itself included, 0 hops) with its hop distance, nearest first, "
                "ties by node name"
            )
        if level >= 4:
            deliver.append(
                f"`/app/out/path.txt`: one line with a shortest path from `{source}` to "
                f"`{target}` written as `a -> b -> c`; when several exist, take at every step "
                "the smallest node name that still lies on a shortest path; the single word "
                "`none` if there is no path"
            )
            deliver.append(
                "`/app/out/summary.json`: integer keys `nodes`, `edges` (distinct undirected "
                "edges, self-loops excluded), `components`, `largest_component` (its node "
                f"count) and `eccentricity` (the largest hop distance from `{source}`)"
            )
        text = (
            f"`/app/graph/edges.csv` is an undirected {kind} graph, one edge per row with the "
            "header `src,dst`. Rows may repeat (also in reverse) and may contain self-loops: "
            "repeats count once and a self-loop adds no neighbour, but a node only seen in a "
            "self-loop still exists. Node names compare in plain byte order. I need:\n\n"
            + numbered(deliver)
            + "\n\nAll files end with a newline."
        )
        program = program_path(ctx.language, "/app/graphq")
        modes = ["`<edges.csv> degrees` prints the degrees table"]
        if level >= 2:
            modes.append("`<edges.csv> components` prints the components lines")
        if level >= 3:
            modes.append("`<edges.csv> dist <node>` prints the distances table from `<node>`")
        if level >= 4:
            modes.append("`<edges.csv> path <from> <to>` prints the path line")
        if code:
            text += "\n\n" + code_note(
                ctx,
                program,
                "it takes the edge file and a query and prints to stdout exactly the content "
                "of the matching file above: " + "; ".join(modes) + ".",
            )
            if fuzz:
                text += " It will be compared with a reference on many random graphs."
        # --- solution
        binary = "/app/graphq"
        if code:
            body = {"python": _GRAPH_PY, "bash": _GRAPH_SH, "c": _GRAPH_C}[ctx.language]
            lines = program_setup(ctx.language, program, body, binary)
            run = invoke(ctx.language, program, binary)
        else:
            lines = program_setup("bash", "/tmp/graphq.sh", _GRAPH_SH)
            run = "bash /tmp/graphq.sh"
        lines = ["head -n 5 /app/graph/edges.csv", "mkdir -p /app/out", *lines]
        if level >= 3:
            lines.insert(1, "wc -l /app/graph/edges.csv")
        lines.append(f"{run} /app/graph/edges.csv degrees > /app/out/degrees.csv")
        if level >= 2:
            lines.append(f"{run} /app/graph/edges.csv components > /app/out/components.txt")
        if level >= 3:
            lines.append(f"{run} /app/graph/edges.csv dist {source} > /app/out/distances.csv")
            lines.append("tail -n 3 /app/out/distances.csv")
        if level >= 4:
            lines += [
                f"{run} /app/graph/edges.csv path {source} {target} > /app/out/path.txt",
                "nodes=$(tail -n +2 /app/out/degrees.csv | wc -l)",
                "edges=$(awk -F, 'NR > 1 { s += $2 } END { print s / 2 }' /app/out/degrees.csv)",
                "comps=$(wc -l < /app/out/components.txt)",
                "largest=$(head -n 1 /app/out/components.txt | wc -w)",
                "ecc=$(tail -n 1 /app/out/distances.csv | cut -d, -f2)",
                'printf \'{"nodes": %d, "edges": %d, "components": %d, "largest_component": %d,'
                ' "eccentricity": %d}\\n\' "$nodes" "$edges" "$comps" "$largest" "$ecc"'
                " > /app/out/summary.json",
                "cat /app/out/summary.json /app/out/path.txt",
            ]
        edges_text = csv_text(["src", "dst"], edges)
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "source": source,
            "target": target,
            "cases": (4 if not fuzz else 6) * level,
        }
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests={
                "test_task.py": minimal_test_file(params, _GRAPH_TESTS),
                "edges.csv": edges_text,
            },
            files={"graph/edges.csv": edges_text},
        )
