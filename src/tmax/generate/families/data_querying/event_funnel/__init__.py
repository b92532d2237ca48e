"""Product-analytics questions over a JSON-lines clickstream."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    bullets,
    code_note,
    invoke,
    minimal_test_file,
    numbered,
    program_path,
    program_setup,
)
from tmax.generate.family import Draft, Family, RenderContext, register

_EVENTS_GEN = """
def make_events(rng, level, n_users, n_events):
    users = sorted(rng.sample(["u%03d" % i for i in range(1, 400)], n_users))
    kinds = ["search", "view", "view", "view", "cart", "cart", "purchase"]
    lines, ids = [], []
    for i in range(n_events):
        event = {"id": "e%05d" % (i + 1), "ts": 1700000000 + rng.randint(0, 86400 * 3),
                 "user": rng.choice(users), "event": rng.choice(kinds)}
        if event["event"] == "purchase":
            event["amount"] = rng.randint(1, 400) * 25
        if level >= 3 and rng.random() < 0.3:
            keys = list(event)
            rng.shuffle(keys)
            event = {k: event[k] for k in keys}
        lines.append(json.dumps(event))
        if level >= 3 and rng.random() < 0.08:
            lines.append(lines[-1])
    files = {"events.jsonl": "\\n".join(lines) + "\\n"}
    if level >= 4:
        countries = rng.sample(["de", "fr", "nl", "pl", "se", "es", "it"], 4)
        known = [u for u in users if rng.random() < 0.85]
        files["users.csv"] = "user,country\\n" + "".join(
            "%s,%s\\n" % (u, rng.choice(countries)) for u in known)
    return files


def load_events(files):
    seen, events = set(), []
    for line in files["events.jsonl"].splitlines():
        if line.strip():
            event = json.loads(line)
            if event["id"] not in seen:
                seen.add(event["id"])
                events.append(event)
    return events


def report_text(files, report, top_n=5):
    events = load_events(files)
    if report == "counts":
        n = {}
        for e in events:
            n[e["event"]] = n.get(e["event"], 0) + 1
        rows = sorted(n.items(), key=lambda kv: (-kv[1], kv[0]))
        return "event,count\\n" + "".join("%s,%d\\n" % r for r in rows)
    if report == "top_buyers":
        orders, revenue = {}, {}
        for e in events:
            if e["event"] == "purchase":
                orders[e["user"]] = orders.get(e["user"], 0) + 1
                revenue[e["user"]] = revenue.get(e["user"], 0) + e["amount"]
        rows = sorted(orders, key=lambda u: (-revenue[u], u))[:top_n]
        return "user,orders,revenue_cents\\n" + "".join(
            "%s,%d,%d\\n" % (u, orders[u], revenue[u]) for u in rows)
    if report == "funnel":
        steps, reached = ["view", "cart", "purchase"], [0, 0, 0]
        by_user = {}
        for e in events:
            by_user.setdefault(e["user"], []).append(e)
        for evs in by_user.values():
            stage, last = 0, None
            for e in sorted(evs, key=lambda e: e["ts"]):
                if stage < 3 and e["event"] == steps[stage] and (last is None or e["ts"] > last):
                    reached[stage] += 1
                    stage, last = stage + 1, e["ts"]
        return "step,users\\n" + "".join("%s,%d\\n" % p for p in zip(steps, reached))
    if report == "by_country":
        country = {}
        for line in files.get("users.csv", "").splitlines()[1:]:
            if line:
                user, where = line.split(",")
                country[user] = where
        users, buyers, revenue = {}, {}, {}
        for e in events:
            where = country.get(e["user"], "unknown")
            users.setdefault(where, set()).add(e["user"])
            if e["event"] == "purchase":
                buyers.setdefault(where, set()).add(e["user"])
                revenue[where] = revenue.get(where, 0) + e["amount"]
        rows = sorted(users, key=lambda c: (-revenue.get(c, 0), c))
        return "country,users,buyers,revenue_cents\\n" + "".join(
            "%s,%d,%d,%d\\n" % (c, len(users[c]), len(buyers.get(c, ())), revenue.get(c, 0))
            for c in rows)
    raise ValueError(report)
"""

_events_ns: dict = {"json": json}
exec(_EVENTS_GEN, _events_ns)

_EVENTS_REPORTS = ["counts", "top_buyers", "funnel", "by_country"]
# Drawn per task so that instructions differ in the names a real shop would pick.
_EVENTS_DATA_DIRS = ["data", "clickstream", "export", "tracking", "weblogs"]
_EVENTS_OUT_DIRS = ["out", "reports", "analytics", "results", "funnel"]
_EVENTS_PROGRAMS = ["events", "clicks", "shop_stats", "event_report"]
_EVENTS_OPENERS = [
    "Our web shop's clickstream export is in:",
    "The tracking export from our web shop has arrived:",
    "Here is the raw event log our web shop exported:",
    "I downloaded the visitor events of our online shop to:",
    "The shop's clickstream for the last few days is stored in:",
]

_EVENTS_PY = """import json
import os
import sys


def main():
    folder, report = sys.argv[1], sys.argv[2]
    seen, events = set(), []
    with open(os.path.join(folder, "events.jsonl")) as handle:
        for line in handle:
            if not line.strip():
                continue
            event = json.loads(line)
            if event["id"] in seen:
                continue
            seen.add(event["id"])
            events.append(event)
    if report == "counts":
        counts = {}
        for e in events:
            counts[e["event"]] = counts.get(e["event"], 0) + 1
        print("event,count")
        for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{name},{n}")
    elif report == "top_buyers":
        orders, revenue = {}, {}
        for e in events:
            if e["event"] == "purchase":
                orders[e["user"]] = orders.get(e["user"], 0) + 1
                revenue[e["user"]] = revenue.get(e["user"], 0) + int(e["amount"])
        print("user,orders,revenue_cents")
        for user in sorted(orders, key=lambda u: (-revenue[u], u))[:__TOP_N__]:
            print(f"{user},{orders[user]},{revenue[user]}")
    elif report == "funnel":
        steps, reached, per_user = ["view", "cart", "purchase"], [0, 0, 0], {}
        for e in events:
            per_user.setdefault(e["user"], []).append(e)
        for evs in per_user.values():
            stage, last = 0, None
            for e in sorted(evs, key=lambda e: e["ts"]):
                if stage < 3 and e["event"] == steps[stage] and (last is None or e["ts"] > last):
                    reached[stage] += 1
                    stage, last = stage + 1, e["ts"]
        print("step,users")
        for step, n in zip(steps, reached):
            print(f"{step},{n}")
    elif report == "by_country":
        country = {}
        path = os.path.join(folder, "users.csv")
        if os.path.exists(path):
            with open(path) as handle:
                for line in list(handle)[1:]:
                    if line.strip():
                        user, where = line.strip().split(",")
                        country[user] = where
        users, buyers, revenue = {}, {}, {}
        for e in events:
            where = country.get(e["user"], "unknown")
            users.setdefault(where, set()).add(e["user"])
            if e["event"] == "purchase":
                buyers.setdefault(where, set()).add(e["user"])
                revenue[where] = revenue.get(where, 0) + int(e["amount"])
        print("country,users,buyers,revenue_cents")
        for c in sorted(users, key=lambda c: (-revenue.get(c, 0), c)):
            print(f"{c},{len(users[c])},{len(buyers.get(c, ()))},{revenue.get(c, 0)}")
    else:
        sys.exit(f"unknown report {report}")


main()
"""

_EVENTS_SH = r"""#!/bin/bash
# Reports over <folder>/events.jsonl (and users.csv): events.sh <folder> <report>
export LC_ALL=C
dir=$1
report=$2
events() {
  jq -r '[.id, .ts, .user, .event, (.amount // 0)] | @tsv' "$dir/events.jsonl" \
    | awk -F'\t' '!seen[$1]++'
}
case "$report" in
  counts)
    echo "event,count"
    events | awk -F'\t' '{ n[$4]++ } END { for (e in n) print e "," n[e] }' \
      | sort -t, -k2,2nr -k1,1
    ;;
  top_buyers)
    echo "user,orders,revenue_cents"
    events | awk -F'\t' '$4 == "purchase" { o[$3]++; r[$3] += $5 }
      END { for (u in o) print u "," o[u] "," r[u] }' | sort -t, -k3,3nr -k1,1 | head -n __TOP_N__
    ;;
  funnel)
    echo "step,users"
    events | sort -t "$(printf '\t')" -k3,3 -k2,2n | awk -F'\t' '
      $3 != user { user = $3; stage = 0; t = -1 }
      stage == 0 && $4 == "view" { stage = 1; t = $2; a++; next }
      stage == 1 && $4 == "cart" && $2 > t { stage = 2; t = $2; b++; next }
      stage == 2 && $4 == "purchase" && $2 > t { stage = 3; c++ }
      END { print "view," a + 0; print "cart," b + 0; print "purchase," c + 0 }'
    ;;
  by_country)
    echo "country,users,buyers,revenue_cents"
    events | awk -F'\t' -v users="$dir/users.csv" '
      BEGIN {
        while ((getline line < users) > 0) if (k++ > 0) { split(line, f, ","); c[f[1]] = f[2] }
      }
      {
        w = ($3 in c) ? c[$3] : "unknown"
        if (!($3 in seen)) { seen[$3] = 1; nu[w]++ }
        if ($4 == "purchase") { rev[w] += $5; if (!($3 in bought)) { bought[$3] = 1; nb[w]++ } }
      }
      END { for (w in nu) print w "," nu[w] "," nb[w] + 0 "," rev[w] + 0 }' \
      | sort -t, -k4,4nr -k1,1
    ;;
  *)
    echo "unknown report $report" >&2
    exit 1
    ;;
esac
"""

_EVENTS_TESTS = """
HERE = os.path.dirname(__file__)


def pristine():
    files = {}
    for name in ("events.jsonl", "users.csv"):
        if os.path.exists(os.path.join(HERE, name)):
            files[name] = read(os.path.join(HERE, name))
    return files


def test_report_files():
    files = pristine()
    for report in CFG["reports"]:
        path = os.path.join(CFG["out_dir"], report + ".csv")
        want, got = report_text(files, report, CFG["top_n"]), read(path)
        assert got == want, f"{path}:\\nexpected:\\n{want}\\ngot:\\n{got}"


def test_program_on_fresh_logs():
    if not CFG["code"]:
        return
    for seed in range(CFG["cases"]):
        rng = random.Random(1000 + seed)
        files = make_events(rng, CFG["level"], rng.randint(3, 30), rng.randint(5, 160))
        folder = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        for report in CFG["reports"]:
            done = run_program([folder, report])
            assert done.returncode == 0, f"{report}: exit {done.returncode} {done.stderr[-800:]}"
            want = report_text(files, report, CFG["top_n"])
            assert done.stdout == want, f"{seed} {report}: want\\n{want}got\\n{done.stdout}"
"""


@register
class EventFunnel(Family):
    """Answer product-analytics questions over a JSON-lines clickstream: event counts, top
    buyers, an ordered view→cart→purchase funnel and revenue by country (joined from a
    users CSV); duplicates and shuffled keys from level 3. Code asks for a report tool
    fuzzed on fresh logs."""

    name = "data_querying.event_funnel"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("counts", (r"`/app/(?P<out>\w+)/counts\.csv`: header `event,count`",),
             (r'"reports": \["counts"', r'if report == "counts":', r"def test_report_files\(",
              r'"out_dir": "/app/{out}"', r'os\.path\.join\(CFG\["out_dir"\], report')),
        Rule("top_buyers", (r"`/app/\w+/top_buyers\.csv`: header `user,orders,revenue_cents`, "
                            r"the \(at most\) (?P<n>\d+) users with the highest purchase",),
             (r'"reports": \[[^\]]*"top_buyers"', r'if report == "top_buyers":',
              r'"top_n": {n}\b', r"\[:top_n\]"),
             levels=frozenset({2, 3, 4})),
        Rule("funnel", (r"`/app/\w+/funnel\.csv`: header `step,users`",),
             (r'"reports": \[[^\]]*"funnel"', r'if report == "funnel":'),
             levels=frozenset({3, 4})),
        Rule("dedupe_event_ids", (r"Count every event id once",),
             (r"lines\.append\(lines\[-1\]\)", r'if event\["id"\] not in seen:'),
             levels=frozenset({3, 4})),
        Rule("by_country", (r"`/app/\w+/by_country\.csv`: header",),
             (r'"reports": \[[^\]]*"by_country"', r'if report == "by_country":'),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_program_on_fresh_logs\(", r'"program": "{program}"'),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "export query results to CSV with header rows": "counts",
        "find duplicate keys that break expected uniqueness": "dedupe_event_ids",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        files = _events_ns["make_events"](rng, level, 6 + 5 * level, 25 + 35 * level)
        reports = _EVENTS_REPORTS[:level]
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        code = ctx.needs_code or fuzz
        data = f"/app/{rng.choice(_EVENTS_DATA_DIRS)}"
        out = f"/app/{rng.choice(_EVENTS_OUT_DIRS)}"
        top_n = rng.randint(3, 8)
        describe = {
            "counts": f"`{out}/counts.csv`: header `event,count`, one row per event type, "
            "most frequent first (ties in byte order of the event name)",
            "top_buyers": f"`{out}/top_buyers.csv`: header `user,orders,revenue_cents`, the "
            f"(at most) {top_n} users with the highest purchase revenue (sum of `amount`), ties by "
            "user id in byte order; orders = their number of purchase events",
            "funnel": f"`{out}/funnel.csv`: header `step,users`, rows `view`, `cart`, "
            "`purchase`: how many users viewed, how many of those later put something in "
            "the cart, and how many of those then purchased (each step strictly later in "
            "`ts` than the step before it, for the same user)",
            "by_country": f"`{out}/by_country.csv`: header "
            "`country,users,buyers,revenue_cents`, one row per country (users missing from "
            "users.csv count as `unknown`): distinct users with any event, distinct users "
            "with a purchase, purchase revenue; highest revenue first, ties by country",
        }
        inputs = [
            f"`{data}/events.jsonl`: one JSON object per line with `id`, `ts` (unix "
            "seconds), `user`, `event` and, for purchases, `amount` in cents"
        ]
        if level >= 4:
            inputs.append(f"`{data}/users.csv`: `user,country` for the users we know")
        text = (
            rng.choice(_EVENTS_OPENERS)
            + "\n\n"
            + bullets(inputs)
            + "\n\nI need these reports (plain CSV, no spaces, each ending with a newline):\n\n"
            + numbered(describe[r] for r in reports)
        )
        if level >= 3:
            text += (
                "\n\nThe export is messy: the exporter sometimes writes the same event twice "
                "(same `id`) and the key order varies. Count every event id once."
            )
        program = program_path(ctx.language, "/app/" + rng.choice(_EVENTS_PROGRAMS))
        if code:
            text += "\n\n" + code_note(
                ctx,
                program,
                f"called with a data folder (laid out like `{data}`) and a report name ("
                + ", ".join(f"`{r}`" for r in reports)
                + "), it prints exactly that report's CSV.",
            )
            if fuzz:
                text += " I will compare it against a reference on many random logs."
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/events.sh"
        body = (_EVENTS_PY if lang == "python" else _EVENTS_SH).replace("__TOP_N__", str(top_n))
        lines = [f"head -n 3 {data}/events.jsonl", f"mkdir -p {out}"]
        if level >= 3:
            lines += [
                f"wc -l {data}/events.jsonl",
                f"jq -r .id {data}/events.jsonl | sort | uniq -d | head",
            ]
        lines += program_setup(lang, source, body)
        run = invoke(lang, source)
        lines += [f"{run} {data} {r} > {out}/{r}.csv" for r in reports]
        if level >= 4:
            lines += [
                f"head -n 3 {data}/users.csv",
                f"jq -r .event {data}/events.jsonl | sort | uniq -c",
                f"cat {out}/funnel.csv {out}/by_country.csv",
                f"wc -l {out}/*.csv",
            ]
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "reports": reports,
            "out_dir": out,
            "top_n": top_n,
            "cases": (8 if fuzz else 3) + level,
        }
        tests = {"test_task.py": minimal_test_file(params, _EVENTS_GEN + _EVENTS_TESTS)}
        tests.update(files)
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files={f"{data[len('/app/') :]}/{name}": text_ for name, text_ in files.items()},
        )
