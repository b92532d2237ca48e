"""Order a monorepo's builds (software_engineering.build_order)."""

from __future__ import annotations

from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    build_step,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register

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


_BO_PY = (
    """#!/usr/bin/env python3
\"\"\"Print the build order of a manifest (`name: dep dep` lines), one package per line.\"\"\"
import sys

"""
    + function_sources(bo_parse, bo_order)
    + """


def main():
    order, _blocked = bo_order(bo_parse(open(sys.argv[1], encoding="utf-8").read()))
    sys.stdout.write("".join(p + "\\n" for p in order))


if __name__ == "__main__":
    main()
"""
)

_BO_SH = r"""#!/bin/bash
# Print the build order of a manifest (`name: dep dep` lines), one package per line.
export LC_ALL=C
declare -A deps=() known=() done=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line#"${line%%[![:space:]]*}"}
  [[ -z $line || $line == \#* ]] && continue
  name=${line%%:*}
  name=${name%"${name##*[![:space:]]}"}
  deps[$name]=${line#*:}
  known[$name]=1
done < "$1"
mapfile -t names < <(printf '%s\n' "${!known[@]}" | sort)
[[ ${#known[@]} -eq 0 ]] && exit 0
while :; do
  picked=""
  for name in "${names[@]}"; do
    [[ -n ${done[$name]+x} ]] && continue
    ready=1
    for dep in ${deps[$name]}; do
      if [[ -n ${known[$dep]+x} && -z ${done[$dep]+x} ]]; then ready=0; break; fi
    done
    if ((ready)); then picked=$name; break; fi
  done
  [[ -z $picked ]] && break
  done[$picked]=1
  printf '%s\n' "$picked"
done
"""

_BO_C = r"""/* Print the build order of a manifest (`name: dep dep` lines), one package per line. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 4096

static char *names[MAXP];
static char *deplist[MAXP];
static int count;

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int lookup(const char *name) {
    for (int i = 0; i < count; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

int main(int argc, char **argv) {
    static char line[65536];
    if (argc < 2) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return perror(argv[1]), 1;
    char *raw_names[MAXP], *raw_deps[MAXP];
    int raw = 0;
    while (fgets(line, sizeof line, in) && raw < MAXP) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        s[strcspn(s, "\r\n")] = 0;
        if (!*s || *s == '#') continue;
        char *colon = strchr(s, ':');
        char *rest = colon ? colon + 1 : s + strlen(s);
        if (colon) *colon = 0;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
        raw_names[raw] = strdup(s);
        raw_deps[raw++] = strdup(rest);
    }
    fclose(in);
    for (int i = 0; i < raw; i++) names[count++] = raw_names[i];
    qsort(names, count, sizeof names[0], cmp);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < raw; j++)
            if (names[i] == raw_names[j]) deplist[i] = raw_deps[j];
    /* requirement indexes per package (-1 for third-party names) */
    int *reqs[MAXP], nreq[MAXP];
    for (int i = 0; i < count; i++) {
        reqs[i] = malloc(sizeof(int) * (strlen(deplist[i]) / 2 + 1));
        nreq[i] = 0;
        char *copy = strdup(deplist[i]);
        for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t")) {
            int k = lookup(tok);
            if (k >= 0) reqs[i][nreq[i]++] = k;
        }
        free(copy);
    }
    static char built[MAXP];
    for (;;) {
        int picked = -1;
        for (int i = 0; i < count && picked < 0; i++) {
            if (built[i]) continue;
            int ready = 1;
            for (int k = 0; k < nreq[i]; k++)
                if (!built[reqs[i][k]]) ready = 0;
            if (ready) picked = i;
        }
        if (picked < 0) break;
        built[picked] = 1;
        puts(names[picked]);
    }
    return 0;
}
"""


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

        rule = (
            "A package can be built once every requirement that is a package of this repo has "
            "been built. Whenever several packages are ready, build the one whose name comes "
            "first in byte order."
        )
        if level >= 2:
            rule += (
                " Requirements that are not packages of the repo are third-party and already "
                "installed. Some requirements form cycles; a package in a cycle, or one that "
                "needs such a package, directly or not, can never be built."
            )
        if level <= 2:
            where = (
                f"`/app/repo/{manifest}` lists the packages of our {repo}, one `name: "
                "requirement requirement ...` line each (`#` starts a comment)."
            )
        else:
            where = (
                f"Each package of our {repo} lives in a directory under `/app/repo/` with a "
                f"`{ini}` (`[package]` section with `name`, `version` and optionally "
                f"`{key}`, a comma-separated list of requirements). Directories without one are "
                "not packages."
            )
            if level >= 4:
                where += " Careful: a few directories are not named after their package."
        deliverables = [
            f"`{out}/build_order.txt`: the packages that can be built, one per line, in build "
            "order."
        ]
        if level >= 2:
            deliverables.append(
                f"`{out}/blocked.txt`: the packages that can never be built, sorted."
            )
        if level >= 3:
            deliverables.append(
                f"`{out}/rebuild.txt`: `/app/{change_list}` lists files changed in a pull "
                "request. The packages owning a changed file, plus every package that requires "
                "one of them directly or indirectly, must be rebuilt: list the buildable ones "
                "in build order."
            )
        if level >= 4:
            deliverables.append(
                f"`{out}/waves.txt`: parallel build waves. A buildable package with no "
                "requirement inside the repo is in wave 1; otherwise its wave is one more than "
                "the highest wave among its in-repo requirements. One line per wave, "
                "`K: name name ...` (names sorted), K ascending."
            )
            deliverables.append(
                f"`{out}/summary.json`: `packages` (all packages), `buildable`, `blocked`, "
                "`waves` (number of waves) and `rebuild` (lines of rebuild.txt)."
            )
        body = [
            opener + where + " " + rule,
            f"{ask} (leave the input files as they are):\n" + numbered(deliverables),
        ]
        program = None
        if language:
            program = program_path(language, "/app/buildorder")
            body.append(
                "CI should compute this itself from now on, so I need a program that takes "
                "the path of a manifest in the `name: requirement ...` line format (blank lines "
                "and `#` comments allowed) and prints the buildable packages in build order, "
                "one per line. "
                + (
                    "It must cope with any manifest: requirements that are not packages of the "
                    "manifest are third-party and already installed, and a package in a "
                    "requirement cycle, or one that needs such a package, is never built. "
                    if level == 1
                    else ""
                )
                + program_sentence(language, program)
            )
        instruction = "\n\n".join(body)

        steps = ["mkdir -p /app/out"]
        if language:
            source = {"python": _BO_PY, "bash": _BO_SH, "c": _BO_C}[language]
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            tool = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/buildorder.sh", _BO_SH))
            tool = "bash /tmp/buildorder.sh"
        if level <= 2:
            steps.append("cp /app/repo/deps.txt /tmp/manifest.txt")
        else:
            steps += [
                "ls /app/repo",
                "for f in /app/repo/*/package.ini; do awk -F' *= *' '$1 == \"name\" {n = $2}"
                ' $1 == "requires" {r = $2} END {gsub(/,/, " ", r); print n ": " r}\''
                ' "$f"; done > /tmp/manifest.txt',
                "for f in /app/repo/*/package.ini; do printf '%s %s\\n' \"$(basename"
                ' "$(dirname "$f")")" "$(awk -F\' *= *\' \'$1 == "name" {print $2}\' "$f")";'
                " done > /tmp/dirs.txt",
            ]
        steps.append(f"{tool} /tmp/manifest.txt > /app/out/build_order.txt")
        if level >= 2:
            steps += [
                "grep -v '^#' /tmp/manifest.txt | grep . | cut -d: -f1 | sed 's/ *$//'"
                " | LC_ALL=C sort > /tmp/all.txt",
                "LC_ALL=C sort /app/out/build_order.txt > /tmp/built.txt",
                "LC_ALL=C comm -23 /tmp/all.txt /tmp/built.txt > /app/out/blocked.txt",
            ]
        if level >= 3:
            steps += [
                'awk \'NR == FNR {m[$1] = $2; next} {split($0, p, "/");'
                ' if (p[1] == "repo" && (p[2] in m)) print m[p[2]]}\' /tmp/dirs.txt'
                " /app/changes.txt | LC_ALL=C sort -u > /tmp/rebuild.set",
                'while :; do awk \'NR == FNR {s[$1] = 1; next} {split($0, a, ":"); n = a[1];'
                ' if (n in s) next; k = split(a[2], d, " "); for (i = 1; i <= k; i++)'
                " if (d[i] in s) {print n; break}}' /tmp/rebuild.set /tmp/manifest.txt"
                " > /tmp/more.txt; [ -s /tmp/more.txt ] || break;"
                " cat /tmp/more.txt >> /tmp/rebuild.set; done",
                "grep -Fxf /tmp/rebuild.set /app/out/build_order.txt > /app/out/rebuild.txt"
                " || true",
            ]
        if level >= 4:
            steps += [
                'awk \'NR == FNR {split($0, a, ":"); deps[a[1]] = a[2]; next}'
                ' {k = split(deps[$1], d, " "); m = 0; for (i = 1; i <= k; i++)'
                " if ((d[i] in lvl) && lvl[d[i]] > m) m = lvl[d[i]]; lvl[$1] = m + 1;"
                " print m + 1, $1}' /tmp/manifest.txt /app/out/build_order.txt"
                " | LC_ALL=C sort -k1,1n -k2,2 > /tmp/levels.txt",
                'awk \'$1 != w {if (NR > 1) print line; w = $1; line = $1 ":"}'
                ' {line = line " " $2} END {if (NR) print line}\' /tmp/levels.txt'
                " > /app/out/waves.txt",
                'printf \'{"packages": %d, "buildable": %d, "blocked": %d, "waves": %d,'
                ' "rebuild": %d}\\n\' $(wc -l < /tmp/all.txt) $(wc -l < /app/out/build_order.txt)'
                " $(wc -l < /app/out/blocked.txt) $(wc -l < /app/out/waves.txt)"
                " $(wc -l < /app/out/rebuild.txt) > /app/out/summary.json",
                "cat /app/out/summary.json",
            ]
        # the reference steps and the tests are written for the default names
        names = {
            "/app/out": out,
            "/app/repo/deps.txt": f"/app/repo/{manifest}",
            "package.ini": ini,
            '"requires"': f'"{key}"',
            "/app/changes.txt": f"/app/{change_list}",
        }

        def named(text: str) -> str:
            for default, chosen in names.items():
                text = text.replace(default, chosen)
            return text

        solution = named("\n".join(s for s in steps if s))

        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "cases": {1: 5, 2: 8, 3: 12, 4: 16}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + f"BO_NAMES = {BO_NAMES!r}\nBO_EXTERNAL = {BO_EXTERNAL!r}\n\n"
            + function_sources(bo_parse, bo_order, bo_waves, bo_rebuild, bo_graph, bo_manifest)
            + "\n\n"
            + settings_lines(params)
            + named(_BO_TESTS)
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_BO_TESTS = """
LEVEL = CFG["level"]


def load():
    if LEVEL <= 2:
        return bo_parse(Path("/app/repo/deps.txt").read_text()), {}
    graph, dirs = {}, {}
    for ini in sorted(Path("/app/repo").glob("*/package.ini")):
        fields = {}
        for line in ini.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key.strip()] = value.strip()
        requires = fields.get("requires", "").split(",")
        graph[fields["name"]] = [r.strip() for r in requires if r.strip()]
        dirs[ini.parent.name] = fields["name"]
    return graph, dirs


GRAPH, DIRS = load()
ORDER, BLOCKED = bo_order(GRAPH)


def lines(items):
    return "".join(f"{i}\\n" for i in items)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_build_order():
    assert read("/app/out/build_order.txt") == lines(ORDER), "build_order.txt is wrong"


def test_blocked():
    if CFG["level"] >= 2:
        assert read("/app/out/blocked.txt") == lines(BLOCKED), "blocked.txt is wrong"


def rebuild():
    changed = set()
    for path in Path("/app/changes.txt").read_text().split():
        parts = path.split("/")
        if parts[0] == "repo" and len(parts) > 2 and parts[1] in DIRS:
            changed.add(DIRS[parts[1]])
    return bo_rebuild(GRAPH, ORDER, sorted(changed))


def test_rebuild():
    if CFG["level"] >= 3:
        assert read("/app/out/rebuild.txt") == lines(rebuild()), "rebuild.txt is wrong"


def test_waves_and_summary():
    if CFG["level"] >= 4:
        waves = bo_waves(GRAPH, ORDER)
        expected = "".join(f"{k}: {' '.join(w)}\\n" for k, w in enumerate(waves, 1))
        assert read("/app/out/waves.txt") == expected, "waves.txt is wrong"
        summary = json.loads(read("/app/out/summary.json"))
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
            f"case {case}: wrong order for\\n{path.read_text()}\\n--- got\\n{done.stdout}"
            f"\\n--- expected\\n{expected}"
        )
"""
