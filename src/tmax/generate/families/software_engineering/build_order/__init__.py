"""Order a monorepo's builds (software_engineering.build_order).

The task's files are the templates beside this module, written with placeholders for
the drawn names (output folder, manifest, INI file, requirements key, change list);
the reference orderer in Python, Bash and C is ``solution/buildorder.*``."""

from __future__ import annotations

from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    fixture_test_head,
    function_sources,
    invoke,
    program_path,
    program_sentence,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

BO_NAMES = (
    "auth-lib billing-core http-utils ui-kit search-api notify ledger reports etl-jobs "
    "admin-web mobile-bff geo pricing cart inventory catalog shipping fraud metrics logging "
    "config storage queue gateway identity tax invoices emails pdf-render feature-flags "
    "scheduler audit-log cache-layer payments refunds webhooks sdk-js cli-tools"
)
BO_EXTERNAL = ("requests", "left-pad", "openssl", "protobuf", "numpy", "react")
BO_OUT_DIRS = ("/app/out", "/app/ci", "/app/build", "/app/plan")
BO_MANIFESTS = ("deps.txt", "packages.txt", "manifest.txt", "requirements.map")
BO_INI_FILES = ("package.ini", "pkg.ini", "module.ini", "build.ini")
BO_REQUIRES_KEYS = ("requires", "depends", "deps", "needs")
BO_CHANGE_LISTS = ("changes.txt", "changed_files.txt", "pr_files.txt", "diff_files.txt")
BO_REPO_NOUNS = ("monorepo", "repository", "workspace", "code base")
BO_OPENERS = (
    "",
    "Our builds keep failing because packages get built before what they need. ",
    "I'm setting up CI for our packages and need the builds in a safe order. ",
    "We are moving our builds to a new CI runner and have to get the order right. ",
)
BO_ASKS = (
    "Our CI needs the following",
    "Please write these files for the CI",
    "The release pipeline needs these files",
    "I need these outputs",
)


def bo_parse(text):
    """{package: [requirements]} from a manifest of `name: dep dep` lines."""
    graph = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        graph[name.strip()] = rest.split()
    return graph


def bo_order(graph):
    """Build order (smallest ready name first) and the packages that can never be built."""
    needs = {p: {d for d in deps if d in graph} for p, deps in graph.items()}
    done, order = set(), []
    while True:
        ready = [p for p in sorted(graph) if p not in done and needs[p] <= done]
        if not ready:
            break
        done.add(ready[0])
        order.append(ready[0])
    return order, sorted(set(graph) - done)


def bo_waves(graph, order):
    depth = {}
    for p in order:
        depth[p] = 1 + max([depth[d] for d in graph[p] if d in graph] or [0])
    waves = {}
    for p, k in depth.items():
        waves.setdefault(k, []).append(p)
    return [sorted(waves[k]) for k in sorted(waves)]


def bo_rebuild(graph, order, changed):
    users = {}
    for p, deps in graph.items():
        for d in deps:
            users.setdefault(d, set()).add(p)
    todo, seen = [c for c in changed if c in graph], set()
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += sorted(users.get(p, ()))
    return [p for p in order if p in seen]


def bo_graph(rng, count, level):
    """A random monorepo dependency graph; level 2+ adds cycles and third-party names."""
    pool = BO_NAMES.split()
    names = rng.sample(pool, min(count, len(pool)))
    while len(names) < count:
        extra = f"{rng.choice(pool)}-{rng.randint(2, 9)}"
        if extra not in names:
            names.append(extra)
    graph = {}
    for i, name in enumerate(names):
        deps = rng.sample(names[:i], min(i, rng.choice([0, 1, 1, 2, 2, 3])))
        if level >= 2 and rng.random() < 0.2:
            deps.append(rng.choice(BO_EXTERNAL))
        graph[name] = deps
    if level >= 2 and len(names) >= 2:
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(1, len(names))
            j = rng.randrange(0, i)
            if names[i] not in graph[names[j]]:
                graph[names[j]].append(names[i])
    return graph


def bo_manifest(graph, rng):
    names = list(graph)
    rng.shuffle(names)
    lines = ["# package: requirements"]
    for name in names:
        lines.append(f"{name}: {' '.join(graph[name])}".rstrip())
    return "\n".join(lines) + "\n"


def _bo_ini(name: str, deps: list[str], version: str, bare: bool, key: str) -> str:
    lines = ["[package]", f"name = {name}", f"version = {version}"]
    if deps or not bare:
        lines.append(f"{key} = " + ", ".join(deps))
    return "\n".join(lines) + "\n"


@register
class BuildOrder(Family):
    """Work out a monorepo's build order from package requirements (smallest ready name
    first); levels add third-party names and cycles (blocked packages), per-package INI
    files with a change list to compute the rebuild set, renamed directories, parallel build
    waves and a JSON summary. Code asks for a build-order program fuzzed on fresh graphs."""

    name = "software_engineering.build_order"
    domain = "software_engineering"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"leave the input files as they are",),
             (r"def test_inputs_untouched\(",)),
        Rule("manifest_file", (r"`(?P<path>/app/repo/[\w.]+)` lists the packages of our",),
             (r'bo_parse\(Path\("{path}"\)\.read_text\(\)\)',), levels=frozenset({1, 2})),
        Rule("build_order", (r"`(?P<out>/app/\w+)/build_order\.txt`: the packages that can be "
                             r"built",),
             (r"def test_build_order\(", r'read\("{out}/build_order\.txt"\)')),
        Rule("smallest_ready_first", (r"Whenever several packages are ready, build the one whose "
                                      r"name comes first in byte order",),
             (r"ready = \[p for p in sorted\(graph\) if p not in done and needs\[p\] <= done\]",)),
        Rule("third_party", (r"Requirements that are not packages of the repo are third-party",),
             (r"needs = \{{p: \{{d for d in deps if d in graph\}}",), levels=frozenset({2, 3, 4})),
        Rule("blocked", (r"`(?P<out>/app/\w+)/blocked\.txt`: the packages that can never be "
                         r"built",
                         r"a package in a cycle, or one that needs such a package"),
             (r"def test_blocked\(", r'read\("{out}/blocked\.txt"\)'),
             levels=frozenset({2, 3, 4})),
        Rule("package_ini", (r"lives in a directory under `/app/repo/` with a `(?P<ini>\w+\.ini)` "
                             r"\(`\[package\]` section with `name`, `version` and optionally "
                             r"`(?P<key>\w+)`, a comma-separated list of requirements\)",),
             (r'for ini in sorted\(Path\("/app/repo"\)\.glob\("\*/{ini}"\)\):',
              r'requires = fields\.get\("{key}", ""\)'),
             levels=frozenset({3, 4})),
        Rule("rebuild", (r"`(?P<out>/app/\w+)/rebuild\.txt`: `(?P<changes>/app/\w+\.txt)` lists "
                         r"files changed",),
             (r"def test_rebuild\(", r'read\("{out}/rebuild\.txt"\)',
              r'Path\("{changes}"\)\.read_text\(\)'), levels=frozenset({3, 4})),
        Rule("renamed_dirs", (r"a few directories are not named after their package",),
             (r'dirs\[ini\.parent\.name\] = fields\["name"\]',), levels=frozenset({4})),
        Rule("waves", (r"`(?P<out>/app/\w+)/waves\.txt`: parallel build waves",),
             (r'read\("{out}/waves\.txt"\)',), levels=frozenset({4})),
        Rule("summary", (r"`(?P<out>/app/\w+)/summary\.json`: `packages`",),
             (r'json\.loads\(read\("{out}/summary\.json"\)\)',), levels=frozenset({4})),
        Rule("program", (r"I need a program that takes the path of a manifest",),
             (r"def test_program_on_fresh_graphs\(",), when={"code": True}),
        Rule("program_any_manifest", (r"It must cope with any manifest: requirements that are "
                                      r"not packages of the manifest are third-party",),
             (r"max\(LEVEL, 2\) if case % 2 else LEVEL",), levels=frozenset({1}),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[dict[str, str]] = {
        "write a topological sort over module dependencies": "build_order"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        out, manifest, ini, key, change_list, repo, opener, ask = (
            rng.choice(options)
            for options in (
                BO_OUT_DIRS,
                BO_MANIFESTS,
                BO_INI_FILES,
                BO_REQUIRES_KEYS,
                BO_CHANGE_LISTS,
                BO_REPO_NOUNS,
                BO_OPENERS,
                BO_ASKS,
            )
        )
        graph = bo_graph(rng, {1: 8, 2: 14, 3: 20, 4: 30}[level], level)
        files: dict[str, str | bytes] = {}
        dirs = {name: name for name in graph}
        if level <= 2:
            files[f"repo/{manifest}"] = bo_manifest(graph, rng)
        else:
            if level >= 4:
                for name in rng.sample(sorted(graph), 2):
                    dirs[name] = "old_" + name.replace("-", "_")
            for name, deps in graph.items():
                version = f"{rng.randint(0, 3)}.{rng.randint(0, 12)}.{rng.randint(0, 9)}"
                base = f"repo/{dirs[name]}"
                files[f"{base}/{ini}"] = _bo_ini(name, deps, version, rng.random() < 0.5, key)
                files[f"{base}/src/main.py"] = f'"""{name}."""\n\nVERSION = "{version}"\n'
            files["repo/scratch/notes.txt"] = "not a package, just notes\n"
            picks = rng.sample(sorted(graph), 3)
            changes = [f"repo/{dirs[p]}/src/main.py" for p in picks]
            changes += [f"repo/{dirs[picks[0]]}/{ini}", "docs/architecture.md"]
            changes.append("repo/scratch/notes.txt")
            rng.shuffle(changes)
            files[change_list] = "\n".join(changes) + "\n"
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        program = program_path(language, "/app/buildorder") if language else None
        folder = templates(__name__)
        extension = {"python": "py", "bash": "sh", "c": "c"}[language or "bash"]
        source = folder.render(
            f"solution/buildorder.{extension}", functions=function_sources(bo_parse, bo_order)
        )
        values = {
            "level": level,
            "language": language,
            "opener": opener,
            "ask": ask,
            "repo": repo,
            "out": out,
            "manifest": manifest,
            "ini": ini,
            "key": key,
            "change_list": change_list,
            "program": program,
            "program_dir": program.rsplit("/", 1)[0] if program else None,
            "program_sentence": program_sentence(language, program) if language else None,
            "source": source.strip(),
            "tool": invoke(language, program) if language else "bash /tmp/buildorder.sh",
        }
        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "cases": {1: 5, 2: 8, 3: 12, 4: 16}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = folder.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            names=BO_NAMES,
            external=BO_EXTERNAL,
            functions=function_sources(
                bo_parse, bo_order, bo_waves, bo_rebuild, bo_graph, bo_manifest
            ),
            settings=settings_lines(params),
            **values,
        )
        return Draft(
            instruction=folder.render("instruction.md", **values),
            # the steps are lines joined by newlines: none after the last
            solution=folder.render("solution/solve.sh", **values).rstrip("\n"),
            tests={"test_task.py": tests},
            files=files,
        )
