"""Grade one SWE-bench instance inside its sandbox: read the test log, check the tests.

Shipped into every converted SWE-bench task as ``tests/swe_bench_grade.py`` and run by
``tests/test.sh`` once the repository's tests have run::

    python3 swe_bench_grade.py tests.json test-output.log

``tests.json`` names the log format (``parser``) and the two lists of test ids of the
instance. An instance is resolved when every FAIL_TO_PASS and every PASS_TO_PASS test
is reported as passed (or as an expected failure); a test missing from the log counts
as failed. Exit status 0 means resolved, 1 not resolved, 2 a usage error.

The log formats follow the SWE-bench harness's parsers, so a test id in the dataset
means the same here as there. The script runs under the image's Python, which may be
as old as 3.6: it uses the standard library only and no newer syntax.
"""

import json
import re
import sys

PASSED = "PASSED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
ERROR = "ERROR"
XFAIL = "XFAIL"
STATUSES = (FAILED, PASSED, SKIPPED, ERROR, XFAIL)
COUNTS_AS_PASSED = (PASSED, XFAIL)

_COLOUR = re.compile(r"\x1b?\[\d+m")
_CONTROL = {code: None for code in range(1, 32)}
_PARAMETRISED = re.compile(r"(.*?)\[(.*)\]")


def _starts_with_status(line: str) -> bool:
    return any(line.startswith(status) for status in STATUSES)


def _status_first(line: str) -> "tuple | None":
    """``STATUS test_id [- message]`` as (test_id, status), else None."""
    if not _starts_with_status(line):
        return None
    if line.startswith(FAILED):
        line = line.replace(" - ", " ")  # "FAILED a::b - AssertionError" names a::b
    fields = line.split()
    if len(fields) < 2:
        return None
    return fields[1], fields[0]


def parse_pytest(log: str) -> dict:
    """pytest ``-rA`` summary lines: ``PASSED tests/test_x.py::test_y``."""
    statuses = {}
    for line in log.splitlines():
        found = _status_first(line)
        if found:
            statuses[found[0]] = found[1]
    return statuses


def parse_pytest_options(log: str) -> dict:
    """pytest, where a parameter that is a path is shortened to its last component
    (``test_x[/tmp/abc/data.txt]`` is recorded as ``test_x[/data.txt]``)."""
    statuses = {}
    for line in log.splitlines():
        found = _status_first(line)
        if not found:
            continue
        test, status = found
        parametrised = _PARAMETRISED.search(test)
        if parametrised:
            name, option = parametrised.groups()
            if option.startswith("/") and not option.startswith("//") and "*" not in option:
                option = "/" + option.split("/")[-1]
            test = f"{name}[{option}]"
        statuses[test] = status
    return statuses


def parse_pytest_v2(log: str) -> dict:
    """pytest with colour codes removed, and also the verbose form where the status
    comes last (``tests/test_x.py::test_y PASSED``)."""
    statuses = {}
    for raw in log.splitlines():
        line = _COLOUR.sub("", raw).translate(_CONTROL)
        found = _status_first(line)
        if found:
            statuses[found[0]] = found[1]
        elif any(line.endswith(status) for status in STATUSES):
            fields = line.split()
            if len(fields) >= 2:
                statuses[fields[0]] = fields[1]
    return statuses


def parse_matplotlib(log: str) -> dict:
    """pytest, with mouse-button enum names written as the numbers the ids use."""
    log = log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
    return parse_pytest(log)


def parse_seaborn(log: str) -> dict:
    """pytest as seaborn's suite prints it (status first, or ``test PASSED ...``)."""
    statuses = {}
    for line in log.splitlines():
        fields = line.split()
        if line.startswith(FAILED) and len(fields) > 1:
            statuses[fields[1]] = FAILED
        elif " " + PASSED + " " in line and len(fields) > 1 and fields[1] == PASSED:
            statuses[fields[0]] = PASSED
        elif line.startswith(PASSED) and len(fields) > 1:
            statuses[fields[1]] = PASSED
    return statuses


_DJANGO_PASS_ENDINGS = (" ... ok", " ... OK", " ...  OK")
# Django's runner sometimes prints a stray message between "..." and "ok".
_DJANGO_INTERRUPTED = (
    r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
)


def parse_django(log: str) -> dict:
    """Django's ``runtests.py --verbosity 2``: ``test_x (app.tests.T) ... ok``."""
    statuses = {}
    previous = None
    for raw in log.splitlines():
        line = raw.strip()
        if "--version is equivalent to version" in line:
            statuses["--version is equivalent to version"] = PASSED
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for ending in _DJANGO_PASS_ENDINGS:
            if line.endswith(ending):
                # One test's name is glued to a migration message (django__django-7188).
                if line.startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()
                statuses[line.rsplit(ending, 1)[0]] = PASSED
                break
        if " ... skipped" in line:
            statuses[line.split(" ... skipped")[0]] = SKIPPED
        if line.endswith(" ... FAIL"):
            statuses[line.split(" ... FAIL")[0]] = FAILED
        if line.startswith("FAIL:") and len(line.split()) > 1:
            statuses[line.split()[1].strip()] = FAILED
        if line.endswith(" ... ERROR"):
            statuses[line.split(" ... ERROR")[0]] = ERROR
        if line.startswith("ERROR:") and len(line.split()) > 1:
            statuses[line.split()[1].strip()] = ERROR
        if line.startswith("ok") and previous is not None:
            statuses[previous] = PASSED  # the "ok" came on a line of its own
    for pattern in _DJANGO_INTERRUPTED:
        for match in re.finditer(pattern, log, re.MULTILINE):
            statuses[match.group(1)] = PASSED
    return statuses


_SYMPY_FILE_VERDICT = re.compile(r"\s+\[(OK|FAIL)\]\s*$")


def parse_sympy(log: str) -> dict:
    """SymPy's ``bin/test -C --verbose``: ``test_name ok``, ``test_name F`` or ``E``;
    a ``___ path.py:test_name ___`` traceback header also marks a failure."""
    statuses = {}
    for match in re.findall(r"(_*) (.*)\.py:(.*) (_*)", log):
        statuses[f"{match[1]}.py:{match[2]}"] = FAILED
    for raw in log.splitlines():
        # The last test of a file carries the file's verdict too: "test_x ok   [OK]".
        line = _SYMPY_FILE_VERDICT.sub("", raw).strip()
        if not line.startswith("test_"):
            continue
        name = line.split()[0]
        if line.endswith(" E"):
            statuses[name] = ERROR
        if line.endswith(" F"):
            statuses[name] = FAILED
        if line.endswith(" ok"):
            statuses[name] = PASSED
    return statuses


PARSERS = {
    "django": parse_django,
    "matplotlib": parse_matplotlib,
    "pytest": parse_pytest,
    "pytest_options": parse_pytest_options,
    "pytest_v2": parse_pytest_v2,
    "seaborn": parse_seaborn,
    "sympy": parse_sympy,
}


def grade(spec: dict, log: str) -> "tuple[bool, list]":
    """Whether every listed test passed, and the ids of those that did not."""
    statuses = PARSERS[spec["parser"]](log)
    wanted = list(spec.get("fail_to_pass", [])) + list(spec.get("pass_to_pass", []))
    failing = [test for test in wanted if statuses.get(test) not in COUNTS_AS_PASSED]
    return not failing, failing


def main(argv: list) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: swe_bench_grade.py TESTS_JSON TEST_LOG\n")
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    if spec.get("parser") not in PARSERS:
        sys.stderr.write(f"unknown parser {spec.get('parser')!r}\n")
        return 2
    with open(argv[2], encoding="utf-8", errors="replace") as handle:
        log = handle.read()
    resolved, failing = grade(spec, log)
    total = len(spec.get("fail_to_pass", [])) + len(spec.get("pass_to_pass", []))
    print(f"{total - len(failing)}/{total} listed tests passed")
    for test in failing:
        print("not passed: " + test)
    print("RESOLVED" if resolved else "NOT RESOLVED")
    return 0 if resolved else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
