"""Graph questions over an undirected edge list (the task's files are the templates
beside this module; the reference query program in Python, Bash or C is
``solution/graphq.*``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    code_note,
    csv_text,
    invoke,
    minimal_test_file,
    program_path,
    program_setup,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference query program of each language: ``solution/graphq.<extension>``."""


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
        program = program_path(ctx.language, "/app/graphq")
        modes = ["`<edges.csv> degrees` prints the degrees table"]
        if level >= 2:
            modes.append("`<edges.csv> components` prints the components lines")
        if level >= 3:
            modes.append("`<edges.csv> dist <node>` prints the distances table from `<node>`")
        if level >= 4:
            modes.append("`<edges.csv> path <from> <to>` prints the path line")
        usage = (
            "it takes the edge file and a query and prints to stdout exactly the content "
            "of the matching file above: " + "; ".join(modes) + "."
        )
        files = templates(__name__)
        # --- solution: the reference program (a shell script when no code is asked for)
        binary = "/app/graphq"
        lang = ctx.language if code else "bash"
        body = files.render(f"solution/graphq.{_EXTENSIONS[lang]}")
        if code:
            setup = program_setup(lang, program, body, binary)
            run = invoke(lang, program, binary)
        else:
            setup = program_setup("bash", "/tmp/graphq.sh", body)
            run = "bash /tmp/graphq.sh"
        values = {
            "level": level,
            "kind": kind,
            "source": source,
            "target": target,
            "code": code,
            "fuzz": fuzz,
            "code_note": code_note(ctx, program, usage) if code else "",
            "setup": "\n".join(setup),
            "run": run,
        }
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
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", head=minimal_test_file(params, "")
                ),
                "edges.csv": edges_text,
            },
            files={"graph/edges.csv": edges_text},
        )
