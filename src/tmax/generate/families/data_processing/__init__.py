"""Task families of the data_processing domain."""

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
from tmax.generate.families.data_processing.customer_totals import CustomerTotals  # noqa: F401
from tmax.generate.families.data_processing.signup_validator import SignupValidator  # noqa: F401
from tmax.generate.family import Draft, Family, RenderContext, register

# --- hourly_rollup -----------------------------------------------------------------------

_ROLLUP_ORACLE = r'''
import datetime
import re

_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                    r"(Z|[+-][0-9]{2}:[0-9]{2})")
_VALUE = re.compile(r"[0-9]+(\.[0-9])?")


def parse_stamp(text):
    """UTC hour 'YYYY-MM-DDTHH' of an ISO timestamp ending in Z or +HH:MM / -HH:MM."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z")
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H")


def tenths(text):
    whole, _, frac = text.partition(".")
    return int(whole) * 10 + int((frac + "0")[:1])


def rollup(texts):
    groups = {}
    for text in texts:
        for line in text.splitlines()[1:]:
            parts = line.strip().split(",")
            if len(parts) != 3:
                continue
            stamp, sensor, value = parts
            if not _STAMP.fullmatch(stamp) or not _VALUE.fullmatch(value):
                continue
            try:
                key, v = (parse_stamp(stamp), sensor), tenths(value)
            except ValueError:
                continue
            groups.setdefault(key, []).append(v)
    rows = ["hour,sensor,count,min,max,mean"]
    for (hour, sensor) in sorted(groups):
        vals = groups[(hour, sensor)]
        n, s = len(vals), sum(vals)
        mean = (20 * s + n) // (2 * n)
        rows.append("%s,%s,%d,%d.%d,%d.%d,%d.%02d" % (hour, sensor, n, min(vals) // 10,
                    min(vals) % 10, max(vals) // 10, max(vals) % 10, mean // 100, mean % 100))
    return "\n".join(rows) + "\n"
'''

_ROLLUP_PY = r"""
import sys

if __name__ == "__main__":
    texts = []
    for path in sys.argv[1:]:
        with open(path) as handle:
            texts.append(handle.read())
    sys.stdout.write(rollup(texts))
"""

_ROLLUP_BASH = r"""
#!/bin/bash
# Usage: rollup.sh FILE... -> hourly per-sensor aggregates (UTC) as CSV on stdout
set -euo pipefail
echo "hour,sensor,count,min,max,mean"
TZ=UTC gawk -F, '
FNR == 1 { next }
{ sub(/\r$/, "") }
NF != 3 { next }
$1 !~ /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})$/ { next }
$3 !~ /^[0-9]+(\.[0-9])?$/ { next }
{ t = mktime(substr($1, 1, 4) " " substr($1, 6, 2) " " substr($1, 9, 2) " " \
             substr($1, 12, 2) " " substr($1, 15, 2) " " substr($1, 18, 2))
  z = substr($1, 20)
  if (z != "Z") { sign = (substr(z, 1, 1) == "-") ? -1 : 1
    t -= sign * (substr(z, 2, 2) * 3600 + substr(z, 5, 2) * 60) }
  split($3, p, "."); v = p[1] * 10 + (p[2] == "" ? 0 : p[2])
  key = strftime("%Y-%m-%dT%H", t) "," $2
  n[key]++; s[key] += v
  if (!(key in lo) || v < lo[key]) lo[key] = v
  if (!(key in hi) || v > hi[key]) hi[key] = v }
END { for (k in n) { m = int((20 * s[k] + n[k]) / (2 * n[k]))
    printf "%s,%d,%d.%d,%d.%d,%d.%02d\n", k, n[k], int(lo[k] / 10), lo[k] % 10,
      int(hi[k] / 10), hi[k] % 10, int(m / 100), m % 100 } }' "$@" | LC_ALL=C sort
"""

_ROLLUP_TESTS = r"""

def random_file(rng):
    lines = ["timestamp,sensor,value"]
    for _ in range(rng.randint(1, 50)):
        if rng.random() < 0.08:
            lines.append(rng.choice(["garbage", "2024-01-01T00:00:00Z,t1", ",,", "x,y,z",
                                     "2024-01-01T00:00:00Z,t1,-3.5",
                                     "2024-01-01T00:00:00Z,t2,12.25",
                                     "2024-1-01T00:00:00Z,t1,1.0",
                                     "2024-01-01 00:00:00Z,t1,1.0"]))
            continue
        zone = rng.choice(["Z", "Z", "+02:00", "-05:30", "+00:00"])
        stamp = "2024-%02d-%02dT%02d:%02d:%02d%s" % (rng.choice([2, 12]), rng.choice([1, 28, 29]),
                rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), zone)
        sensor = rng.choice(["t1", "t2", "hum"])
        lines.append(f"{stamp},{sensor},{rng.randint(0, 999)}.{rng.randint(0, 9)}")
    return "\n".join(lines) + "\n"


def test_rollup_file():
    texts = [read(p) for p in CFG["inputs"]]
    want = rollup(texts)
    got = read("/app/out/hourly.csv")
    assert got == want, f"hourly.csv:\nexpected\n{want}\ngot\n{got}"


def test_derived():
    level = CFG["level"]
    rows = [r.split(",") for r in rollup([read(p) for p in CFG["inputs"]]).splitlines()[1:]]
    if level >= 2:
        busiest = sorted(rows, key=lambda r: (-int(r[2]), r[0], r[1]))[0]
        got = read("/app/out/busiest.txt").strip()
        want = f"{busiest[0]} {busiest[1]}"
        assert got == want, f"busiest.txt should be {want!r}, got {got!r}"
    if level >= 3:
        sensors = sorted({r[1] for r in rows})
        want = "".join(f"{s} {max(float(r[4]) for r in rows if r[1] == s):.1f}\n" for s in sensors)
        got = read("/app/out/peaks.txt")
        assert got == want, f"peaks.txt:\nexpected\n{want}\ngot\n{got}"
    if level >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        want = {"rows": len(rows), "readings": sum(int(r[2]) for r in rows)}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/hourly.csv", "/app/out/busiest.txt", "/app/out/peaks.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(1234)
    folder = workdir()
    for i in range(CFG["fresh"]):
        paths, texts = [], []
        for j in range(rng.randint(1, 3)):
            text = random_file(rng)
            path = os.path.join(folder, f"r{i}_{j}.csv")
            with open(path, "w") as handle:
                handle.write(text)
            paths.append(path)
            texts.append(text)
        want = rollup(texts)
        got = run_program(paths).stdout
        assert got == want, f"fresh inputs {texts}:\nexpected\n{want}\ngot\n{got}"
"""


_ROLLUP_FOLDERS = ("readings", "uploads", "telemetry", "sensor_logs")
_ROLLUP_STEMS = ("station", "site", "logger")
_ROLLUP_INTROS = (
    "Our weather stations upload minute readings to /app/{folder}/*.csv (header "
    "`timestamp,sensor,value`; stations do not all log in UTC). Please produce:\n\n",
    "The greenhouse loggers drop minute-level readings into /app/{folder}/*.csv (header "
    "`timestamp,sensor,value`); not every logger writes UTC timestamps. I need:\n\n",
    "Minute readings from our cold-storage monitors land in /app/{folder}/*.csv (header "
    "`timestamp,sensor,value`). The sites log with different UTC offsets. Please "
    "produce:\n\n",
    "Each file in /app/{folder}/ is a CSV of minute readings (header "
    "`timestamp,sensor,value`) from one of our plant-floor sensor stations, some of "
    "them not on UTC. From them, please produce:\n\n",
)
"""Where the readings lie and how the user says so (the offsets are in every wording)."""


@register
class HourlyRollup(Family):
    """Roll minute-level sensor readings (mixed UTC offsets, junk lines) into hourly per-sensor
    aggregates; level adds sources, derived reports and a manifest; code asks for a
    reusable roll-up program checked on random inputs."""

    name = "data_processing.hourly_rollup"
    domain = "data_processing"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("hourly_file",
             (r"`/app/out/hourly\.csv` with header `hour,sensor,count,min,max,mean`",),
             (r"def test_rollup_file\(",)),
        Rule("utc_hours", (r"`hour` written `YYYY-MM-DDTHH` in UTC",),
             (r"astimezone\(datetime\.timezone\.utc\)",)),
        Rule("mean_half_up", (r"mean with two decimals rounded half up",),
             (r"mean = \(20 \* s \+ n\) // \(2 \* n\)",)),
        Rule("skip_malformed", (r"Lines that are not `timestamp,sensor,value` with an ISO",
                                r"one decimal are skipped"),
             (r"if not _STAMP\.fullmatch\(stamp\) or not _VALUE\.fullmatch\(value\):",)),
        Rule("busiest_file", (r"`/app/out/busiest\.txt`: `HOUR SENSOR`",),
             (r'read\("/app/out/busiest\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("peaks_file", (r"`/app/out/peaks\.txt`: `SENSOR MAX`",),
             (r'read\("/app/out/peaks\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary_and_checksums", (r"`/app/out/summary\.json`", r"checksums\.sha256"),
             (r'read\("/app/out/summary\.json"\)', r"check_manifest\("),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/rollup",), (r"def test_program_fresh\(",),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "resample minute-level readings into hourly aggregates": "hourly_file",
        "align timestamps from sources in different timezones": "utc_hours",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        sensors = rng.sample(["temp_a", "temp_b", "hum_1", "co2", "pres"], 1 + min(level, 3))
        files: dict[str, str | bytes] = {}
        inputs = []
        day = rng.randint(1, 27)
        folder, stem = ctx.pick(_ROLLUP_FOLDERS), ctx.pick(_ROLLUP_STEMS)
        for f in range(1 + level // 2):
            # one station off UTC at every level, so the UTC rule shows in the fixture
            zone = "Z" if f == 0 and level >= 2 else rng.choice(["+02:00", "-04:00", "+05:30"])
            lines = ["timestamp,sensor,value"]
            for _ in range(10 + 10 * level):
                lines.append(
                    f"2024-03-{day:02d}T{rng.randint(6, 11):02d}:{rng.randint(0, 59):02d}:"
                    f"{rng.randint(0, 59):02d}{zone},{rng.choice(sensors)},"
                    f"{rng.randint(150, 320)}.{rng.randint(0, 9)}"
                )
                if rng.random() < 0.05:
                    lines.append(rng.choice(["ERROR sensor offline", "2024-03-01T00:00:00Z,,"]))
            # at least one line to skip in every file: junk, or a value with two decimals
            lines.insert(
                rng.randint(1, len(lines)),
                rng.choice(
                    [
                        "ERROR sensor offline",
                        f"2024-03-{day:02d}T09:30:00{zone},{rng.choice(sensors)},"
                        f"{rng.randint(150, 320)}.{rng.randint(10, 99)}",
                    ]
                ),
            )
            name = f"{folder}/{stem}{f + 1}.csv"
            files[name] = "\n".join(lines) + "\n"
            inputs.append("/app/" + name)
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/rollup")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "inputs": inputs,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 5 * level + 5,
        }
        asks = [
            "`/app/out/hourly.csv` with header `hour,sensor,count,min,max,mean`: one row per "
            "(UTC hour, sensor) that has readings, `hour` written `YYYY-MM-DDTHH` in UTC, rows "
            "sorted by hour then sensor (byte order); min/max with one decimal, mean with two "
            "decimals rounded half up. Lines that are not `timestamp,sensor,value` with an ISO "
            "timestamp (`Z` or `+HH:MM`/`-HH:MM` offset) and a non-negative value with at most "
            "one decimal are skipped"
        ]
        if level >= 2:
            asks.append(
                "`/app/out/busiest.txt`: `HOUR SENSOR` of the row with the most "
                "readings (ties: earliest hour, then sensor name)"
            )
        if level >= 3:
            asks.append(
                "`/app/out/peaks.txt`: `SENSOR MAX` per sensor (highest hourly max, one "
                "decimal), sorted by sensor"
            )
        if level >= 4:
            asks.append('`/app/out/summary.json`: `{"rows": R, "readings": N}` for hourly.csv')
            asks.append(
                "`/app/out/checksums.sha256`: sha256sum lines for hourly.csv, "
                "busiest.txt and peaks.txt"
            )
        body = ctx.pick(_ROLLUP_INTROS).format(folder=folder) + bullets(asks)
        if code:
            body += (
                f"\n\nMake the roll-up a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: it takes one or more CSV paths and prints the hourly.csv "
                "content (all files pooled) to stdout. I will run it on other files."
            )
        source = {"python": _ROLLUP_ORACLE + _ROLLUP_PY, "bash": _ROLLUP_BASH}[lang]
        tool = prog if code else "/tmp/rollup.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = [
            "mkdir -p /app/out",
            heredoc(tool, source),
            f"{run} {' '.join(inputs)} > /app/out/hourly.csv",
        ]
        if level >= 2:
            lines.append(
                "tail -n +2 /app/out/hourly.csv | sort -t, -k3,3nr -k1,1 -k2,2 | "
                "head -n 1 | awk -F, '{print $1, $2}' > /app/out/busiest.txt"
            )
        if level >= 3:
            lines.append(
                "tail -n +2 /app/out/hourly.csv | awk -F, '!($2 in m) || $5 + 0 > m[$2] "
                '{m[$2] = $5 + 0} END {for (s in m) printf "%s %.1f\\n", s, m[s]}\' '
                "| LC_ALL=C sort > /app/out/peaks.txt"
            )
        if level >= 4:
            lines.append("rows=$(tail -n +2 /app/out/hourly.csv | grep -c .)")
            lines.append(
                "readings=$(tail -n +2 /app/out/hourly.csv | awk -F, '{s += $3} END {print s + 0}')"
            )
            lines.append(
                'printf \'{"rows": %d, "readings": %d}\\n\' "$rows" "$readings" '
                "> /app/out/summary.json"
            )
            lines.append(manifest_line(["hourly.csv", "busiest.txt", "peaks.txt"]))
            lines.append("head -n 3 /app/out/hourly.csv")
            lines.append("wc -l /app/out/hourly.csv")
            lines.append("cat /app/out/busiest.txt /app/out/peaks.txt /app/out/summary.json")
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _ROLLUP_ORACLE + _ROLLUP_TESTS)},
            files=files,
        )


# --- name_matching -----------------------------------------------------------------------

_COMPANIES = (
    "Northwind Traders",
    "Blue Harbor Foods",
    "Crescent Logistics",
    "Summit Dental Care",
    "Ironwood Builders",
    "Pinecrest Bakery",
    "Silverline Telecom",
    "Golden Valley Farms",
    "Redstone Mining",
    "Oakridge Pharmacy",
    "Maple Street Books",
    "Harborview Hotel",
    "Quantum Print Shop",
    "Evergreen Landscaping",
    "Falcon Air Charter",
    "Riverside Plumbing",
    "Sunset Car Wash",
    "Bright Path Tutoring",
    "Copperfield Metals",
    "Lakeshore Marina",
    "Willow Creek Vets",
    "Atlas Moving Co",
    "Cobalt Software",
    "Meadowlark Dairy",
)
"""Canonical names, pairwise at least 9 edits apart after normalisation."""

_MATCH_ORACLE = r"""
import re


def normalise(name):
    return " ".join(re.sub(r"[^a-z0-9 ]", "", name.lower()).split())


def distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def best_match(name, canon, limit):
    key = normalise(name)
    scored = sorted((distance(key, normalise(c)), c) for c in canon)
    if limit is not None and scored[0][0] > limit:
        return "UNMATCHED"
    return scored[0][1]


def match_lines(canon_text, names_text, limit):
    canon = [l.strip() for l in canon_text.splitlines() if l.strip()]
    names = [l.rstrip("\n") for l in names_text.splitlines() if l.strip()]
    return [f"{n}\t{best_match(n, canon, limit)}" for n in names]
"""

_MATCH_PY = r"""
import sys

LIMIT = @LIMIT@

if __name__ == "__main__":
    with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
        for line in match_lines(a.read(), b.read(), LIMIT):
            print(line)
"""

_MATCH_BASH = r"""
#!/bin/bash
# Usage: match.sh CANONICAL NAMES -> "name<TAB>best canonical" per name
set -euo pipefail
LC_ALL=C awk -v limit=@LIMIT@ '
function norm(s) { s = tolower(s); gsub(/[^a-z0-9 ]/, "", s); gsub(/ +/, " ", s)
  sub(/^ /, "", s); sub(/ $/, "", s); return s }
function lev(a, b,   i, j, la, lb, d, x, y, z) {
  la = length(a); lb = length(b)
  for (j = 0; j <= lb; j++) d[0, j] = j
  for (i = 1; i <= la; i++) { d[i, 0] = i
    for (j = 1; j <= lb; j++) {
      x = d[i-1, j] + 1; y = d[i, j-1] + 1
      z = d[i-1, j-1] + (substr(a, i, 1) != substr(b, j, 1))
      d[i, j] = (x < y) ? ((x < z) ? x : z) : ((y < z) ? y : z) } }
  return d[la, lb] }
NR == FNR { if ($0 ~ /[^ ]/) { sub(/^ +/, ""); sub(/ +$/, ""); c[++nc] = $0
    k[nc] = norm($0) }; next }
$0 ~ /[^ ]/ { key = norm($0); best = ""; bd = -1
  for (i = 1; i <= nc; i++) { dd = lev(key, k[i])
    if (bd < 0 || dd < bd || (dd == bd && c[i] < best)) { bd = dd; best = c[i] } }
  if (limit != "None" && bd > limit + 0) best = "UNMATCHED"
  print $0 "\t" best }' "$1" "$2"
"""

_MATCH_TESTS = r"""

def mangle(rng, name, edits):
    s = list(name)
    for _ in range(edits):
        i = rng.randrange(len(s))
        op = rng.choice("sdi")
        if op == "s":
            s[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif op == "d" and len(s) > 3:
            del s[i]
        else:
            s.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz"))
    out = "".join(s)
    if rng.random() < 0.4:
        out = out.upper() if rng.random() < 0.5 else out.lower()
    if rng.random() < 0.3:
        out = out.replace(" ", "  ") + rng.choice([".", ",", " "])
    return out


def fresh_case(rng):
    canon = rng.sample(CFG["pool"], rng.randint(4, 10))
    names, truth = [], []
    for _ in range(rng.randint(3, 12)):
        if CFG["limit"] is not None and rng.random() < 0.2:
            names.append("".join(rng.choice("qwxzjkvb") for _ in range(rng.randint(10, 16))))
            truth.append("UNMATCHED")
        else:
            c = rng.choice(canon)
            names.append(mangle(rng, c, rng.randint(0, 3)))
            truth.append(c)
    return canon, names, truth


def accuracy(lines, names, truth, label):
    assert len(lines) == len(names), f"{label}: {len(names)} lines expected, got {len(lines)}"
    hits = 0
    for line, name, want in zip(lines, names, truth):
        got_name, _, got = line.partition("\t")
        assert got_name == name, f"{label}: line for {name!r} expected, got {line!r}"
        hits += got == want
    return hits / len(names)


def test_matches():
    for src, out in CFG["pairs"]:
        got = [l for l in read(out).split("\n") if l.strip()]
        names = [l for l in read(src).splitlines() if l.strip()]
        if CFG["mode"] == "metric":
            acc = accuracy(got, names, CFG["truth"][src], out)
            assert acc >= CFG["threshold"], f"{out}: accuracy {acc:.3f} < {CFG['threshold']}"
        else:
            want = match_lines(read(CFG["canon"]), read(src), CFG["limit"])
            assert got == want, f"{out}:\nexpected\n" + "\n".join(want) + "\ngot\n" + "\n".join(got)


def test_derived():
    level = CFG["level"]
    if level >= 3:
        rows = [l.split("\t") for _, out in CFG["pairs"] for l in read(out).split("\n")
                if l.strip()]
        counts = {}
        for _, c in rows:
            if c != "UNMATCHED":
                counts[c] = counts.get(c, 0) + 1
        want = "".join(f"{n} {c}\n" for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
        got = read(CFG["outdir"] + "/counts.txt")
        assert got == want, f"counts.txt (from your matches):\nexpected\n{want}\ngot\n{got}"
        if level >= 4:
            unmatched = sorted(n for n, c in rows if c == "UNMATCHED")
            got = [l for l in read(CFG["outdir"] + "/unmatched.txt").split("\n") if l]
            assert got == unmatched, f"unmatched.txt should be {unmatched}, got {got}"
            summary = json.loads(read(CFG["outdir"] + "/summary.json"))
            want = {"names": len(rows), "matched": len(rows) - len(unmatched)}
            assert summary == want, f"summary.json should be {want}, got {summary}"
            outdir = CFG["outdir"]
            check_manifest(outdir + "/checksums.sha256", [out for _, out in CFG["pairs"]]
                           + [outdir + "/counts.txt", outdir + "/unmatched.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(555)
    folder = workdir()
    scores = []
    for i in range(CFG["fresh"]):
        canon, names, truth = fresh_case(rng)
        a, b = os.path.join(folder, f"canon{i}.txt"), os.path.join(folder, f"names{i}.txt")
        with open(a, "w") as handle:
            handle.write("\n".join(canon) + "\n")
        with open(b, "w") as handle:
            handle.write("\n".join(names) + "\n")
        got = [l for l in run_program([a, b]).stdout.split("\n") if l.strip()]
        if CFG["mode"] == "metric":
            scores.append(accuracy(got, names, truth, f"fresh case {i}"))
        else:
            want = match_lines("\n".join(canon), "\n".join(names), CFG["limit"])
            assert got == want, f"fresh case {i}: expected {want}, got {got}"
    if scores:
        acc = sum(scores) / len(scores)
        assert acc >= CFG["threshold"], f"program accuracy {acc:.3f} < {CFG['threshold']}"
"""


def _mangle(rng, name: str, edits: int) -> str:
    chars = list(name)
    for _ in range(edits):
        i = rng.randrange(len(chars))
        op = rng.choice("sdi")
        if op == "s":
            chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif op == "d":
            del chars[i]
        else:
            chars.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz"))
    out = "".join(chars)
    style = rng.random()
    if style < 0.25:
        out = out.upper()
    elif style < 0.5:
        out = out.lower()
    if rng.random() < 0.3:
        out = " " + out.replace(" ", "  ") + rng.choice([".", ",", " ", "!"])
    return out


_MATCH_OPENERS = (
    "Accounts payable typed {noun} names by hand. The official list is {ref} (one per line).",
    "The {noun} names on our invoices were keyed in by hand and are full of typos; the "
    "official {noun} list is {ref}, one name per line.",
    "I need each hand-typed {noun} name tied to the right entry of the official list in "
    "{ref} (one per line).",
    "Staff entered {noun} names free-hand, so the same {noun} appears under many spellings. "
    "The names we recognise are in {ref}, one per line.",
)
"""Opening sentences of the name-matching task (filled with the noun and the list's path)."""

_MATCH_REF_DIRS = ("/app/ref", "/app/master", "/app/reference", "/app/registry")
_MATCH_REF_FILES = {
    "vendor": ("vendors.txt", "vendor_master.txt", "approved_vendors.txt"),
    "supplier": ("suppliers.txt", "supplier_register.txt", "approved_suppliers.txt"),
}
_MATCH_IN_DIRS = ("/app/incoming", "/app/typed", "/app/inbox", "/app/entries")
_MATCH_IN_STEMS = ("invoices", "payables", "bills", "invoice_log")
_MATCH_OUT_DIRS = ("/app/out", "/app/results", "/app/matched")
_MATCH_OUT_STEMS = ("matches", "mapped", "resolved")
_MATCH_PROGRAMS = ("/app/match", "/app/match_names", "/app/resolve", "/app/name_match")
_MATCH_BARS = {1: (0.7, 0.75), 2: (0.8, 0.85), 3: (0.85, 0.9), 4: (0.9, 0.95)}
"""Accuracy bars (metric mode) a level may draw; the exact rule reaches all of them."""


@register
class NameMatching(Family):
    """Match messy vendor names to a canonical list by edit distance after normalisation
    (exact rule) or to an accuracy bar; level adds an UNMATCHED rule, files and reports."""

    name = "data_processing.name_matching"
    domain = "data_processing"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("matches_files",
             (r"the matching `(?P<out>/app/\w+)/(?P<stem>\w+)_qN\.tsv`: one line per non-empty",),
             (r"def test_matches\(", r'"outdir": "{out}"', r'"{out}/{stem}_q1\.tsv"')),
        Rule("normalise", (r"compare names after normalising both sides \(lowercase, drop every",),
             (r'" "\.join\(re\.sub\(r"\[\^a-z0-9 \]", "", name\.lower\(\)\)\.split\(\)\)',
              r'want = match_lines\(read\(CFG\["canon"\]\)'), when={"mode": "exact"}),
        Rule("nearest_vendor",
             (r"the smallest Levenshtein distance \(ties: the alphabetically first",),
             (r"def distance\(a, b\):", r"sorted\(\(distance\(key, normalise\(c\)\), c\) for c in",
              r'want = match_lines\(read\(CFG\["canon"\]\)'), when={"mode": "exact"}),
        Rule("unmatched_limit",
             (r"when the best distance is above (?P<limit>\d+), write `UNMATCHED`",),
             (r'"limit": {limit},', r"scored\[0\]\[0\] > limit", r'"truth": \{{[^\n]*"UNMATCHED"'),
             levels=frozenset({2, 3, 4}), when={"mode": "exact"}),
        Rule("accuracy_bar", (r"at least (?P<pct>\d+?)0?% of the lines must be right",),
             (r'assert acc >= CFG\["threshold"\]', r'"threshold": 0\.{pct},'),
             when={"mode": "metric"}),
        Rule("junk_unmatched",
             (r"some lines are junk that matches no (?:vendor|supplier), write `UNMATCHED`",),
             (r'"truth": \{{[^\n]*"UNMATCHED"',), levels=frozenset({2, 3, 4}),
             when={"mode": "metric"}),
        Rule("counts_file", (r"`(?P<out>/app/\w+)/counts\.txt`: `COUNT (?:VENDOR|SUPPLIER)`",),
             (r'read\(CFG\["outdir"\] \+ "/counts\.txt"\)', r'"outdir": "{out}"'),
             levels=frozenset({3, 4})),
        Rule("unmatched_file", (r"`(?P<out>/app/\w+)/unmatched\.txt`: the original names",),
             (r'read\(CFG\["outdir"\] \+ "/unmatched\.txt"\)', r'"outdir": "{out}"'),
             levels=frozenset({4})),
        Rule("summary_and_checksums",
             (r"`(?P<out>/app/\w+)/summary\.json`", r"`/app/\w+/checksums\.sha256`"),
             (r'read\(CFG\["outdir"\] \+ "/summary\.json"\)', r"check_manifest\(",
              r'"outdir": "{out}"'),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_program_fresh\(", r'"program": "{program}"'), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "fuzzy match names using edit distance thresholds": "unmatched_limit",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "metric" if ctx.verifier_kind == "metric_threshold" else "exact"
        # the limit only shows (as a number) in exact mode; the metric bar assumes 3
        limit = (ctx.pick((2, 3, 4)) if mode == "exact" else 3) if level >= 2 else None
        noun = ctx.pick(("vendor", "supplier"))
        ref = f"{ctx.pick(_MATCH_REF_DIRS)}/{ctx.pick(_MATCH_REF_FILES[noun])}"
        indir, stem = ctx.pick(_MATCH_IN_DIRS), ctx.pick(_MATCH_IN_STEMS)
        outdir, out_stem = ctx.pick(_MATCH_OUT_DIRS), ctx.pick(_MATCH_OUT_STEMS)
        canon = sorted(rng.sample(_COMPANIES, 6 + 3 * level))
        files: dict[str, str | bytes] = {ref[len("/app/") :]: "\n".join(canon) + "\n"}
        pairs, truth = [], {}
        for f in range(1 if level < 4 else 2):
            names, want = [], []
            for _ in range(6 + 4 * level):
                if limit is not None and rng.random() < 0.15:
                    names.append(
                        "".join(rng.choice("qwxzjkvbp") for _ in range(rng.randint(10, 15)))
                    )
                    want.append("UNMATCHED")
                else:
                    c = rng.choice(canon)
                    names.append(_mangle(rng, c, rng.randint(0, 3)))
                    want.append(c)
            if limit is not None and "UNMATCHED" not in want:
                # at least one junk line per file, so the UNMATCHED rule shows in the fixture
                at = rng.randrange(len(names))
                names[at] = "".join(rng.choice("qwxzjkvbp") for _ in range(rng.randint(10, 15)))
                want[at] = "UNMATCHED"
            src = f"{indir}/{stem}_q{f + 1}.txt"
            files[src[len("/app/") :]] = "\n".join(names) + "\n"
            pairs.append([src, f"{outdir}/{out_stem}_q{f + 1}.tsv"])
            truth[src] = want
        lang = language_or_bash(ctx)
        prog = program_path(lang, ctx.pick(_MATCH_PROGRAMS))
        code = ctx.needs_code
        threshold = ctx.pick(_MATCH_BARS[level])
        cfg = {
            "level": level,
            "mode": mode,
            "limit": limit,
            "canon": ref,
            "outdir": outdir,
            "pairs": pairs,
            "truth": truth,
            "threshold": threshold,
            "lang": lang,
            "program": prog,
            "code": code,
            "pool": list(_COMPANIES),
            "fresh": {1: 4, 2: 6, 3: 8, 4: 10}[level],
        }
        ref_name = ref.rsplit("/", 1)[1]
        if mode == "exact":
            rule = (
                "compare names after normalising both sides (lowercase, drop every "
                "character other than a-z, 0-9 and space, collapse runs of spaces, trim) "
                "and pick the {noun} at the smallest Levenshtein distance (ties: the "
                f"alphabetically first {noun} as written in {ref_name})"
            ).replace("{noun}", noun)
            if limit is not None:
                rule += f"; when the best distance is above {limit}, write `UNMATCHED`"
        else:
            rule = (
                f"pick the {noun} each messy name refers to (names carry typos, case and "
                f"spacing noise); at least {threshold:.0%} of the lines must be right"
            )
            if limit is not None:
                rule += f"; some lines are junk that matches no {noun}, write `UNMATCHED` for those"
        srcs = ", ".join(f"`{s}`" for s, _ in pairs)
        column = noun.upper()
        asks = [
            f"for each input file ({srcs}) the matching `{outdir}/{out_stem}_qN.tsv`: one line "
            f"per non-empty input line, in order, `ORIGINAL<TAB>{column}` where ORIGINAL is "
            f"the input line as is; {rule}"
        ]
        if level >= 3:
            asks.append(
                f"`{outdir}/counts.txt`: `COUNT {column}` lines over all your matches "
                f"(UNMATCHED excluded), most first, ties by {noun} name"
            )
        if level >= 4:
            asks.append(
                f"`{outdir}/unmatched.txt`: the original names you marked UNMATCHED, "
                "sorted (byte order), one per line"
            )
            asks.append(f'`{outdir}/summary.json`: `{{"names": N, "matched": M}}`')
            asks.append(
                f"`{outdir}/checksums.sha256`: sha256sum lines for the .tsv files, "
                "counts.txt and unmatched.txt"
            )
        body = (
            rng.choice(_MATCH_OPENERS).format(noun=noun, ref=ref)
            + " Please produce:\n\n"
            + bullets(asks)
        )
        if code:
            body += (
                f"\n\nI want the matcher as a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`, run as `{prog} {column}S_FILE NAMES_FILE`, printing the "
                f"`ORIGINAL<TAB>{column}` lines to stdout. I will try it on other lists."
            )
        source = {"python": _MATCH_ORACLE + _MATCH_PY, "bash": _MATCH_BASH}[lang]
        source = source.replace("@LIMIT@", str(limit))
        tool = prog if code else "/tmp/match.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = [f"mkdir -p {outdir}", heredoc(tool, source)]
        for src, out in pairs:
            lines.append(f"{run} {ref} {src} > {out}")
        matches = f"{outdir}/{out_stem}_q*.tsv"
        if level >= 3:
            lines.append(
                f"cat {matches} | cut -f2 | grep -vx UNMATCHED | sort | "
                f"uniq -c | sort -k1,1nr -k2 | sed 's/^ *//' > {outdir}/counts.txt"
            )
        if level >= 4:
            lines.append(
                f"cat {matches} | awk -F'\\t' '$2 == \"UNMATCHED\" "
                f"{{print $1}}' | LC_ALL=C sort > {outdir}/unmatched.txt"
            )
            lines.append(f"names=$(cat {matches} | grep -c .)")
            lines.append(f"missing=$(grep -c . {outdir}/unmatched.txt || true)")
            lines.append(
                'printf \'{"names": %d, "matched": %d}\\n\' "$names" '
                f'"$((names - missing))" > {outdir}/summary.json'
            )
            tsvs = " ".join(o.rsplit("/", 1)[1] for _, o in pairs)
            lines.append(
                f"(cd {outdir} && sha256sum {tsvs} counts.txt unmatched.txt > checksums.sha256)"
            )
            lines.append(f"head -n 5 {outdir}/counts.txt")
            lines.append(f"cat {outdir}/summary.json")
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _MATCH_ORACLE + _MATCH_TESTS)},
            files=files,
        )
