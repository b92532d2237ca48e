"""Core of semverlite: parse, compare and match semantic versions."""

import functools
import re

_TESTS = {
    ">=": lambda c: c >= 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    "<": lambda c: c < 0,
    "=": lambda c: c == 0,
}
_COMPARATOR = re.compile(r"(>=|<=|>|<|=|\^|~)?(.+)$")


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
