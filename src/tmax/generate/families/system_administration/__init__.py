"""Task families of the system_administration domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    bullets,
    heredoc,
    language_or_bash,
    manifest_line,
    manifest_test_file,
    program_path,
)

# the families register in the order of their classes in the module they came from
# isort: off
from tmax.generate.families.system_administration.auth_failures import AuthFailures  # noqa: F401
from tmax.generate.families.system_administration.health_service import HealthService  # noqa: F401

# isort: on
from tmax.generate.family import Draft, Family, RenderContext, register

# --- cron_lint ---------------------------------------------------------------------------

_CRON_ORACLE = r'''
import re

_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_NAMES = [None, None, None,
          {m: i + 1 for i, m in enumerate(_MONTHS)},
          {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}]
_MACROS = {"@reboot", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually"}


def _value(token, index, level):
    if re.fullmatch(r"[0-9]+", token):
        number = int(token)
    elif level >= 2 and _NAMES[index] and token.lower() in _NAMES[index]:
        number = _NAMES[index][token.lower()]
    else:
        return None
    lo, hi = _RANGES[index]
    return number if lo <= number <= hi else None


def _field_ok(field, index, level):
    for item in field.split(","):
        base, slash, step = item.partition("/")
        if slash and not (re.fullmatch(r"[0-9]+", step) and int(step) >= 1):
            return False
        if base == "*":
            continue
        a, dash, b = base.partition("-")
        first = _value(a, index, level)
        if first is None:
            return False
        if dash:
            last = _value(b, index, level)
            if last is None or last < first:
                return False
        elif slash:
            return False
    return True


def cron_line_state(line, level):
    """'skip' for blank/comment lines, else 'ok' or 'bad'."""
    text = line.strip()
    if not text or text.startswith("#"):
        return "skip"
    if level >= 4 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", text):
        return "ok"
    parts = text.split(None, 5)
    if level >= 3 and parts[0].startswith("@"):
        return "ok" if parts[0] in _MACROS and len(parts) >= 2 else "bad"
    if len(parts) < 6:
        return "bad"
    return "ok" if all(_field_ok(parts[i], i, level) for i in range(5)) else "bad"


def invalid_lines(text, level):
    return [n for n, line in enumerate(text.split("\n"), 1)
            if cron_line_state(line, level) == "bad"]
'''

_CRON_PY = r"""
import sys

LEVEL = @LEVEL@

if __name__ == "__main__":
    with open(sys.argv[1]) as handle:
        for number in invalid_lines(handle.read(), LEVEL):
            print(number)
"""

_CRON_BASH = r"""
#!/bin/bash
# Usage: cronlint.sh CRONTAB -> line numbers of invalid entries, one per line
set -euo pipefail
LC_ALL=C awk -v L=@LEVEL@ '
BEGIN { lo[1] = 0; hi[1] = 59; lo[2] = 0; hi[2] = 23; lo[3] = 1; hi[3] = 31
  lo[4] = 1; hi[4] = 12; lo[5] = 0; hi[5] = 7
  split("jan feb mar apr may jun jul aug sep oct nov dec", m, " ")
  for (i = 1; i <= 12; i++) name[4, m[i]] = i
  split("sun mon tue wed thu fri sat", d, " ")
  for (i = 1; i <= 7; i++) name[5, d[i]] = i - 1
  split("@reboot @hourly @daily @weekly @monthly @yearly @annually", mm, " ")
  for (i in mm) macro[mm[i]] = 1 }
function val(t, k,   v) {
  if (t ~ /^[0-9]+$/) v = t + 0
  else if (L >= 2 && ((k, tolower(t)) in name)) v = name[k, tolower(t)]
  else return -1
  return (v >= lo[k] && v <= hi[k]) ? v : -1 }
function field_ok(f, k,   items, n, i, it, base, step, s, a, b, p, q) {
  n = split(f, items, ",")
  if (n == 0) return 0
  for (i = 1; i <= n; i++) {
    it = items[i]; s = index(it, "/"); base = it; step = ""
    if (s) { base = substr(it, 1, s - 1); step = substr(it, s + 1)
      if (step !~ /^[0-9]+$/ || step + 0 < 1) return 0 }
    if (base == "*") continue
    p = index(base, "-")
    if (p) { a = val(substr(base, 1, p - 1), k); b = val(substr(base, p + 1), k)
      if (a < 0 || b < 0 || b < a) return 0 }
    else { if (val(base, k) < 0 || s) return 0 } }
  return 1 }
{ line = $0; sub(/^[ \t]+/, "", line); sub(/[ \t\r\n\f\v]+$/, "", line)
  if (line == "" || line ~ /^#/) next
  if (L >= 4 && line ~ /^[A-Za-z_][A-Za-z0-9_]*=/) next
  if (L >= 3 && $1 ~ /^@/) { if (!($1 in macro) || NF < 2) print NR; next }
  if (NF < 6) { print NR; next }
  for (k = 1; k <= 5; k++) if (!field_ok($k, k)) { print NR; next } }' "$1"
"""

_CRON_TESTS = r"""

def clean_entry(rng, level):
    if level >= 3 and rng.random() < 0.15:
        return rng.choice(["@daily", "@reboot", "@weekly", "@annually"]) + " /usr/local/bin/job.sh"
    if level >= 4 and rng.random() < 0.1:
        return rng.choice(["MAILTO=ops@example.com", "PATH=/usr/bin:/bin", "SHELL=/bin/bash"])
    fields = []
    for k, (lo, hi) in enumerate([(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]):
        kind = rng.random()
        if kind < 0.3:
            fields.append("*")
        elif kind < 0.45:
            fields.append(f"*/{rng.randint(1, 15)}")
        elif kind < 0.6:
            a = rng.randint(lo, hi)
            fields.append(f"{a}-{rng.randint(a, hi)}" + rng.choice(["", f"/{rng.randint(1, 5)}"]))
        elif kind < 0.75:
            fields.append(",".join(str(rng.randint(lo, hi)) for _ in range(rng.randint(2, 4))))
        elif level >= 2 and k == 3:
            fields.append(rng.choice(["jan", "MAR", "Dec", "jun-aug"]))
        elif level >= 2 and k == 4:
            fields.append(rng.choice(["mon", "Fri", "mon-fri", "sun,sat"]))
        else:
            fields.append(str(rng.randint(lo, hi)))
    sep = rng.choice([" ", "\t", "  "])
    return sep.join(fields) + sep + rng.choice(["/opt/backup.sh --full", "echo hi > /dev/null",
                                                  "run-parts /etc/cron.hourly"])


def evil_entry(rng, level):
    good = clean_entry(rng, 1).split()
    while len(good) < 6:
        good = clean_entry(rng, 1).split()
    bad = [
        lambda: good[:4],
        lambda: ["60"] + good[1:],
        lambda: good[:1] + ["24"] + good[2:],
        lambda: good[:2] + ["0"] + good[3:],
        lambda: good[:3] + ["13"] + good[4:],
        lambda: good[:4] + ["8"] + good[5:],
        lambda: ["*/0"] + good[1:],
        lambda: ["5-2"] + good[1:],
        lambda: ["1,,2"] + good[1:],
        lambda: ["abc"] + good[1:],
        lambda: ["-1"] + good[1:],
        lambda: ["*/"] + good[1:],
        lambda: ["5/2"] + good[1:],
        lambda: ["jan"] + good[1:],
        lambda: good[:5],
        lambda: good[:3] + ["1-"] + good[4:],
        lambda: good[:3] + ["7-3"] + good[4:],
    ]
    if level < 2:
        bad.append(lambda: good[:3] + ["jan"] + good[4:])
        bad.append(lambda: good[:4] + ["mon"] + good[5:])
    else:
        bad.append(lambda: good[:4] + ["monday"] + good[5:])
        bad.append(lambda: good[:3] + ["janfeb"] + good[4:])
    if level < 3:
        bad.append(lambda: ["@daily", "/bin/job"])
    else:
        bad.append(lambda: ["@hourlyy", "/bin/job"])
        bad.append(lambda: ["@daily"])
    if level < 4:
        bad.append(lambda: ["MAILTO=root"])
    else:
        bad.append(lambda: ["1X=3"])
    line = " ".join(rng.choice(bad)())
    assert cron_line_state(line, level) == "bad", line
    return line


def test_invalid_report():
    if not CFG["files_out"]:
        return
    want = [f"{os.path.basename(p)}:{n}" for p in CFG["tabs"]
            for n in invalid_lines(read(p), CFG["level"])]
    got = [l for l in read("/app/out/invalid.txt").split("\n") if l.strip()]
    assert got == want, f"invalid.txt should be {want}, got {got}"
    if CFG["level"] >= 2:
        rows = []
        for p in CFG["tabs"]:
            states = [cron_line_state(l, CFG["level"]) for l in read(p).split("\n")]
            rows.append(f"{os.path.basename(p)} {states.count('ok')} {states.count('bad')}")
        got = [l for l in read("/app/out/counts.txt").split("\n") if l.strip()]
        assert got == rows, f"counts.txt should be {rows}, got {got}"
    if CFG["level"] >= 3:
        for p in CFG["tabs"]:
            text = read(p)
            bad = set(invalid_lines(text, CFG["level"]))
            want = "".join(l + "\n" for n, l in enumerate(text.split("\n"), 1)
                           if n not in bad and not (n == len(text.split("\n")) and l == ""))
            out = "/app/out/clean/" + os.path.basename(p)
            assert read(out) == want, f"{out} should hold the file minus its invalid lines"
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        total = sum(len(invalid_lines(read(p), CFG["level"])) for p in CFG["tabs"])
        want = {"files": len(CFG["tabs"]), "invalid": total}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", ["/app/out/invalid.txt",
                       "/app/out/counts.txt"])


def test_hidden_corpus():
    if not CFG["code"]:
        return
    rng = random.Random(4711)
    lines, evil = [], set()
    for _ in range(CFG["fresh"]):
        lines.append(clean_entry(rng, CFG["level"]))
        lines.append(evil_entry(rng, CFG["level"]))
        evil.add(len(lines))
        if rng.random() < 0.2:
            lines.append(rng.choice(["# nightly jobs", "", "   ", "\t# indented comment"]))
    path = os.path.join(workdir(), "crontab")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    got = [int(x) for x in run_program([path]).stdout.split()]
    assert invalid_lines("\n".join(lines) + "\n", CFG["level"]) == sorted(evil), "self-check"
    missed = sorted(evil - set(got))
    wrong = sorted(set(got) - evil)
    shown = [lines[n - 1] for n in missed[:5]]
    assert not missed, f"invalid entries not reported: {shown}"
    shown = [lines[n - 1] if n <= len(lines) else n for n in wrong[:5]]
    assert not wrong, f"valid lines reported: {shown}"
    assert got == sorted(evil), "report each invalid line number once, ascending"
"""


_CRON_FOLDERS = ["cron", "crontabs", "cron.d", "schedules"]
_CRON_HOSTS = ["web", "db", "batch", "mail", "etl", "reports"]
_CRON_PROGRAMS = ["cronlint", "cron_check", "lintcron"]
_CRON_OPENERS = [
    "Before I install the crontabs in {folder} on the new server I want them linted.",
    "We are moving the scheduled jobs in {folder} ({names}) to a new host; lint them first.",
    "Some entries in {folder} ({names}) look broken and cron only complains by mail, so lint them.",
    "I inherited the crontabs in {folder} ({names}) and do not trust them; please lint them.",
]


@register
class CronLint(Family):
    """Lint crontab files (field ranges, lists, steps; names, macros and env lines by level):
    report invalid lines from fixtures, or write a linter that hidden broken entries must
    not slip past."""

    name = "system_administration.cron_lint"
    domain = "system_administration"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("ignored_lines", (r"lines whose first non-blank character is `#` are ignored",),
             (r'return "skip"',)),
        Rule("five_fields", (r"an entry has five whitespace-separated time fields",),
             (r"if len\(parts\) < 6:",)),
        Rule("field_syntax", (r"a field is a comma-separated list of items",),
             (r"def _field_ok\(",)),
        Rule("month_day_names", (r"month names \(jan-dec\) and day names \(sun-sat\)",),
             (r"level >= 2 and _NAMES\[index\]",), levels=frozenset({2, 3, 4})),
        Rule("macros", (r"`@reboot @hourly @daily @weekly @monthly @yearly @annually`",),
             (r'level >= 3 and parts\[0\]\.startswith\("@"\)',), levels=frozenset({3, 4})),
        Rule("env_lines", (r"environment lines `NAME=value`",),
             (r"level >= 4 and re\.fullmatch",), levels=frozenset({4})),
        Rule("invalid_report", (r"`/app/out/invalid\.txt`: `FILE:LINE`",),
             (r'read\("/app/out/invalid\.txt"\)',)),
        Rule("counts", (r"`/app/out/counts\.txt`: `FILE VALID INVALID`",),
             (r'read\("/app/out/counts\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("clean_copies", (r"`/app/out/clean/FILE`: each crontab with its invalid lines",),
             (r'out = "/app/out/clean/"',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/(?:cronlint|cron_check|lintcron)",),
             (r"def test_hidden_corpus\(",), when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        lang = language_or_bash(ctx)
        code = ctx.needs_code or ctx.verifier_kind == "adversarial_corpus"
        files: dict[str, str | bytes] = {}
        tabs = []
        good_pool = [
            "0 2 * * * /opt/backup.sh",
            "*/15 * * * * /usr/bin/poll-queue",
            "30 6 1-7 * 1 /opt/report --monthly",
            "0 0,12 * * * run-parts /etc/x",
            "5 4 * jan-mar mon-fri /opt/season.sh",
            "@daily /usr/sbin/logrotate /etc/lr",
            "MAILTO=ops@example.com",
            "15 3 * * sun /opt/weekly.sh",
            "0 */4 * * * /usr/local/bin/sync",
        ]
        bad_pool = [
            "61 * * * * /opt/x.sh",
            "0 25 * * * /opt/y.sh",
            "* * * * /opt/four-fields",
            "*/0 * * * * /opt/zero-step",
            "0 0 32 * * /opt/day",
            "10-5 * * * * /opt/r",
            "0 0 * 13 * /opt/m",
            "@hourlyy /opt/typo",
            "0 0 * * funday /opt/d",
        ]
        folder = "/app/" + rng.choice(_CRON_FOLDERS)
        for t in range(1 if level < 3 else 2 + (level == 4)):
            rows = ["# maintained by ops"]
            for _ in range(5 + 3 * level):
                rows.append(rng.choice(good_pool if rng.random() < 0.65 else bad_pool))
            name = f"{rng.choice(_CRON_HOSTS)}{t + 1}.cron"
            files[f"{folder.removeprefix('/app/')}/{name}"] = "\n".join(rows) + "\n"
            tabs.append(f"{folder}/{name}")
        tabs.sort()
        prog = program_path(lang, "/app/" + rng.choice(_CRON_PROGRAMS))
        names = ", ".join(tab.rsplit("/", 1)[1] for tab in tabs)
        cfg = {
            "level": level,
            "tabs": tabs,
            "lang": lang,
            "program": prog,
            "code": code,
            "files_out": True,
            "fresh": {1: 30, 2: 45, 3: 60, 4: 80}[level],
        }
        rules = [
            "blank lines and lines whose first non-blank character is `#` are ignored",
            "an entry has five whitespace-separated time fields (minute 0-59, hour 0-23, "
            "day-of-month 1-31, month 1-12, day-of-week 0-7) followed by a non-empty command",
            "a field is a comma-separated list of items; an item is `*`, `*/STEP`, `N`, `A-B` "
            "or `A-B/STEP` with numbers in the field's range, A <= B and STEP >= 1",
        ]
        if level >= 2:
            rules.append(
                "month names (jan-dec) and day names (sun-sat), any case, may stand "
                "wherever a number may in those two fields"
            )
        if level >= 3:
            rules.append(
                "`@reboot @hourly @daily @weekly @monthly @yearly @annually` followed "
                "by a command replace the five fields; any other `@word` is invalid"
            )
        if level >= 4:
            rules.append(
                "environment lines `NAME=value` (NAME: letter or underscore, then "
                "letters, digits, underscores) are valid"
            )
        asks = [
            "`/app/out/invalid.txt`: `FILE:LINE` (base name, 1-based line number) for each "
            "invalid line, files in name order, lines ascending"
        ]
        if level >= 2:
            asks.append(
                "`/app/out/counts.txt`: `FILE VALID INVALID` per file, in name order "
                "(ignored lines count as neither)"
            )
        if level >= 3:
            asks.append(
                "`/app/out/clean/FILE`: each crontab with its invalid lines removed "
                "(everything else byte for byte)"
            )
        if level >= 4:
            asks.append('`/app/out/summary.json`: `{"files": F, "invalid": N}`')
            asks.append(
                "`/app/out/checksums.sha256`: sha256sum lines for invalid.txt and counts.txt"
            )
        body = (
            rng.choice(_CRON_OPENERS).format(folder=folder, names=names)
            + " A line is valid under these rules:\n\n"
            + bullets(rules)
            + "\n\nPlease produce:\n\n"
            + bullets(asks)
        )
        if code:
            body += (
                f"\n\nWrite the linter as a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: given one crontab path it prints the line numbers of invalid "
                "lines, one per line, ascending, and nothing else. I will run it on "
                "crontabs of my own with deliberately broken entries."
            )
        source = {"python": _CRON_ORACLE + _CRON_PY, "bash": _CRON_BASH}[lang]
        source = source.replace("@LEVEL@", str(level))
        tool = prog if code else "/tmp/cronlint.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = ["mkdir -p /app/out", heredoc(tool, source), ": > /app/out/invalid.txt"]
        for tab in tabs:
            base = tab.rsplit("/", 1)[1]
            lines.append(f"{run} {tab} | sed 's/^/{base}:/' >> /app/out/invalid.txt")
        if level >= 2:
            lines.append(": > /app/out/counts.txt")
            lines.append("for f in " + " ".join(tabs) + "; do")
            lines.append("  b=$(basename $f)")
            lines.append('  bad=$(grep -c "^$b:" /app/out/invalid.txt || true)')
            lines.append("  entries=$(grep -cvE '^[[:space:]]*(#|$)' $f || true)")
            lines.append('  echo "$b $((entries - bad)) $bad" >> /app/out/counts.txt')
            lines.append("done")
        if level >= 3:
            lines.append("mkdir -p /app/out/clean")
            lines.append("for f in " + " ".join(tabs) + "; do")
            lines.append("  b=$(basename $f)")
            lines.append('  grep "^$b:" /app/out/invalid.txt | cut -d: -f2 > /tmp/bad || true')
            lines.append(
                "  awk 'NR == FNR {bad[$1] = 1; next} !(FNR in bad)' /tmp/bad $f "
                "> /app/out/clean/$b"
            )
            lines.append("done")
        if level >= 4:
            lines.append("n=$(grep -c . /app/out/invalid.txt || true)")
            lines.append(
                f'echo "{{\\"files\\": {len(tabs)}, \\"invalid\\": $n}}" > /app/out/summary.json'
            )
            lines.append(manifest_line(["invalid.txt", "counts.txt"]))
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _CRON_ORACLE + _CRON_TESTS)},
            files=files,
        )


# --- backup_rotation ---------------------------------------------------------------------

_ROTATE_ORACLE = r'''
import re


def to_delete(names, keep, level):
    """Backups to delete from a directory listing, sorted by name."""
    backups = sorted((n for n in names if re.fullmatch(r"db-[0-9]{8}\.tar\.gz", n)),
                     reverse=True)
    kept = set(backups[:keep])
    if level >= 2:
        months = set()
        for name in backups:
            if name[3:9] not in months:
                months.add(name[3:9])
                kept.add(name)
    return sorted(n for n in backups if n not in kept)
'''

_ROTATE_PY = r"""
import os
import sys

KEEP, LEVEL = @KEEP@, @LEVEL@

if __name__ == "__main__":
    for name in to_delete(os.listdir(sys.argv[1]), KEEP, LEVEL):
        print(name)
"""

_ROTATE_BASH = r"""
#!/bin/bash
# Usage: rotate.sh DIR -> names of backups to delete (sorted), nothing is removed
set -euo pipefail
ls -A "$1" | LC_ALL=C grep -E '^db-[0-9]{8}\.tar\.gz$' | LC_ALL=C sort -r \
  | awk -v keep=@KEEP@ -v L=@LEVEL@ '{ m = substr($0, 4, 6); k = (NR <= keep)
      if (L >= 2 && !(m in seen)) { seen[m] = 1; k = 1 }
      if (!k) print }' | LC_ALL=C sort
"""

_ROTATE_TESTS = r"""

def test_rotation_applied():
    deleted_all, kept_all = [], []
    for host, files in sorted(CFG["dirs"].items()):
        names = sorted(files)
        gone = to_delete(names, CFG["keep"], CFG["level"])
        stay = sorted(set(names) - set(gone))
        path = "/app/backups/" + host
        assert os.path.isdir(path), f"{path} is gone"
        now = sorted(n for n in os.listdir(path) if n != "LATEST")
        assert now == stay, f"{path} should hold {stay}, holds {now}"
        deleted_all += [f"{host}/{n}" for n in gone]
        kept_all += [f"{host}/{n}" for n in stay if n.startswith("db-")]
        if CFG["level"] >= 4:
            newest = max(n for n in stay if n.startswith("db-"))
            assert read(path + "/LATEST").strip() == newest, f"{path}/LATEST should be {newest}"
    got = [l for l in read("/app/out/deleted.txt").split("\n") if l]
    assert got == sorted(deleted_all), f"deleted.txt should be {sorted(deleted_all)}, got {got}"
    if CFG["level"] >= 3:
        got = [l for l in read("/app/out/kept.txt").split("\n") if l]
        assert got == sorted(kept_all), f"kept.txt should be {sorted(kept_all)}, got {got}"
    if CFG["level"] >= 4:
        freed = sum(CFG["dirs"][d.split("/")[0]][d.split("/")[1]] for d in deleted_all)
        summary = json.loads(read("/app/out/summary.json"))
        want = {"deleted": len(deleted_all), "kept": len(kept_all), "freed_bytes": freed}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", ["/app/out/deleted.txt", "/app/out/kept.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(99)
    for i in range(CFG["fresh"]):
        folder = workdir()
        names = set()
        for _ in range(rng.randint(0, 30)):
            names.add("db-%04d%02d%02d.tar.gz" % (rng.choice([2023, 2024]), rng.randint(1, 12),
                                                   rng.randint(1, 28)))
        names |= set(rng.sample(["notes.txt", "db-latest.tar.gz", "db-2024.tar.gz",
                                 "db-20240101.tar.gz.part", "xdb-20240101.tar.gz"], 2))
        for name in names:
            open(os.path.join(folder, name), "w").close()
        want = to_delete(sorted(names), CFG["keep"], CFG["level"])
        got = [l for l in run_program([folder]).stdout.split("\n") if l]
        assert got == want, f"fresh dir {sorted(names)}: expected {want}, got {got}"
        assert sorted(os.listdir(folder)) == sorted(names), "the program must not delete files"
"""


@register
class BackupRotation(Family):
    """Rotate nightly database backups under a retention policy (newest N, monthly keepers,
    several hosts, LATEST markers and freed-space summary by level); code asks for a
    reusable dry-run planner checked on random directories."""

    name = "system_administration.backup_rotation"
    domain = "system_administration"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("keep_newest", (r"keep the newest \d+ \(by the date in the name\)",),
             (r"def test_rotation_applied\(",)),
        Rule("keep_newest_seven", (r"keep the newest 7 \(by the date in the name\)",),
             (r"def test_rotation_applied\(",), when={"keep": 7}),
        Rule("monthly_keepers", (r"also keep the newest backup of every calendar month",),
             (r"months\.add\(name\[3:9\]\)",), levels=frozenset({2, 3, 4})),
        Rule("per_host", (r"each host directory under /app/backups is rotated on its own",),
             (r'for host, files in sorted\(CFG\["dirs"\]\.items\(\)\)',),
             levels=frozenset({3, 4})),
        Rule("apply", (r"apply the policy \(really delete the files\)",),
             (r"assert now == stay",)),
        Rule("deleted_list", (r"`/app/out/deleted\.txt`: `HOST/FILE`",),
             (r'read\("/app/out/deleted\.txt"\)',)),
        Rule("kept_list", (r"`/app/out/kept\.txt`: `HOST/FILE`",),
             (r'read\("/app/out/kept\.txt"\)',), levels=frozenset({3, 4})),
        Rule("latest_marker", (r"`/app/backups/HOST/LATEST`",), (r'read\(path \+ "/LATEST"\)',),
             levels=frozenset({4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/rotate",),
             (r"def test_program_fresh\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "rotate backups keeping only the newest seven copies": "keep_newest_seven"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        keep = rng.choice([3, 5, 7])
        hosts = (
            ["db01"]
            if level < 3
            else sorted(rng.sample(["db01", "db02", "ledger", "wiki"], level - 1))
        )
        files: dict[str, str | bytes] = {}
        dirs: dict[str, dict[str, int]] = {}
        for host in hosts:
            listing: dict[str, int] = {}
            for _ in range(8 + 4 * level):
                name = (
                    f"db-{rng.choice([2023, 2024])}{rng.randint(1, 12):02d}"
                    f"{rng.randint(1, 28):02d}.tar.gz"
                )
                size = rng.randint(20, 400)
                listing[name] = size
            if level >= 3:
                listing["README.txt"] = 40
            for name, size in listing.items():
                content = (
                    "README: nightly dumps land here\n".ljust(size, ".")[:size]
                    if name == "README.txt"
                    else (f"{host}/{name}\n" * 40)[:size]
                )
                listing[name] = len(content.encode())
                files[f"backups/{host}/{name}"] = content
            dirs[host] = dict(sorted(listing.items()))
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/rotate")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "keep": keep,
            "dirs": dirs,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 5 * level + 5,
        }
        policy = [
            f"backups are the files named `db-YYYYMMDD.tar.gz`; keep the newest {keep} "
            "(by the date in the name)"
        ]
        if level >= 2:
            policy.append("also keep the newest backup of every calendar month present")
        if level >= 3:
            policy.append(
                "each host directory under /app/backups is rotated on its own; files "
                "that are not backups are never touched"
            )
        policy.append("delete every other backup")
        asks = [
            "apply the policy (really delete the files)",
            "`/app/out/deleted.txt`: `HOST/FILE` for each deleted backup, sorted",
        ]
        if level >= 3:
            asks.append("`/app/out/kept.txt`: `HOST/FILE` for each remaining backup, sorted")
        if level >= 4:
            asks.append("`/app/backups/HOST/LATEST`: the file name of that host's newest backup")
            asks.append(
                '`/app/out/summary.json`: `{"deleted": D, "kept": K, "freed_bytes": B}` '
                "(B = total size of what you deleted)"
            )
            asks.append("`/app/out/checksums.sha256`: sha256sum lines for deleted.txt and kept.txt")
        where = "/app/backups/db01" if level < 3 else "/app/backups/*/"
        body = (
            f"The backup disk is filling up. Nightly dumps live in {where}. Retention "
            "policy:\n\n" + bullets(policy) + "\n\nPlease:\n\n" + bullets(asks)
        )
        if code:
            body += (
                f"\n\nPut the policy in a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: given one directory it prints the names of the backups the "
                "policy deletes, sorted, one per line, and deletes nothing itself."
            )
        source = {"python": _ROTATE_ORACLE + _ROTATE_PY, "bash": _ROTATE_BASH}[lang]
        source = source.replace("@KEEP@", str(keep)).replace("@LEVEL@", str(level))
        tool = prog if code else "/tmp/rotate.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = ["mkdir -p /app/out", heredoc(tool, source), ": > /app/out/deleted.txt"]
        if level >= 4:
            lines.append("freed=0")
        for host in hosts:
            lines.append(f"{run} /app/backups/{host} > /tmp/{host}.del")
            lines.append(f"sed 's|^|{host}/|' /tmp/{host}.del >> /app/out/deleted.txt")
            if level >= 4:
                lines.append(
                    f"freed=$((freed + $(cd /app/backups/{host} && cat /tmp/{host}.del "
                    "| xargs -r stat -c %s | awk '{s += $1} END {print s + 0}')))"
                )
            lines.append(f"(cd /app/backups/{host} && xargs -r rm -f -- < /tmp/{host}.del)")
        lines.append("LC_ALL=C sort -o /app/out/deleted.txt /app/out/deleted.txt")
        if level >= 3:
            lines.append(
                "(cd /app/backups && ls -1 */db-*.tar.gz | LC_ALL=C grep -E "
                "'/db-[0-9]{8}\\.tar\\.gz$' | LC_ALL=C sort) > /app/out/kept.txt"
            )
        if level >= 4:
            for host in hosts:
                lines.append(
                    f"ls /app/backups/{host} | grep -E '^db-[0-9]{{8}}\\.tar\\.gz$' | "
                    f"sort | tail -n 1 > /app/backups/{host}/LATEST"
                )
            lines.append("deleted=$(grep -c . /app/out/deleted.txt || true)")
            lines.append("kept=$(grep -c . /app/out/kept.txt || true)")
            lines.append(
                'printf \'{"deleted": %d, "kept": %d, "freed_bytes": %d}\\n\' '
                '"$deleted" "$kept" "$freed" > /app/out/summary.json'
            )
            lines.append(manifest_line(["deleted.txt", "kept.txt"]))
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _ROTATE_ORACLE + _ROTATE_TESTS)},
            files=files,
        )
