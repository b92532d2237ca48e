"""Semantic-version resolution with a vendored library to fix
(software_engineering.semver_pick)."""

from __future__ import annotations

import re

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    bullets,
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
from tmax.generate.families.software_engineering._shared import renamer
from tmax.generate.family import Draft, Family, RenderContext, register


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

_SV_PY = (
    """#!/usr/bin/env python3
\"\"\"Pick versions: `pick INDEX` reads `package constraint` lines on stdin and prints
`package version` (or `package NONE`); `pick --sort INDEX` lists each package's versions.\"\"\"
import re
import sys

LEVEL = @LEVEL@

"""
    + _SV_ORACLE
    + """


def main():
    if sys.argv[1] == "--sort":
        index = sv_index(open(sys.argv[2], encoding="utf-8").read())
        for package in sorted(index):
            print(package, " ".join(sv_sorted(index[package])))
        return
    index = sv_index(open(sys.argv[1], encoding="utf-8").read())
    for package, version in sv_resolve(index, sys.stdin.read(), LEVEL):
        print(package, version or "NONE")


if __name__ == "__main__":
    main()
"""
)

_SV_SH = r"""#!/bin/bash
# Pick versions: `pick INDEX` reads `package constraint` lines on stdin and prints
# `package version` (or `package NONE`); `pick --sort INDEX` lists each package's versions.
export LC_ALL=C
LEVEL=@LEVEL@
declare -A VERS=()

ident_cmp() {
  if [[ $1 == "$2" ]]; then R=0; return; fi
  local an=0 bn=0
  [[ $1 =~ ^[0-9]+$ ]] && an=1
  [[ $2 =~ ^[0-9]+$ ]] && bn=1
  if ((an && bn)); then
    if ((10#$1 < 10#$2)); then R=-1; else R=1; fi
  elif ((an)); then R=-1
  elif ((bn)); then R=1
  elif [[ $1 < $2 ]]; then R=-1
  else R=1
  fi
}

ver_cmp() {  # precedence of $1 against $2 in R (-1, 0, 1)
  local a=$1 b=$2 ap="" bp="" i IFS=.
  if [[ $a == *-* ]]; then ap=${a#*-}; a=${a%%-*}; fi
  if [[ $b == *-* ]]; then bp=${b#*-}; b=${b%%-*}; fi
  local -a x=($a) y=($b)
  for i in 0 1 2; do
    if ((10#${x[i]} != 10#${y[i]})); then
      if ((10#${x[i]} < 10#${y[i]})); then R=-1; else R=1; fi
      return
    fi
  done
  if [[ -z $ap && -z $bp ]]; then R=0; return; fi
  if [[ -z $ap ]]; then R=1; return; fi
  if [[ -z $bp ]]; then R=-1; return; fi
  x=($ap) y=($bp)
  for ((i = 0; i < ${#x[@]} && i < ${#y[@]}; i++)); do
    ident_cmp "${x[i]}" "${y[i]}"
    ((R != 0)) && return
  done
  if ((${#x[@]} < ${#y[@]})); then R=-1; elif ((${#x[@]} > ${#y[@]})); then R=1; else R=0; fi
}

satisfies() {  # version $1, constraint $2: exit status 0 when it matches
  local version=$1 rest="$2||" alt tok op target core major minor patch upper k ok
  local re='^(>=|<=|>|<|=|\^|~)?(.+)$'
  while [[ $rest == *"||"* ]]; do
    alt=${rest%%"||"*}
    rest=${rest#*"||"}
    local -a ops=() targets=()
    for tok in $alt; do
      [[ $tok =~ $re ]] || continue
      op=${BASH_REMATCH[1]:-=}
      target=${BASH_REMATCH[2]}
      core=${target%%-*}
      major=${core%%.*}; minor=${core#*.}; patch=${minor#*.}; minor=${minor%%.*}
      case $op in
        ^)
          if ((major)); then upper=$((major + 1)).0.0
          elif ((minor)); then upper=0.$((minor + 1)).0
          else upper=0.0.$((patch + 1))
          fi
          ops+=(">=" "<"); targets+=("$target" "$upper") ;;
        "~") ops+=(">=" "<"); targets+=("$target" "$major.$((minor + 1)).0") ;;
        *) ops+=("$op"); targets+=("$target") ;;
      esac
    done
    ((${#ops[@]})) || continue
    ok=1
    for k in "${!ops[@]}"; do
      ver_cmp "$version" "${targets[k]}"
      case ${ops[k]} in
        ">=") ((R >= 0)) || ok=0 ;;
        "<=") ((R <= 0)) || ok=0 ;;
        ">") ((R > 0)) || ok=0 ;;
        "<") ((R < 0)) || ok=0 ;;
        *) ((R == 0)) || ok=0 ;;
      esac
      ((ok)) || break
    done
    if ((ok && LEVEL >= 3)) && [[ $version == *-* ]]; then
      ok=0
      for target in "${targets[@]}"; do
        if [[ $target == *-* && ${target%%-*} == "${version%%-*}" ]]; then ok=1; fi
      done
    fi
    ((ok)) && return 0
  done
  return 1
}

load_index() {
  local package version rest
  while read -r package version rest || [[ -n $package ]]; do
    [[ -z $package || -z $version || $package == \#* ]] && continue
    VERS[$package]+="$version "
  done < "$1"
}

if [[ $1 == --sort ]]; then
  load_index "$2"
  for package in $(printf '%s\n' "${!VERS[@]}" | sort); do
    sorted=()
    for v in ${VERS[$package]}; do
      i=${#sorted[@]}
      sorted+=("$v")
      while ((i > 0)); do
        ver_cmp "${sorted[i - 1]}" "$v"
        ((R > 0)) || break
        sorted[i]=${sorted[i - 1]}
        i=$((i - 1))
      done
      sorted[i]=$v
    done
    echo "$package ${sorted[*]}"
  done
  exit 0
fi

load_index "$1"
declare -A CONS=()
order=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line#"${line%%[![:space:]]*}"}
  [[ -z $line || $line == \#* ]] && continue
  package=${line%% *}
  constraint=${line#"$package"}
  constraint=${constraint# }
  if [[ -z ${CONS[$package]+x} ]]; then order+=("$package"); CONS[$package]=""; fi
  CONS[$package]+="$constraint"$'\n'
done
for package in "${order[@]}"; do
  best=""
  for v in ${VERS[$package]-}; do
    good=1
    while IFS= read -r constraint; do
      [[ -z $constraint ]] && continue
      satisfies "$v" "$constraint" || { good=0; break; }
    done <<< "${CONS[$package]}"
    ((good)) || continue
    if [[ -z $best ]]; then best=$v; else ver_cmp "$v" "$best"; ((R > 0)) && best=$v; fi
  done
  echo "$package ${best:-NONE}"
done
"""


_SVL_CORE = '''"""Core of semverlite: parse, compare and match semantic versions."""

import functools
import re

_TESTS = {
    ">=": lambda c: c >= 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    "<": lambda c: c < 0,
    "=": lambda c: c == 0,
}
_COMPARATOR = re.compile(r"(>=|<=|>|<|=|\\^|~)?(.+)$")


def parse(text):
    """(major, minor, patch, prerelease identifiers) of a version string."""
    core, _, pre = text.strip().partition("-")
    major, minor, patch = core.split(".")
    return int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ()


def _identifier(a, b):
    if a == b:
        return 0
    if a.isdigit() and b.isdigit():
        return -1 if int(a) < int(b) else 1
    if a.isdigit() or b.isdigit():
        return -1 if a.isdigit() else 1
    return -1 if a < b else 1


def compare(a, b):
    """-1, 0 or 1: the precedence of version a against version b."""
    x, y = parse(a), parse(b)
    if x[:3] != y[:3]:
        return -1 if x[:3] < y[:3] else 1
    if not x[3] or not y[3]:
        return (not x[3]) - (not y[3])
    for i, j in zip(x[3], y[3]):
        order = _identifier(i, j)
        if order:
            return order
    return (len(x[3]) > len(y[3])) - (len(x[3]) < len(y[3]))


def _expand(token):
    op, target = _COMPARATOR.match(token).groups()
    op = op or "="
    major, minor, patch, _ = parse(target)
    if op == "^":
        if major:
            upper = f"{major + 1}.0.0"
        elif minor:
            upper = f"0.{minor + 1}.0"
        else:
            upper = f"0.0.{patch + 1}"
        return [(">=", target), ("<", upper)]
    if op == "~":
        return [(">=", target), ("<", f"{major}.{minor + 1}.0")]
    return [(op, target)]


def satisfies(version, constraint):
    """Whether version matches a range like '>=1.2.0 <2.0.0 || ^3.1.0'."""
    mine = parse(version)
    for alternative in constraint.split("||"):
        comparators = [c for token in alternative.split() for c in _expand(token)]
        if not comparators:
            continue
        if not all(_TESTS[op](compare(version, target)) for op, target in comparators):
            continue
        if mine[3] and not any(
            parse(t)[3] and parse(t)[:3] == mine[:3] for _, t in comparators
        ):
            continue
        return True
    return False


def max_satisfying(versions, constraints):
    """The highest version matching every constraint (a string or a list), or None."""
    if isinstance(constraints, str):
        constraints = [constraints]
    best = None
    for version in versions:
        if all(satisfies(version, c) for c in constraints):
            if best is None or compare(version, best) > 0:
                best = version
    return best


def sort_versions(versions):
    return sorted(versions, key=functools.cmp_to_key(compare))
'''

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

_SVL_INIT = '''"""semverlite: small semantic-versioning helpers (vendored copy, 0.9.2)."""

from .core import compare, max_satisfying, parse, satisfies, sort_versions

__all__ = ["compare", "max_satisfying", "parse", "satisfies", "sort_versions"]
__version__ = "0.9.2"
'''

_SVL_MAIN = '''"""Command line: python3 -m semverlite pick INDEX < requirements, or sort INDEX."""

import sys

from . import max_satisfying, sort_versions


def _index(path):
    index = {}
    for line in open(path, encoding="utf-8"):
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#"):
            index.setdefault(parts[0], []).append(parts[1])
    return index


def main(argv):
    command, path = argv[1], argv[2]
    index = _index(path)
    if command == "sort":
        for package in sorted(index):
            print(package, " ".join(sort_versions(index[package])))
        return 0
    wanted = {}
    for line in sys.stdin:
        line = line.strip()
        if line and not line.startswith("#"):
            package, _, constraint = line.partition(" ")
            wanted.setdefault(package, []).append(constraint.strip())
    for package, constraints in wanted.items():
        print(package, max_satisfying(index.get(package, []), constraints) or "NONE")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''

_SVL_README = """# semverlite 0.9.2

Tiny helpers for semantic versions, vendored from upstream without changes.

    from semverlite import compare, satisfies, max_satisfying, sort_versions
    satisfies("1.4.2", "^1.2.0")                       # True
    max_satisfying(["1.0.0", "1.9.3"], ">=1.0.0 <2.0.0")  # '1.9.3'

Ranges: `>= <= > < =` (or a bare version), `^` (compatible), `~` (patch-level),
space-separated comparators must all hold, `||` separates alternatives. A prerelease
version only matches a range that mentions a prerelease of the same major.minor.patch.

Command line: `python3 -m semverlite pick INDEX < requirements`,
`python3 -m semverlite sort INDEX`.
"""

_SVL_LICENSE = """Copyright (c) the semverlite authors

Permission is granted to use, copy, modify and distribute this software for any purpose,
with or without fee, provided this notice is kept. The software is provided "as is",
without warranty of any kind.
"""

_SVL_TOOL = '''#!/usr/bin/env python3
"""Release tooling: resolve /app/requirements.txt against the registry index."""
import json
import os
import sys

sys.path.insert(0, "/app/vendor")
from semverlite import compare, max_satisfying, sort_versions  # noqa: E402

LEVEL = @LEVEL@
index = {}
for line in open("/app/registry/index.txt"):
    parts = line.split()
    if len(parts) >= 2 and not parts[0].startswith("#"):
        index.setdefault(parts[0], []).append(parts[1])
wanted = {}
for line in open("/app/requirements.txt"):
    line = line.strip()
    if line and not line.startswith("#"):
        package, _, constraint = line.partition(" ")
        wanted.setdefault(package, []).append(constraint.strip())
resolved = {p: max_satisfying(index.get(p, []), cs) for p, cs in wanted.items()}
os.makedirs("/app/out", exist_ok=True)
with open("/app/out/resolved.txt", "w") as out:
    for package, version in resolved.items():
        out.write(f"{package} {version or 'NONE'}\\n")
if LEVEL >= 2:
    with open("/app/out/versions.txt", "w") as out:
        for package in sorted(index):
            out.write(package + " " + " ".join(sort_versions(index[package])) + "\\n")
if LEVEL >= 3:
    with open("/app/out/outdated.txt", "w") as out:
        for package, version in resolved.items():
            stable = [v for v in index.get(package, []) if "-" not in v]
            if version and stable:
                latest = sort_versions(stable)[-1]
                if compare(version, latest) < 0:
                    out.write(f"{package} {version} {latest}\\n")
if LEVEL >= 4:
    with open("/app/out/lock.json", "w") as out:
        json.dump(resolved, out, indent=2)
'''


def _svl_buggy(level: int) -> str:
    text = _SVL_CORE
    for good, bad in _SVL_BUGS[:level]:
        assert good in text, good
        text = text.replace(good, bad)
    return text


_SVL_PICK_PY = '''#!/usr/bin/env python3
"""Pick versions with the vendored semverlite: `pick INDEX` reads requirements on stdin."""
import sys

sys.path.insert(0, "/app/vendor")
from semverlite.__main__ import main  # noqa: E402

sys.exit(main([sys.argv[0], "pick", sys.argv[1]]))
'''

_SVL_PICK_SH = """#!/bin/bash
# Pick versions with the vendored semverlite: `pick INDEX` reads requirements on stdin.
PYTHONPATH=/app/vendor exec python3 -m semverlite pick "$1"
"""


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
        # the instruction, reference steps, tool and tests are written for the default names
        named = renamer(
            {
                "/app/out": out,
                "/app/requirements.txt": f"/app/{req_file}",
                "/app/registry/index.txt": f"/app/{index_file}",
                "/app/tools/resolve.py": f"/app/{tool}",
                "resolved.txt": res_file,
                "versions.txt": ver_file,
                "outdated.txt": old_file,
                "lock.json": lock_file,
            }
        )
        index, requirements = sv_world(rng, level, {1: 4, 2: 6, 3: 8, 4: 10}[level])
        files: dict[str, str | bytes] = {
            index_file: sv_index_text(index, rng),
            req_file: "# package constraint\n" + "".join(f"{p} {c}\n" for p, c in requirements),
        }
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}
        if vendored:
            files.update(
                {
                    "vendor/semverlite/__init__.py": _SVL_INIT,
                    "vendor/semverlite/core.py": _svl_buggy(level),
                    "vendor/semverlite/__main__.py": _SVL_MAIN,
                    "vendor/semverlite/README.md": _SVL_README,
                    "vendor/semverlite/LICENSE": _SVL_LICENSE,
                    tool: named(_SVL_TOOL.replace("@LEVEL@", str(level))),
                }
            )

        ranges = [
            "`>=V`, `<V` and `=V` (a bare `V` means `=V`); comparators separated by spaces "
            "must all hold"
        ]
        if level >= 2:
            ranges.append(
                "`>V`, `<=V`; `^V` allows changes that keep the first non-zero part of "
                "MAJOR.MINOR.PATCH (`^1.2.3` is `>=1.2.3 <2.0.0`, `^0.2.3` is `>=0.2.3 <0.3.0`, "
                "`^0.0.3` is `>=0.0.3 <0.0.4`); `~V` allows patch changes (`~1.2.3` is "
                "`>=1.2.3 <1.3.0`)"
            )
        if level >= 3:
            ranges.append(
                "a prerelease version (with a `-tag`) can only match a range in which some "
                "comparator names a prerelease of the same MAJOR.MINOR.PATCH"
            )
        if level >= 4:
            ranges.append("`||` separates alternatives; a version matching any of them matches")
        precedence = "Versions are `MAJOR.MINOR.PATCH` compared numerically, part by part" + (
            "; a prerelease `X.Y.Z-tag.tag` ranks below `X.Y.Z`, and two prereleases of the "
            "same version compare tag by tag: two numbers numerically, a number below a "
            "word, two words in ASCII order, and a shorter list first when the other one "
            "starts with it."
            if level >= 3
            else "."
        )
        repeat = (
            " A package may be listed more than once; then its version must satisfy every line."
            if level >= 4
            else ""
        )
        deliverables = [
            "`/app/out/resolved.txt`: for each required package, in the order of first "
            "appearance, `package VERSION` with the highest version of the index satisfying its "
            "requirement, or `package NONE`."
        ]
        if level >= 2:
            deliverables.append(
                "`/app/out/versions.txt`: for every package of the index (sorted by name), "
                "`package v1 v2 ...` with its versions from lowest to highest precedence."
            )
        if level >= 3:
            deliverables.append(
                "`/app/out/outdated.txt`: `package RESOLVED LATEST` for each required package "
                "whose resolved version ranks below LATEST, its highest version without a "
                "prerelease tag (requirement order; skip NONE)."
            )
        if level >= 4:
            deliverables.append(
                "`/app/out/lock.json`: an object mapping each required package to its resolved "
                "version, or null."
            )
        keep = "leave `/app/requirements.txt` and `/app/registry/index.txt` as they are"
        if vendored:
            deliverables.append(
                "`/app/out/semverlite.patch`: a unified diff of your changes to the vendored "
                "library, so we can send it upstream."
            )
            body = [
                f"{tooling} resolves `/app/requirements.txt` (`package constraint` "
                "lines) against the registry listing `/app/registry/index.txt` (`package "
                "version` lines), using a vendored copy of the semverlite library in "
                "`/app/vendor/semverlite` (see its README). The tool, `/app/tools/resolve.py`, "
                "gives wrong answers, and we traced it to the vendored library. Fix the "
                "library in place so that it follows its README and Semantic Versioning; keep "
                "its API (`parse`, `compare`, `satisfies`, `max_satisfying`, `sort_versions`) "
                "since other scripts import it. There may be more than one bug." + repeat,
                "What the library must implement: " + precedence + " Ranges:\n" + bullets(ranges),
                f"Then give me the tool's outputs, computed correctly ({keep}):\n"
                + numbered(deliverables),
            ]
        else:
            body = [
                f"{opener} `/app/requirements.txt` has `package "
                "constraint` lines and `/app/registry/index.txt` lists what the registry has "
                f"(`package version` lines, in no order).{repeat}",
                precedence + " Constraints:\n" + bullets(ranges),
                f"{ask} ({keep}):\n" + numbered(deliverables),
            ]
        program = None
        if language:
            program = program_path(language, stem)
            body.append(
                "Our CI will call a picker program: given the path of an index file as its "
                "argument, it reads requirement lines from standard input and prints the "
                "resolved.txt lines for them to standard output. "
                + program_sentence(language, program)
                + " It will be checked against our reference on indexes it has not seen."
            )
        instruction = named("\n\n".join(body))

        steps = ["mkdir -p /app/out"]
        if level >= 3:
            steps += ["head -n 5 /app/registry/index.txt", "cat /app/requirements.txt"]
        checks = [
            ('s.compare("1.2.10", "1.2.9") == 1', 1),
            ('s.satisfies("0.2.5", "^0.2.3") and not s.satisfies("0.3.0", "^0.2.3")', 2),
            ('s.compare("1.0.0-rc.10", "1.0.0-rc.9") == 1', 3),
            ('s.satisfies("3.1.0", "^1.0.0 || ^3.0.0")', 4),
        ]
        if vendored:
            steps += [
                "ls -R /app/vendor",
                "cat /app/vendor/semverlite/README.md",
                "cp /app/vendor/semverlite/core.py /tmp/core.py.orig",
                heredoc("/app/vendor/semverlite/core.py", _SVL_CORE),
            ]
            for check, needed in checks:
                if level >= needed:
                    steps.append(
                        "PYTHONPATH=/app/vendor python3 -c 'import semverlite as s; "
                        f"assert {check}'"
                    )
            steps += [
                "diff -u --label a/semverlite/core.py --label b/semverlite/core.py"
                " /tmp/core.py.orig /app/vendor/semverlite/core.py > /app/out/semverlite.patch"
                " || true",
                "python3 /app/tools/resolve.py",
                "cat /app/out/resolved.txt",
            ]
            if language:
                source = _SVL_PICK_PY if language == "python" else _SVL_PICK_SH
                steps.append(program_step(language, program, source))
                steps.append(
                    f"diff <({invoke(language, program)} /app/registry/index.txt"
                    " < /app/requirements.txt) /app/out/resolved.txt"
                )
        else:
            if language:
                source = {"python": _SV_PY, "bash": _SV_SH}[language]
                steps.append(program_step(language, program, source.replace("@LEVEL@", str(level))))
                pick = invoke(language, program)
            else:
                steps.append(heredoc("/tmp/pick.sh", _SV_SH.replace("@LEVEL@", str(level))))
                pick = "bash /tmp/pick.sh"
            steps += [
                "printf 'a 1.2.9\\na 1.2.10\\na 2.0.0\\n' > /tmp/smoke_index.txt",
                f"test \"$(echo 'a <2.0.0' | {pick} /tmp/smoke_index.txt)\" = 'a 1.2.10'",
                f"{pick} /app/registry/index.txt < /app/requirements.txt > /app/out/resolved.txt",
            ]
            if level >= 2:
                steps.append(f"{pick} --sort /app/registry/index.txt > /app/out/versions.txt")
            if level >= 3:
                steps.append(
                    'awk \'NR == FNR {for (i = 2; i <= NF; i++) {pos[$1 " " $i] = i;'
                    " if ($i !~ /-/) latest[$1] = $i} next}"
                    ' $2 != "NONE" && ($1 in latest) && pos[$1 " " $2] < pos[$1 " "'
                    " latest[$1]] {print $1, $2, latest[$1]}' /app/out/versions.txt"
                    " /app/out/resolved.txt > /app/out/outdated.txt"
                )
            if level >= 4:
                steps.append(
                    'awk \'BEGIN {printf "{"} {printf "%s\\"%s\\": %s", (NR > 1 ? ", " :'
                    ' ""), $1, ($2 == "NONE" ? "null" : "\\"" $2 "\\"")}'
                    ' END {print "}"}\' /app/out/resolved.txt > /app/out/lock.json'
                )
                steps.append("python3 -m json.tool /app/out/lock.json")
                steps.append("grep -c ' NONE$' /app/out/resolved.txt || true")
        solution = named("\n".join(s for s in steps if s))

        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "vendored": vendored,
            "cases": {1: 5, 2: 8, 3: 12, 4: 16}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + _SV_ORACLE
            + "\n\n"
            + function_sources(sv_constraint, sv_world, sv_index_text)
            + "\n\n"
            + settings_lines(params)
            + named(_SV_TESTS)
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_SV_TESTS = """
import sys

LEVEL = CFG["level"]
INDEX = sv_index(Path("/app/registry/index.txt").read_text())
REQUIREMENTS = Path("/app/requirements.txt").read_text()
RESOLVED = sv_resolve(INDEX, REQUIREMENTS, LEVEL)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_resolved():
    expected = "".join(f"{p} {v or 'NONE'}\\n" for p, v in RESOLVED)
    assert read("/app/out/resolved.txt") == expected, "resolved.txt is wrong"


def test_versions():
    if CFG["level"] >= 2:
        expected = "".join(f"{p} {' '.join(sv_sorted(INDEX[p]))}\\n" for p in sorted(INDEX))
        assert read("/app/out/versions.txt") == expected, "versions.txt is wrong"


def test_outdated():
    if CFG["level"] >= 3:
        rows = []
        for package, version in RESOLVED:
            stable = [v for v in INDEX.get(package, []) if "-" not in v]
            if version and stable:
                latest = sv_sorted(stable)[-1]
                if sv_cmp(version, latest) < 0:
                    rows.append(f"{package} {version} {latest}\\n")
        assert read("/app/out/outdated.txt") == "".join(rows), "outdated.txt is wrong"


def test_lock():
    if CFG["level"] >= 4:
        assert json.loads(read("/app/out/lock.json")) == dict(RESOLVED), "lock.json is wrong"


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
    patch = read("/app/out/semverlite.patch")
    assert "core.py" in patch and "\\n+" in patch, "semverlite.patch does not show the fix"


def test_picker_on_fresh_indexes(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1729)
    for case in range(CFG["cases"]):
        index, requirements = sv_world(rng, LEVEL, rng.randint(2, 8))
        path = tmp_path / f"index{case}.txt"
        path.write_text(sv_index_text(index, rng))
        text = "".join(f"{p} {c}\\n" for p, c in requirements)
        done = run([path], stdin=text)
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]}"
        want = "".join(
            f"{p} {v or 'NONE'}\\n" for p, v in sv_resolve(sv_index(path.read_text()), text, LEVEL)
        )
        assert done.stdout == want, (
            f"case {case}: requirements\\n{text}--- got\\n{done.stdout}--- expected\\n{want}"
        )
"""
