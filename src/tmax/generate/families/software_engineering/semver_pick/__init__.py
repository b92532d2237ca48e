"""Semantic-version resolution, from scratch or by fixing a vendored library
(software_engineering.semver_pick).

The task's files are the templates beside this module, written with placeholders for
the drawn names: the reference picker in Python and Bash is ``solution/pick.*``; the
vendored semverlite (whose ``core.py`` gets one planted bug per level) and the release
tool that uses it are ``environment/vendor/semverlite/`` and
``environment/tools/resolve.py``."""

from __future__ import annotations

import re

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


def sv_parse(text):
    core, _, pre = text.partition("-")
    major, minor, patch = (int(x) for x in core.split("."))
    return major, minor, patch, pre.split(".") if pre else []


def sv_cmp(a, b):
    """-1, 0 or 1 as version a has lower, equal or higher precedence than b."""
    x, y = sv_parse(a), sv_parse(b)
    if x[:3] != y[:3]:
        return -1 if x[:3] < y[:3] else 1
    xp, yp = x[3], y[3]
    if not xp and not yp:
        return 0
    if not xp:
        return 1
    if not yp:
        return -1
    for i, j in zip(xp, yp, strict=False):
        if i == j:
            continue
        if i.isdigit() and j.isdigit():
            return -1 if int(i) < int(j) else 1
        if i.isdigit():
            return -1
        if j.isdigit():
            return 1
        return -1 if i < j else 1
    return (len(xp) > len(yp)) - (len(xp) < len(yp))


def sv_satisfies(version, constraint, level):
    tests = {
        ">=": lambda c: c >= 0,
        "<=": lambda c: c <= 0,
        ">": lambda c: c > 0,
        "<": lambda c: c < 0,
        "=": lambda c: c == 0,
    }
    for alternative in constraint.split("||"):
        comparators = []
        for token in alternative.split():
            match = re.match(r"(>=|<=|>|<|=|\^|~)?(.+)$", token)
            op, target = match.group(1) or "=", match.group(2)
            major, minor, patch, _ = sv_parse(target)
            if op == "^":
                if major:
                    upper = f"{major + 1}.0.0"
                elif minor:
                    upper = f"0.{minor + 1}.0"
                else:
                    upper = f"0.0.{patch + 1}"
                comparators += [(">=", target), ("<", upper)]
            elif op == "~":
                comparators += [(">=", target), ("<", f"{major}.{minor + 1}.0")]
            else:
                comparators.append((op, target))
        if not comparators:
            continue
        ok = all(tests[op](sv_cmp(version, target)) for op, target in comparators)
        mine = sv_parse(version)
        if ok and level >= 3 and mine[3]:
            ok = any(sv_parse(t)[3] and sv_parse(t)[:3] == mine[:3] for _, t in comparators)
        if ok:
            return True
    return False


def sv_pick(versions, constraints, level):
    best = None
    for version in versions:
        if not all(sv_satisfies(version, c, level) for c in constraints):
            continue
        if best is None or sv_cmp(version, best) > 0:
            best = version
    return best


def sv_index(text):
    index = {}
    for line in text.split("\n"):
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#"):
            index.setdefault(parts[0], []).append(parts[1])
    return index


def sv_resolve(index, requirement_text, level):
    """[(package, version or None)] in first-appearance order of the requirements."""
    wanted = {}
    for line in requirement_text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        package, _, constraint = line.partition(" ")
        wanted.setdefault(package, []).append(constraint.strip())
    return [(p, sv_pick(index.get(p, []), cs, level)) for p, cs in wanted.items()]


def sv_sorted(versions):
    import functools

    return sorted(versions, key=functools.cmp_to_key(sv_cmp))


def sv_version(rng, level):
    text = f"{rng.choice([0, 0, 1, 1, 2, 3])}.{rng.randint(0, 12)}.{rng.randint(0, 15)}"
    if level >= 3 and rng.random() < 0.25:
        tags = [rng.choice(["alpha", "beta", "rc", "pre-x"])]
        tags += [str(rng.randint(0, 11)) for _ in range(rng.randint(0, 2))]
        text += "-" + ".".join(tags)
    return text


def sv_constraint(rng, versions, level):
    def comparator():
        base = rng.choice(versions) if versions and rng.random() < 0.8 else sv_version(rng, level)
        if level >= 3 and rng.random() < 0.15 and "-" not in base:
            base += "-" + rng.choice(["alpha", "beta.2", "rc.1", "rc.10"])
        ops = [">=", "<", "="] + ([">", "<=", "^", "~", "^", "~"] if level >= 2 else [])
        op = rng.choice(ops)
        return ("" if op == "=" and rng.random() < 0.5 else op) + base

    def alternative():
        if len(versions) >= 2 and rng.random() < 0.35:
            low, high = sorted(rng.sample(versions, 2), key=lambda v: sv_parse(v)[:3])
            return f">={low} <{high}" if low != high else f">={low}"
        return comparator()

    if level >= 4 and rng.random() < 0.3:
        return " || ".join(alternative() for _ in range(2))
    return alternative()


def sv_world(rng, level, packages):
    names = ["left-pad", "chalk", "lodash", "express", "axios", "react", "moment", "zod"]
    names += ["yargs", "semver", "debug", "uuid", "ws", "jest", "vite", "redux"]
    chosen = rng.sample(names, packages)
    index = {}
    for name in chosen:
        versions = set()
        while len(versions) < rng.randint(4, 12):
            versions.add(sv_version(rng, level))
        index[name] = sorted(versions)
    requirements = []
    for name in chosen[: max(1, packages - 1)]:
        for _ in range(2 if level >= 4 and rng.random() < 0.4 else 1):
            requirements.append((name, sv_constraint(rng, index[name], level)))
    requirements.append(("missing-" + rng.choice(["pkg", "lib"]), ">=1.0.0"))
    rng.shuffle(requirements)
    return index, requirements


def sv_index_text(index, rng):
    rows = [f"{p} {v}" for p, vs in index.items() for v in vs]
    rng.shuffle(rows)
    return "# package version\n" + "\n".join(rows) + "\n"


_SV_ORACLE = function_sources(
    sv_parse, sv_cmp, sv_satisfies, sv_pick, sv_index, sv_resolve, sv_sorted, sv_version
)

_SVL_BUGS = (
    (
        "    return int(major), int(minor), int(patch), tuple",
        "    return int(major), int(minor), patch, tuple",
    ),
    (
        """        if major:
            upper = f"{major + 1}.0.0"
        elif minor:
            upper = f"0.{minor + 1}.0"
        else:
            upper = f"0.0.{patch + 1}"
""",
        """        upper = f"{major + 1}.0.0"
""",
    ),
    (
        "        return -1 if int(a) < int(b) else 1\n",
        "        return -1 if a < b else 1\n",
    ),
    (
        '    for alternative in constraint.split("||"):\n',
        '    for alternative in constraint.split("||")[:1]:\n',
    ),
)
"""Bugs planted in the vendored copy, one more per level."""


def _svl_buggy(core: str, level: int) -> str:
    """The vendored core (``environment/vendor/semverlite/core.py``) with the first
    ``level`` bugs planted."""
    text = core
    for good, bad in _SVL_BUGS[:level]:
        assert good in text, good
        text = text.replace(good, bad)
    return text


_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The picker of each language: ``solution/pick.<extension>`` (the reference) or
``solution/vendored_pick.<extension>`` (a front end to the fixed vendored library)."""

SV_OUT_DIRS = ("/app/out", "/app/pins", "/app/lock", "/app/deps")
SV_REQUIREMENTS = ("requirements.txt", "constraints.txt", "deps.txt", "wanted.txt")
SV_INDEXES = (
    "registry/index.txt",
    "registry/available.txt",
    "mirror/index.txt",
    "mirror/listing.txt",
)
SV_RESOLVED = ("resolved.txt", "pins.txt", "picked.txt")
SV_VERSIONS = ("versions.txt", "all_versions.txt", "by_package.txt")
SV_OUTDATED = ("outdated.txt", "behind.txt", "upgrades.txt")
SV_LOCKS = ("lock.json", "lockfile.json", "pinned.json")
SV_TOOLS = ("tools/resolve.py", "tools/pin_deps.py", "scripts/resolve.py")
SV_PROGRAMS = ("/app/pick", "/app/resolver", "/app/pinner", "/app/choose_versions")
SV_OPENERS = (
    "I need to pin our dependencies.",
    "Builds keep picking up whatever version is newest, so I want every dependency pinned to "
    "an exact version.",
    "We have to record exactly which version of each dependency goes into a build.",
    "Before the next release, I want our dependency versions chosen reproducibly from the "
    "constraints we declare.",
)
SV_TOOLING = ("Our release tooling", "Our build tooling", "The pinning script in this repo")
SV_ASKS = ("Please produce", "I need these files", "Write the following", "We need these outputs")


@register
class SemverPick(Family):
    """Resolve requirements against a package index with Semantic Versioning ranges; levels
    add caret/tilde ranges and version listings, prerelease rules and an outdated report,
    `||` alternatives, repeated requirements and a lockfile. With a vendored_package fixture
    the agent instead fixes the bugs of a vendored semver library (one more per level) and
    regenerates the tooling's outputs. Code asks for a picker program fuzzed on fresh
    indexes."""

    name = "software_engineering.semver_pick"
    domain = "software_engineering"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only", "vendored_package"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("inputs_untouched", (r"leave `(?P<req>/app/\w+\.txt)` and "
                                  r"`(?P<idx>/app/\w+/\w+\.txt)` as they are",),
             (r"def test_inputs_untouched\(", r'INDEX = sv_index\(Path\("{idx}"\)',
              r'REQUIREMENTS = Path\("{req}"\)')),
        Rule("resolved", (r"`(?P<out>/app/\w+)/(?P<res>\w+\.txt)`: for each required package, "
                          r".+? the highest version of the index satisfying its requirement, or "
                          r"`package NONE`",),
             (r"def test_resolved\(", r'read\("{out}/{res}"\) == expected')),
        Rule("numeric_precedence", (r"Versions are `MAJOR\.MINOR\.PATCH` compared numerically, "
                                    r"part by part",),
             (r"return -1 if x\[:3\] < y\[:3\] else 1",)),
        Rule("basic_comparators", (r"`>=V`, `<V` and `=V` \(a bare `V` means `=V`\); comparators "
                                   r"separated by spaces must all hold",),
             (r'op, target = match\.group\(1\) or "=", match\.group\(2\)',)),
        Rule("caret_tilde", (r"`\^V` allows changes that keep the first non-zero part",
                             r"`~V` allows patch changes"),
             (r'if op == "\^":', r'elif op == "~":'), levels=frozenset({2, 3, 4})),
        Rule("prerelease_order", (r"a prerelease `X\.Y\.Z-tag\.tag` ranks below `X\.Y\.Z`",),
             (r"if i\.isdigit\(\) and j\.isdigit\(\):",), levels=frozenset({3, 4})),
        Rule("prerelease_match", (r"a prerelease version \(with a `-tag`\) can only match a "
                                  r"range",),
             (r"if ok and level >= 3 and mine\[3\]:",), levels=frozenset({3, 4})),
        Rule("alternatives", (r"`\|\|` separates alternatives",),
             (r'for alternative in constraint\.split\("\|\|"\):',), levels=frozenset({4})),
        Rule("repeated_requirements", (r"A package may be listed more than once; then its version "
                                       r"must satisfy every line",),
             (r"wanted\.setdefault\(package, \[\]\)\.append",), levels=frozenset({4})),
        Rule("versions_file", (r"`(?P<out>/app/\w+)/(?P<ver>\w+\.txt)`: for every package of "
                               r"the index",),
             (r"def test_versions\(", r'read\("{out}/{ver}"\) == expected'),
             levels=frozenset({2, 3, 4})),
        Rule("outdated_file", (r"`(?P<out>/app/\w+)/(?P<old>\w+\.txt)`: `package RESOLVED "
                               r"LATEST`",),
             (r"def test_outdated\(", r'read\("{out}/{old}"\) == ""\.join\(rows\)'),
             levels=frozenset({3, 4})),
        Rule("lock_file", (r"`(?P<out>/app/\w+)/(?P<lock>\w+\.json)`: an object mapping each "
                           r"required package",),
             (r"def test_lock\(", r'json\.loads\(read\("{out}/{lock}"\)\)'),
             levels=frozenset({4})),
        Rule("fix_vendored_library", (r"Fix the library in place so that it follows its README",),
             (r"semverlite\.compare\(a, b\) == sv_cmp\(a, b\)",
              r"semverlite\.max_satisfying\(pool, \">=0\.0\.0\"\)"),
             when={"vendored": True}),
        Rule("patch_file", (r"`(?P<out>/app/\w+)/semverlite\.patch`: a unified diff of your "
                            r"changes",),
             (r'patch = read\("{out}/semverlite\.patch"\)',), when={"vendored": True}),
        Rule("program", (r"Our CI will call a picker program",),
             (r"def test_picker_on_fresh_indexes\(",), when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        vendored = ctx.fixture_kind == "vendored_package"
        out, req_file, index_file, res_file, ver_file, old_file, lock_file, tool = (
            rng.choice(options)
            for options in (
                SV_OUT_DIRS,
                SV_REQUIREMENTS,
                SV_INDEXES,
                SV_RESOLVED,
                SV_VERSIONS,
                SV_OUTDATED,
                SV_LOCKS,
                SV_TOOLS,
            )
        )
        stem, opener, tooling, ask = (
            rng.choice(options) for options in (SV_PROGRAMS, SV_OPENERS, SV_TOOLING, SV_ASKS)
        )
        index, requirements = sv_world(rng, level, {1: 4, 2: 6, 3: 8, 4: 10}[level])
        files: dict[str, str | bytes] = {
            index_file: sv_index_text(index, rng),
            req_file: "# package constraint\n" + "".join(f"{p} {c}\n" for p, c in requirements),
        }
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}
        folder = templates(__name__)
        names = {
            "out": out,
            "req_file": req_file,
            "index_file": index_file,
            "tool": tool,
            "res_file": res_file,
            "ver_file": ver_file,
            "old_file": old_file,
            "lock_file": lock_file,
        }
        core = folder.render("environment/vendor/semverlite/core.py")
        if vendored:
            vendor = "environment/vendor/semverlite"
            files.update(
                {
                    "vendor/semverlite/__init__.py": folder.render(f"{vendor}/__init__.py"),
                    "vendor/semverlite/core.py": _svl_buggy(core, level),
                    "vendor/semverlite/__main__.py": folder.render(f"{vendor}/__main__.py"),
                    "vendor/semverlite/README.md": folder.render(f"{vendor}/README.md"),
                    "vendor/semverlite/LICENSE": folder.render(f"{vendor}/LICENSE"),
                    tool: folder.render("environment/tools/resolve.py", level=level, **names),
                }
            )
        program = program_path(language, stem) if language else None
        if not language:
            source = folder.render("solution/pick.sh", level=level)
        elif vendored:
            source = folder.render(f"solution/vendored_pick.{_EXTENSIONS[language]}")
        else:
            source = folder.render(
                f"solution/pick.{_EXTENSIONS[language]}", level=level, functions=_SV_ORACLE
            )
        values = {
            **names,
            "level": level,
            "language": language,
            "vendored": vendored,
            "opener": opener,
            "tooling": tooling,
            "ask": ask,
            "program": program,
            "program_dir": program.rsplit("/", 1)[0] if program else None,
            "program_sentence": program_sentence(language, program) if language else None,
            "source": source.strip(),
            "core": core.strip(),
            "pick": invoke(language, program) if language else "bash /tmp/pick.sh",
        }
        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "vendored": vendored,
            "cases": {1: 5, 2: 8, 3: 12, 4: 16}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = folder.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            oracle=_SV_ORACLE,
            functions=function_sources(sv_constraint, sv_world, sv_index_text),
            settings=settings_lines(params),
            **names,
        )
        return Draft(
            instruction=folder.render("instruction.md", **values),
            # the steps are lines joined by newlines: none after the last
            solution=folder.render("solution/solve.sh", **values).rstrip("\n"),
            tests={"test_task.py": tests},
            files=files,
        )
