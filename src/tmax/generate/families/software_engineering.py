"""Task families of the software_engineering domain.

Families here ask for real programs: replaying a key-value journal (and serving the
result over a line protocol and HTTP), ordering a monorepo's builds, exact rational
arithmetic, and semantic-version resolution with a vendored library. Reference code is
written once as plain functions and pasted into tests and Python reference programs; the
task plumbing (test head, service frame, solution lines) comes from
:mod:`tmax.generate.builders`.
"""

from __future__ import annotations

import re
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    ANSWER_SERVER_FRAME,
    asked_program_language,
    build_step,
    bullets,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    service_ports,
    settings_lines,
    sha256_hex,
    start_python_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# =====================================================================================
# software_engineering.kv_journal
# =====================================================================================


def kv_op(state, parts, counters):
    """Apply one journal operation (already split into at most three fields)."""
    op, key = parts[0], parts[1] if len(parts) > 1 else ""
    arg = parts[2] if len(parts) > 2 else ""
    if op == "SET":
        state[key] = arg
    elif op == "DEL":
        state.pop(key, None)
    elif op == "INCR":
        current = state.get(key, "0")
        if not re.fullmatch(r"-?[0-9]+", current):
            counters["errors"] += 1
            return
        state[key] = str(int(current) + int(arg))
    elif op == "APPEND":
        state[key] = state.get(key, "") + arg
    else:
        return
    counters["applied"] += 1


def kv_replay(texts, level, snapshot=None):
    """Final state and counters after replaying journal texts in order."""
    state = dict(snapshot or {})
    counters = {"applied": 0, "errors": 0, "rolled_back": 0}
    for text in texts:
        pending = None
        for line in text.split("\n"):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split(" ", 2)
            if level >= 3 and parts[0] in ("BEGIN", "COMMIT", "ROLLBACK"):
                if parts[0] == "BEGIN":
                    pending = []
                elif parts[0] == "COMMIT":
                    for queued in pending or []:
                        kv_op(state, queued, counters)
                    pending = None
                else:
                    counters["rolled_back"] += 1
                    pending = None
                continue
            if pending is not None:
                pending.append(parts)
            else:
                kv_op(state, parts, counters)
        if pending is not None:
            counters["rolled_back"] += 1
    return state, counters


def kv_dump(state):
    return "".join(f"{k}={v}\n" for k, v in sorted(state.items()))


def kv_load(text):
    state = {}
    for line in text.split("\n"):
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            state[key] = value
    return state


def kv_stats(state, counters, level):
    out = f"applied {counters['applied']}\nerrors {counters['errors']}\n"
    if level >= 3:
        out += f"rolled_back {counters['rolled_back']}\n"
    return out + f"keys {len(state)}\n"


def kv_keys(rng, count):
    stems = ["user", "cart", "session", "feature", "quota", "order", "cache", "config"]
    tails = ["name", "count", "items", "flag", "owner", "limit", "status", "hits", "v2"]
    keys = set()
    while len(keys) < count:
        sep = rng.choice([":", ".", "_", "-"])
        keys.add(f"{rng.choice(stems)}{sep}{rng.randint(1, 99)}{sep}{rng.choice(tails)}")
    return sorted(keys)


def kv_journal(rng, keys, lines, level):
    """One journal segment: operations, comments and (level 3+) transactions."""
    words = ["alpha", "on", "off", "blue", "pending", "shipped", "eu-west", "x", "ok"]
    phrases = ["hello world", "two words", "a b c", "needs review", "  padded"]
    ops = ["SET", "DEL", "INCR"] + (["APPEND"] if level >= 2 else [])

    def one():
        op, key = rng.choice(ops), rng.choice(keys)
        if op == "SET":
            roll = rng.random()
            if roll < 0.4:
                value = str(rng.randint(-50, 500))
            elif roll < 0.75:
                value = rng.choice(words)
            else:
                value = rng.choice(phrases)
            return f"SET {key} {value}"
        if op == "DEL":
            return f"DEL {key}"
        if op == "INCR":
            return f"INCR {key} {rng.choice([1, 1, 2, 5, 10, -1, -3, 25])}"
        return f"APPEND {key} {rng.choice(['-x', '!', ' more', 'z'])}"

    out = []
    while len(out) < lines:
        roll = rng.random()
        if roll < 0.05:
            out.append(f"# checkpoint {rng.randint(1000, 9999)}")
        elif level >= 3 and roll < 0.17:
            out.append("BEGIN")
            out += [one() for _ in range(rng.randint(1, 4))]
            out.append("ROLLBACK" if rng.random() < 0.35 else "COMMIT")
        else:
            out.append(one())
    if level >= 3 and rng.random() < 0.5:
        out.append("BEGIN")
        out += [one() for _ in range(rng.randint(1, 2))]
    return "\n".join(out) + "\n"


_KV_PY = (
    """#!/usr/bin/env python3
\"\"\"Replay key-value journals given as arguments; print the final state (key=value, by key).

Counters go to standard error. At level 4 a first argument ending in .kv is a snapshot.\"\"\"
import re
import sys

LEVEL = @LEVEL@

"""
    + function_sources(kv_op, kv_replay, kv_dump, kv_load, kv_stats)
    + """


def main():
    paths = sys.argv[1:]
    snapshot = None
    if LEVEL >= 4 and paths and paths[0].endswith(".kv"):
        snapshot = kv_load(open(paths.pop(0), encoding="utf-8").read())
    texts = [open(p, encoding="utf-8").read() for p in paths]
    state, counters = kv_replay(texts, LEVEL, snapshot)
    sys.stdout.write(kv_dump(state))
    sys.stderr.write(kv_stats(state, counters, LEVEL))


if __name__ == "__main__":
    main()
"""
)

_KV_SH = r"""#!/bin/bash
# Replay key-value journals given as arguments; print the final state (key=value, by key).
# Counters go to standard error. At level 4 a first argument ending in .kv is a snapshot.
export LC_ALL=C
LEVEL=@LEVEL@
declare -A S=()
applied=0 errors=0 rolled=0

kv_op() {
  local line=$1 op rest key arg current
  op=${line%% *}
  rest=${line#* }
  key=${rest%% *}
  if [[ $rest == *" "* ]]; then arg=${rest#* }; else arg=""; fi
  case $op in
    SET) S[$key]=$arg ;;
    DEL) unset 'S[$key]' ;;
    INCR)
      current=${S[$key]-0}
      if [[ ! $current =~ ^-?[0-9]+$ ]]; then
        errors=$((errors + 1))
        return
      fi
      S[$key]=$((current + arg))
      ;;
    APPEND) S[$key]=${S[$key]-}$arg ;;
    *) return ;;
  esac
  applied=$((applied + 1))
}

if ((LEVEL >= 4)) && [[ ${1-} == *.kv ]]; then
  while IFS= read -r line || [[ -n $line ]]; do
    [[ -z $line || $line == \#* ]] && continue
    S[${line%%=*}]=${line#*=}
  done < "$1"
  shift
fi

for journal in "$@"; do
  intx=0
  pending=()
  while IFS= read -r line || [[ -n $line ]]; do
    [[ -z ${line// /} || $line == \#* ]] && continue
    word=${line%% *}
    if ((LEVEL >= 3)); then
      case $word in
        BEGIN) intx=1; pending=(); continue ;;
        COMMIT)
          for queued in "${pending[@]}"; do kv_op "$queued"; done
          intx=0; pending=(); continue ;;
        ROLLBACK) rolled=$((rolled + 1)); intx=0; pending=(); continue ;;
      esac
    fi
    if ((intx)); then pending+=("$line"); else kv_op "$line"; fi
  done < "$journal"
  if ((intx)); then rolled=$((rolled + 1)); fi
done

for key in "${!S[@]}"; do printf '%s=%s\n' "$key" "${S[$key]}"; done | sort -t= -k1,1
{
  echo "applied $applied"
  echo "errors $errors"
  if ((LEVEL >= 3)); then echo "rolled_back $rolled"; fi
  echo "keys ${#S[@]}"
} >&2
"""

_KV_C = r"""/* Replay key-value journals given as arguments; print the final state
   (key=value lines, by key). Counters go to standard error.
   At level 4 a first argument ending in .kv is a snapshot. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL @LEVEL@

typedef struct {
    char *key, *value;
} Entry;

static Entry *table;
static size_t used, room;
static long applied, errors, rolled;

static char *copy(const char *s) {
    char *out = malloc(strlen(s) + 1);
    strcpy(out, s);
    return out;
}

static long find(const char *key) {
    for (size_t i = 0; i < used; i++)
        if (!strcmp(table[i].key, key)) return (long)i;
    return -1;
}

static void put(const char *key, const char *value) {
    long i = find(key);
    char *fresh = copy(value);
    if (i >= 0) {
        free(table[i].value);
        table[i].value = fresh;
        return;
    }
    if (used == room) {
        room = room ? room * 2 : 64;
        table = realloc(table, room * sizeof *table);
    }
    table[used].key = copy(key);
    table[used++].value = fresh;
}

static void drop(const char *key) {
    long i = find(key);
    if (i < 0) return;
    free(table[i].key);
    free(table[i].value);
    table[i] = table[--used];
}

static int is_int(const char *s) {
    if (*s == '-') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

static void apply(char *line) {
    char *key = strchr(line, ' ');
    if (!key) return;
    *key++ = 0;
    char *arg = strchr(key, ' ');
    if (arg) *arg++ = 0;
    else arg = "";
    long i = find(key);
    if (!strcmp(line, "SET")) {
        put(key, arg);
    } else if (!strcmp(line, "DEL")) {
        drop(key);
    } else if (!strcmp(line, "INCR")) {
        const char *current = i >= 0 ? table[i].value : "0";
        if (!is_int(current)) {
            errors++;
            return;
        }
        char number[32];
        snprintf(number, sizeof number, "%lld", atoll(current) + atoll(arg));
        put(key, number);
    } else if (!strcmp(line, "APPEND")) {
        const char *current = i >= 0 ? table[i].value : "";
        char *joined = malloc(strlen(current) + strlen(arg) + 1);
        strcpy(joined, current);
        strcat(joined, arg);
        put(key, joined);
        free(joined);
    } else {
        return;
    }
    applied++;
}

static int by_key(const void *a, const void *b) {
    return strcmp(((const Entry *)a)->key, ((const Entry *)b)->key);
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ') return 0;
    return 1;
}

int main(int argc, char **argv) {
    static char line[65536];
    int first = 1;
    size_t n;
    if (LEVEL >= 4 && argc > 1 && (n = strlen(argv[1])) > 3 && !strcmp(argv[1] + n - 3, ".kv")) {
        FILE *in = fopen(argv[1], "r");
        if (!in) return perror(argv[1]), 1;
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = 0;
            if (!line[0] || line[0] == '#') continue;
            char *eq = strchr(line, '=');
            if (!eq) continue;
            *eq = 0;
            put(line, eq + 1);
        }
        fclose(in);
        first = 2;
    }
    for (int a = first; a < argc; a++) {
        FILE *in = fopen(argv[a], "r");
        if (!in) return perror(argv[a]), 1;
        char **pending = NULL;
        size_t count = 0;
        int intx = 0;
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = 0;
            if (blank(line) || line[0] == '#') continue;
            if (LEVEL >= 3 && !strcmp(line, "BEGIN")) {
                intx = 1;
                count = 0;
                continue;
            }
            if (LEVEL >= 3 && !strcmp(line, "COMMIT")) {
                for (size_t i = 0; i < count; i++) {
                    apply(pending[i]);
                    free(pending[i]);
                }
                intx = 0;
                count = 0;
                continue;
            }
            if (LEVEL >= 3 && !strcmp(line, "ROLLBACK")) {
                for (size_t i = 0; i < count; i++) free(pending[i]);
                rolled++;
                intx = 0;
                count = 0;
                continue;
            }
            if (intx) {
                pending = realloc(pending, (count + 1) * sizeof *pending);
                pending[count++] = copy(line);
            } else {
                apply(line);
            }
        }
        if (intx) rolled++;
        free(pending);
        fclose(in);
    }
    qsort(table, used, sizeof *table, by_key);
    for (size_t i = 0; i < used; i++) printf("%s=%s\n", table[i].key, table[i].value);
    fprintf(stderr, "applied %ld\nerrors %ld\n", applied, errors);
    if (LEVEL >= 3) fprintf(stderr, "rolled_back %ld\n", rolled);
    fprintf(stderr, "keys %zu\n", used);
    return 0;
}
"""


@register
class KvJournal(Family):
    """Replay a key-value store's write-ahead journal into its final state; levels add
    APPEND and error counters, transactions with rollback across rotated segments, and a
    snapshot plus already-folded segments with a change report. Code asks for a replay
    program fuzzed on fresh journals; services serve the state over a line protocol (and
    HTTP as well for multi_protocol)."""

    name = "software_engineering.kv_journal"
    domain = "software_engineering"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence", "multi_protocol"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    services = True
    rules = (
        Rule("inputs_untouched", (r"leave the files in `/app/data` as they are",),
             (r"def test_inputs_untouched\(",)),
        Rule("state_file", (r"`/app/out/state\.txt`: the final state, one `key=value` line",),
             (r"def test_state\(",)),
        Rule("set_rest_of_line", (r"`SET key value` sets key to value \(the value is the rest",),
             (r'parts = line\.split\(" ", 2\)',)),
        Rule("del_missing_ok", (r"`DEL key` removes key \(a missing key is fine\)",),
             (r"state\.pop\(key, None\)",)),
        Rule("incr_integers_only", (r"if the current value is not an integer .+? the operation "
                                    r"fails and changes nothing",),
             (r'if not re\.fullmatch\(r"-\?\[0-9\]\+", current\):',)),
        Rule("append_op", (r"`APPEND key text` appends text",), (r'elif op == "APPEND":',),
             levels=frozenset({2, 3, 4})),
        Rule("transactions", (r"`BEGIN` \.\.\. `COMMIT` groups operations",),
             (r'if level >= 3 and parts\[0\] in \("BEGIN", "COMMIT", "ROLLBACK"\):',),
             levels=frozenset({3, 4})),
        Rule("comments_ignored", (r"blank lines and lines starting with `#` are ignored",),
             (r'if not line\.strip\(\) or line\.startswith\("#"\):',)),
        Rule("stats_file", (r"`/app/out/stats\.txt`: the lines `applied A`",),
             (r"def test_stats\(",), levels=frozenset({2, 3, 4})),
        Rule("rolled_back_count", (r"`rolled_back R` \(groups discarded\)",),
             (r'out \+= f"rolled_back',), levels=frozenset({3, 4})),
        Rule("snapshot_start", (r"replaying them on top of the snapshot would apply them twice",),
             (r"snapshot = kv_load\(Path\(files\.pop\(0\)\)\.read_text\(\)\)",),
             levels=frozenset({4})),
        Rule("changed_file", (r"`/app/out/changed\.txt`: how the final state differs",),
             (r"def test_changed\(",), levels=frozenset({4})),
        Rule("program", (r"I also want the replay as a reusable program",),
             (r"def test_program_on_fresh_journals\(",), when={"code": True}),
        Rule("program_snapshot", (r"If the first argument ends in `\.kv` it is a snapshot",),
             (r"if LEVEL >= 4 and rng\.random\(\) < 0\.5:",), levels=frozenset({4}),
             when={"code": True}),
        Rule("line_service", (r"leave a server running on 127\.0\.0\.1 port \d+",),
             (r"def test_service\(",), when={"serve": True}),
        Rule("prefix_verb", (r"`PREFIX p` → the number of keys",), (r'requests \+= \[f"PREFIX',),
             levels=frozenset({2, 3, 4}), when={"serve": True}),
        Rule("http_api", (r"It must also speak HTTP on 127\.0\.0\.1 port \d+",),
             (r'if CFG\["http"\]:',), when={"http": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        serve = ctx.needs_service or ctx.verifier_kind == "multi_protocol"
        use_http = ctx.verifier_kind == "multi_protocol"
        keys = kv_keys(rng, {1: 8, 2: 12, 3: 16, 4: 20}[level])
        files: dict[str, str | bytes] = {}
        if level <= 2:
            names = ["journal.log"]
            texts = [kv_journal(rng, keys, 40 if level == 1 else 80, level)]
        else:
            count = 3 if level == 3 else 6
            names = [f"journal-{i:03d}.log" for i in range(count)]
            texts = [kv_journal(rng, keys, 45, level) for _ in names]
        for name, text in zip(names, texts, strict=True):
            files[f"data/{name}"] = text
        replay = [f"/app/data/{n}" for n in names]
        if level >= 4:
            base, _ = kv_replay(texts[:3], level)
            files["data/snapshot.kv"] = (
                "# snapshot of the store: state after journal-000.log .. journal-002.log\n"
                + kv_dump(base)
            )
            replay = ["/app/data/snapshot.kv", *replay[3:]]
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        ops = [
            "`SET key value` sets key to value (the value is the rest of the line and may "
            "contain spaces)",
            "`DEL key` removes key (a missing key is fine)",
            "`INCR key n` adds the integer n to the key's value (a missing key counts as 0); "
            "if the current value is not an integer (optional `-` and digits) the operation "
            "fails and changes nothing",
        ]
        if level >= 2:
            ops.append("`APPEND key text` appends text (a missing key counts as empty)")
        if level >= 3:
            ops.append(
                "`BEGIN` ... `COMMIT` groups operations that take effect only at COMMIT; "
                "`ROLLBACK` discards the group, and so does the end of a segment while a group "
                "is still open (the writer crashed)"
            )
        ops.append("blank lines and lines starting with `#` are ignored")
        if level <= 2:
            where = "Our little key-value store writes every operation to `/app/data/journal.log`."
        elif level == 3:
            where = (
                "Our little key-value store writes every operation to a journal rotated into "
                "segments: `/app/data/journal-000.log`, `journal-001.log`, `journal-002.log` "
                "(oldest first)."
            )
        else:
            where = (
                "Our little key-value store writes every operation to a journal rotated into "
                "segments `/app/data/journal-000.log` ... `journal-005.log` (oldest first). "
                "It also takes snapshots: `/app/data/snapshot.kv` (`key=value` lines; its "
                "comment says which segments it already contains). Old segments are kept for "
                "auditing only; replaying them on top of the snapshot would apply them twice."
            )
        deliverables = [
            "`/app/out/state.txt`: the final state, one `key=value` line per key, sorted by key "
            "in byte order."
        ]
        if level >= 2:
            extra = "`rolled_back R` (groups discarded), " if level >= 3 else ""
            deliverables.append(
                "`/app/out/stats.txt`: the lines `applied A` (operations that took effect, "
                "counting DEL of a missing key), `errors E` (failed INCRs), "
                + extra
                + "`keys K` (keys in the final state), in that order."
            )
        if level >= 4:
            deliverables.append(
                "`/app/out/changed.txt`: how the final state differs from the snapshot: "
                "`+ key` (new), `~ key` (value changed) or `- key` (deleted), sorted by key."
            )
        body = [
            where + " The operations are:\n" + bullets(ops),
            "The process died and I need to rebuild the data from the journal (leave the files "
            "in `/app/data` as they are). Please write:\n" + numbered(deliverables),
        ]
        program = None
        if language:
            program = program_path(language, "/app/kvreplay")
            snap = (
                " If the first argument ends in `.kv` it is a snapshot to start from instead of "
                "an empty store."
                if level >= 4
                else ""
            )
            body.append(
                "I also want the replay as a reusable program: it takes journal files as "
                "arguments (apply them in the order given, starting from an empty store) and "
                f"prints the final state in the state.txt format to standard output.{snap} "
                + program_sentence(language, program)
            )
        ports = service_ports(ctx)
        if serve:
            verbs = [
                "`GET key` → the value, or `(nil)` if the key does not exist",
                "`EXISTS key` → `1` or `0`",
                "`COUNT` → the number of keys",
            ]
            if level >= 2:
                verbs.append("`PREFIX p` → the number of keys that start with p")
            text = (
                "Until the store is fixed, other services must be able to read the rebuilt "
                f"data: leave a server running on 127.0.0.1 port {ports[0]} that reads "
                "newline-terminated requests (several per connection) and answers each with "
                "one line:\n" + bullets(verbs)
            )
            if use_http:
                text += (
                    f"\n\nIt must also speak HTTP on 127.0.0.1 port {ports[1]}: `GET /kv/<key>` "
                    'answers 200 with JSON `{"key": ..., "value": ...}` or 404 for a missing '
                    'key, and `GET /stats` answers `{"keys": K}`.'
                )
            body.append(text)
        instruction = "\n\n".join(body)

        steps = ["mkdir -p /app/out"]
        if level >= 3:
            steps += ["ls -l /app/data", "grep -c '^BEGIN' /app/data/*.log || true"]
        if level >= 4:
            steps.append("tail -n 3 /app/data/journal-005.log")
        if language:
            source = {"python": _KV_PY, "bash": _KV_SH, "c": _KV_C}[language]
            steps.append(program_step(language, program, source.replace("@LEVEL@", str(level))))
            steps.append(build_step(language, program))
            tool = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/kvreplay.sh", _KV_SH.replace("@LEVEL@", str(level))))
            tool = "bash /tmp/kvreplay.sh"
        steps.append("printf 'SET a 1\\nINCR a 2\\nSET b x y\\nDEL c\\n' > /tmp/smoke.log")
        steps.append(f'test "$({tool} /tmp/smoke.log 2>/dev/null)" = "$(printf \'a=3\\nb=x y\')"')
        if level >= 4:
            steps.append("head -n 1 /app/data/snapshot.kv")
        steps.append(f"{tool} {' '.join(replay)} > /app/out/state.txt 2> /tmp/stats.txt")
        if level >= 3:
            steps.append("wc -l /app/out/state.txt")
        if level >= 2:
            steps.append("cp /tmp/stats.txt /app/out/stats.txt")
        if level >= 4:
            steps.append(
                'awk -F= \'FILENAME == ARGV[1] { if ($0 ~ /^#/ || $0 == "") next;'
                " old[$1] = substr($0, length($1) + 2); next }"
                " { v = substr($0, length($1) + 2); seen[$1] = 1;"
                ' if (!($1 in old)) print "+ " $1; else if (old[$1] != v) print "~ " $1 }'
                ' END { for (k in old) if (!(k in seen)) print "- " k }\''
                " /app/data/snapshot.kv /app/out/state.txt | LC_ALL=C sort -k2,2"
                " > /app/out/changed.txt"
            )
            steps.append("cat /app/out/stats.txt")
        if serve:
            server = (
                "import re\n\n"
                + function_sources(kv_op, kv_replay, kv_load)
                + f"\n\nLEVEL = {level}\nFILES = {replay!r}\n"
                + f"PORTS = {(ports if use_http else (ports[0], None))!r}\n"
                + """SNAPSHOT = None
if FILES[0].endswith(".kv"):
    SNAPSHOT = kv_load(open(FILES[0]).read())
    FILES = FILES[1:]
STATE, _ = kv_replay([open(p).read() for p in FILES], LEVEL, SNAPSHOT)


def answer_line(request):
    verb, _, arg = request.partition(" ")
    if verb == "GET":
        return STATE.get(arg, "(nil)")
    if verb == "EXISTS":
        return "1" if arg in STATE else "0"
    if verb == "COUNT":
        return str(len(STATE))
    if verb == "PREFIX":
        return str(sum(1 for k in STATE if k.startswith(arg)))
    return "ERR"


def answer_http(path):
    if path == "/stats":
        return 200, {"keys": len(STATE)}
    if path.startswith("/kv/") and path[4:] in STATE:
        return 200, {"key": path[4:], "value": STATE[path[4:]]}
    return 404, {"error": "not found"}
"""
                + ANSWER_SERVER_FRAME
                + "\n\nserve(*PORTS)\n"
            )
            steps.append(heredoc("/app/kv_server.py", server))
            steps.append(start_python_service("/app/kv_server.py", ports[: 1 + use_http]))
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "replay": replay,
            "ports": list(ports),
            "serve": serve,
            "http": use_http,
            "cases": {1: 4, 2: 6, 3: 8, 4: 10}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(kv_op, kv_replay, kv_dump, kv_load, kv_stats, kv_keys, kv_journal)
            + "\n\n"
            + settings_lines(params)
            + _KV_TESTS
        )
        return Draft(
            instruction=instruction,
            solution=solution,
            tests={"test_task.py": tests},
            files=files,
            keep_agent_processes=serve,
        )


_KV_TESTS = """
LEVEL = CFG["level"]


def final_state():
    files = list(CFG["replay"])
    snapshot = None
    if files[0].endswith(".kv"):
        snapshot = kv_load(Path(files.pop(0)).read_text())
    return snapshot, kv_replay([Path(f).read_text() for f in files], LEVEL, snapshot)


SNAPSHOT, (STATE, COUNTERS) = final_state()


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_state():
    assert read("/app/out/state.txt") == kv_dump(STATE), "state.txt is not the replayed state"


def test_stats():
    if CFG["level"] >= 2:
        want = kv_stats(STATE, COUNTERS, LEVEL)
        assert read("/app/out/stats.txt") == want, "stats.txt is wrong"


def test_changed():
    if CFG["level"] >= 4:
        rows = []
        for key in sorted(set(SNAPSHOT) | set(STATE)):
            if key not in SNAPSHOT:
                rows.append(f"+ {key}\\n")
            elif key not in STATE:
                rows.append(f"- {key}\\n")
            elif SNAPSHOT[key] != STATE[key]:
                rows.append(f"~ {key}\\n")
        assert read("/app/out/changed.txt") == "".join(rows), "changed.txt is wrong"


def test_program_on_fresh_journals(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1234)
    for case in range(CFG["cases"]):
        keys = kv_keys(rng, rng.randint(3, 12))
        texts = [kv_journal(rng, keys, rng.randint(5, 60), LEVEL) for _ in range(rng.randint(1, 3))]
        paths = []
        snapshot = None
        if LEVEL >= 4 and rng.random() < 0.5:
            snapshot, _ = kv_replay([kv_journal(rng, keys, 20, LEVEL)], LEVEL)
            snap = tmp_path / f"c{case}.kv"
            snap.write_text("# snapshot\\n" + kv_dump(snapshot))
            paths.append(snap)
        for i, text in enumerate(texts):
            path = tmp_path / f"c{case}-{i}.log"
            path.write_text(text)
            paths.append(path)
        done = run(paths)
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]}"
        expected = kv_dump(kv_replay(texts, LEVEL, snapshot)[0])
        assert done.stdout == expected, (
            f"case {case} ({[p.name for p in paths]}): wrong state\\n--- got\\n{done.stdout[:600]}"
            f"\\n--- expected\\n{expected[:600]}"
        )


def test_service():
    if not CFG["serve"]:
        return
    rng = random.Random(5)
    keys = sorted(STATE)
    probe = rng.sample(keys, min(6, len(keys))) + ["no:such:key"]
    requests = [f"GET {k}" for k in probe] + [f"EXISTS {k}" for k in probe] + ["COUNT"]
    if CFG["level"] >= 2:
        requests += [f"PREFIX {k[:5]}" for k in probe[:3]]
    replies = ask_lines(CFG["ports"][0], requests)
    for request, reply in zip(requests, replies):
        verb, _, arg = request.partition(" ")
        if verb == "GET":
            want = STATE.get(arg, "(nil)")
        elif verb == "EXISTS":
            want = "1" if arg in STATE else "0"
        elif verb == "COUNT":
            want = str(len(STATE))
        else:
            want = str(sum(1 for k in STATE if k.startswith(arg)))
        assert reply == want, f"{request!r} answered {reply!r}, expected {want!r}"
    if CFG["http"]:
        for key in probe:
            status, body = http_get(CFG["ports"][1], "/kv/" + key)
            if key in STATE:
                assert status == 200, f"GET /kv/{key}: HTTP {status}"
                assert json.loads(body).get("value") == STATE[key], f"GET /kv/{key}: {body}"
            else:
                assert status == 404, f"GET /kv/{key} for a missing key: HTTP {status}"
        status, body = http_get(CFG["ports"][1], "/stats")
        assert status == 200 and json.loads(body).get("keys") == len(STATE), f"/stats: {body}"
"""


# =====================================================================================
# software_engineering.build_order
# =====================================================================================

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


# =====================================================================================
# software_engineering.rational_calc
# =====================================================================================


def rc_eval(text, limit=None):
    """Exact value of an expression as `p/q` / `p`, "ERROR" on division by zero.

    Values are (numerator, denominator) pairs in lowest terms with a positive denominator.
    With ``limit``, raise OverflowError when an intermediate value outgrows it."""
    import math

    tokens, i = [], 0
    while i < len(text):
        if text[i] == " ":
            i += 1
        elif text[i].isdigit():
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            tokens.append(text[i:j])
            i = j
        else:
            tokens.append(text[i])
            i += 1
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take():
        pos[0] += 1
        return tokens[pos[0] - 1]

    def make(n, d):
        if d == 0:
            raise ZeroDivisionError
        if d < 0:
            n, d = -n, -d
        g = math.gcd(n, d)
        n, d = n // g, d // g
        if limit and (abs(n) > limit or d > limit):
            raise OverflowError(text)
        return n, d

    def expr():
        a, b = term()
        while peek() in ("+", "-"):
            op, (c, d) = take(), term()
            a, b = make(a * d + c * b if op == "+" else a * d - c * b, b * d)
        return a, b

    def term():
        a, b = unary()
        while peek() in ("*", "/"):
            op, (c, d) = take(), unary()
            a, b = make(a * c, b * d) if op == "*" else make(a * d, b * c)
        return a, b

    def unary():
        if peek() == "-":
            take()
            a, b = unary()
            return -a, b
        return power()

    def power():
        a, b = atom()
        if peek() == "^":
            take()
            sign = -1 if peek() == "-" else 1
            if sign < 0:
                take()
            exponent = int(take())
            if sign < 0:
                a, b = make(b, a)
            return make(a**exponent, b**exponent)
        return a, b

    def atom():
        token = take()
        if token == "(":
            value = expr()
            take()
            return value
        return make(int(token), 1)

    try:
        n, d = expr()
    except ZeroDivisionError:
        return "ERROR"
    return str(n) if d == 1 else f"{n}/{d}"


def rc_expression(rng, level):
    """A random expression of the grammar of ``level`` whose values stay small."""

    def operand(depth):
        roll = rng.random()
        if level >= 2 and depth < 2 and roll < 0.25:
            text = "(" + chain(depth + 1) + ")"
        else:
            text = str(rng.randint(0, 30) if rng.random() < 0.9 else rng.randint(31, 999))
        if level >= 4 and rng.random() < 0.2:
            text += "^" + rng.choice(["2", "3", "1", "-1", "-2"])
        if level >= 3 and rng.random() < 0.15:
            text = "-" + text
        return text

    def chain(depth):
        count = rng.randint(2, 3 if depth else (4 if level == 1 else 5))
        parts = [operand(depth)]
        for _ in range(count - 1):
            parts += [rng.choice("+-*/"), operand(depth)]
        gap = rng.choice([" ", " ", ""])
        return gap.join(parts)

    while True:
        text = chain(0)
        try:
            rc_eval(text, 10**6)
        except OverflowError:
            continue
        return text


_RC_PY = (
    """#!/usr/bin/env python3
\"\"\"Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR.\"\"\"
import sys

"""
    + function_sources(rc_eval)
    + """


def main():
    for line in sys.stdin.read().splitlines():
        print(rc_eval(line))


if __name__ == "__main__":
    main()
"""
)

_RC_SH = r"""#!/bin/bash
# Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR.
export LC_ALL=C

norm() {  # reduce N/D, sign on N
  local a b t
  if ((D < 0)); then N=$((-N)); D=$((-D)); fi
  a=${N#-} b=$D
  while ((b)); do t=$((a % b)); a=$b; b=$t; done
  if ((a > 1)); then N=$((N / a)); D=$((D / a)); fi
}

expr() {
  term || return 1
  local n=$N d=$D op
  while [[ ${T[P]-} == [-+] ]]; do
    op=${T[P]}; P=$((P + 1))
    term || return 1
    if [[ $op == + ]]; then N=$((n * D + N * d)); else N=$((n * D - N * d)); fi
    D=$((d * D)); norm
    n=$N d=$D
  done
  N=$n D=$d
}

term() {
  unary || return 1
  local n=$N d=$D op
  while [[ ${T[P]-} == [*/] ]]; do
    op=${T[P]}; P=$((P + 1))
    unary || return 1
    if [[ $op == '*' ]]; then
      N=$((n * N)); D=$((d * D))
    else
      ((N == 0)) && return 1
      local nn=$((n * D)) dd=$((d * N))
      N=$nn D=$dd
    fi
    norm
    n=$N d=$D
  done
  N=$n D=$d
}

unary() {
  if [[ ${T[P]-} == - ]]; then
    P=$((P + 1))
    unary || return 1
    N=$((-N))
    return 0
  fi
  power
}

power() {
  atom || return 1
  [[ ${T[P]-} == '^' ]] || return 0
  P=$((P + 1))
  local sign=1 e k bn bd
  if [[ ${T[P]-} == - ]]; then sign=-1; P=$((P + 1)); fi
  e=$((10#${T[P]})); P=$((P + 1))
  if ((sign < 0)); then
    ((N == 0)) && return 1
    bn=$D bd=$N
  else
    bn=$N bd=$D
  fi
  N=1 D=1
  for ((k = 0; k < e; k++)); do N=$((N * bn)); D=$((D * bd)); done
  norm
}

atom() {
  if [[ ${T[P]-} == '(' ]]; then
    P=$((P + 1))
    expr || return 1
    P=$((P + 1))
    return 0
  fi
  N=$((10#${T[P]})) D=1
  P=$((P + 1))
}

while IFS= read -r line || [[ -n $line ]]; do
  T=()
  rest=$line
  while [[ -n $rest ]]; do
    if [[ $rest =~ ^[0-9]+ ]]; then
      T+=("${BASH_REMATCH[0]}")
      rest=${rest:${#BASH_REMATCH[0]}}
    else
      [[ ${rest:0:1} != " " ]] && T+=("${rest:0:1}")
      rest=${rest:1}
    fi
  done
  P=0
  if expr; then
    if ((D == 1)); then echo "$N"; else echo "$N/$D"; fi
  else
    echo ERROR
  fi
done
"""

_RC_C = r"""/* Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    long long n, d;
} Q;

static const char *s;
static int failed;

static long long gcd(long long a, long long b) {
    if (a < 0) a = -a;
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static Q norm(long long n, long long d) {
    if (d < 0) n = -n, d = -d;
    long long g = gcd(n, d);
    if (g > 1) n /= g, d /= g;
    return (Q){n, d};
}

static void skip(void) {
    while (*s == ' ') s++;
}

static Q expr(void);

static Q atom(void) {
    skip();
    if (*s == '(') {
        s++;
        Q v = expr();
        skip();
        if (*s == ')') s++;
        return v;
    }
    long long v = 0;
    while (isdigit((unsigned char)*s)) v = v * 10 + (*s++ - '0');
    return (Q){v, 1};
}

static Q power(void) {
    Q base = atom();
    skip();
    if (*s != '^') return base;
    s++;
    skip();
    int sign = 1;
    if (*s == '-') sign = -1, s++;
    skip();
    long long e = 0;
    while (isdigit((unsigned char)*s)) e = e * 10 + (*s++ - '0');
    if (sign < 0) {
        if (base.n == 0) {
            failed = 1;
            return base;
        }
        base = norm(base.d, base.n);
    }
    Q out = {1, 1};
    for (long long k = 0; k < e; k++) out.n *= base.n, out.d *= base.d;
    return norm(out.n, out.d);
}

static Q unary(void) {
    skip();
    if (*s == '-') {
        s++;
        Q v = unary();
        v.n = -v.n;
        return v;
    }
    return power();
}

static Q term(void) {
    Q v = unary();
    for (;;) {
        skip();
        char op = *s;
        if (op != '*' && op != '/') return v;
        s++;
        Q r = unary();
        if (op == '*') {
            v = norm(v.n * r.n, v.d * r.d);
        } else {
            if (r.n == 0) {
                failed = 1;
                return v;
            }
            v = norm(v.n * r.d, v.d * r.n);
        }
    }
}

static Q expr(void) {
    Q v = term();
    for (;;) {
        skip();
        char op = *s;
        if (op != '+' && op != '-') return v;
        s++;
        Q r = term();
        long long n = op == '+' ? v.n * r.d + r.n * v.d : v.n * r.d - r.n * v.d;
        v = norm(n, v.d * r.d);
    }
}

int main(void) {
    static char line[65536];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        s = line;
        failed = 0;
        Q v = expr();
        if (failed) puts("ERROR");
        else if (v.d == 1) printf("%lld\n", v.n);
        else printf("%lld/%lld\n", v.n, v.d);
    }
    return 0;
}
"""


RC_OUT_DIRS = ("/app/out", "/app/exact", "/app/answers", "/app/calc_out")
RC_INPUT_DIRS = ("input", "incoming", "formulas", "queue")
RC_EXPR_FILES = ("exprs.txt", "expressions.txt", "lines.txt", "prices.txt")
RC_BATCH_PREFIXES = ("batch", "chunk", "part", "run")
RC_RESULT_FILES = ("results.txt", "values.txt", "exact.txt")
RC_ERROR_FILES = ("errors.txt", "failures.txt", "div_zero.txt")
RC_EXTREME_FILES = ("extremes.txt", "range.txt", "bounds.txt")
RC_SUMMARY_FILES = ("summary.json", "stats.json", "report.json")
RC_PROGRAMS = ("/app/ratcalc", "/app/exactcalc", "/app/fraccalc", "/app/rational")
RC_OPENERS = (
    "Our pricing engine kept drifting by fractions of a cent because it used floats, so "
    "we're moving to exact arithmetic.",
    "Floating-point rounding keeps making our price calculations disagree by tiny amounts, "
    "so from now on every formula gets evaluated exactly.",
    "We're taking float maths out of the code that computes our prices and charges: every "
    "result has to be an exact fraction from now on.",
    "A few totals came out a fraction of a cent off because the formulas were evaluated with "
    "floats; we want exact rational results instead.",
)
RC_CALLERS = ("Our pricing engine", "Our billing code", "The pricing service", "Our backend")
RC_ASKS = ("Please produce", "I need these files", "Write the following", "We need these outputs")


def _renamer(names: dict[str, str]):
    """Replace each default name by the drawn one in one pass (no chained replacements)."""
    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: names[m.group(0)], text)


@register
class RationalCalc(Family):
    """Evaluate arithmetic expressions exactly as fractions in lowest terms; levels widen
    the grammar (parentheses, unary minus, integer powers) and add batches, error
    locations, extremes and a JSON summary. Code asks for a reusable calculator program that
    the tests fuzz against an exact oracle."""

    name = "software_engineering.rational_calc"
    domain = "software_engineering"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"leave `(?P<inp>/app/\w+)` as it is",),
             (r"def test_inputs_untouched\(", r'Path\("{inp}"\) / _name')),
        Rule("operators_precedence", (r"the operators `\+ - \* /` with the usual precedence",),
             (r'while peek\(\) in \("\*", "/"\):',)),
        Rule("spaces_optional", (r"spaces may appear between tokens or not",),
             (r'if text\[i\] == " ":',)),
        Rule("parentheses", (r"\n- parentheses\n",), (r'if token == "\(":',),
             levels=frozenset({2, 3, 4})),
        Rule("unary_minus", (r"unary minus, as in `-3`",), (r"return -a, b",),
             levels=frozenset({3, 4})),
        Rule("power", (r"`\^` with an integer exponent .+? so `-2\^2` is -4",),
             (r'if peek\(\) == "\^":',), levels=frozenset({4})),
        Rule("lowest_terms", (r"print it as `p/q` in lowest terms with q > 1 and the sign on p, "
                              r"or as the integer `p` when the value is whole",),
             (r"g = math\.gcd\(n, d\)", r'return str\(n\) if d == 1 else')),
        Rule("division_by_zero", (r"Dividing by zero anywhere .*?makes that line's result "
                                  r"`ERROR`",),
             (r'except ZeroDivisionError:\s+return "ERROR"',)),
        Rule("zero_base_negative_exponent", (r"including a zero base with a negative exponent",),
             (r"a, b = make\(b, a\)",), levels=frozenset({4})),
        Rule("results_file", (r"`(?P<out>/app/\w+)/(?P<res>\w+\.txt)`: the result of each "
                              r"expression",),
             (r'read\("{out}/{res}"\)',), levels=frozenset({1, 2})),
        Rule("batch_results", (r"`(?P<out>/app/\w+)/\w+-N\.txt` for each input batch",),
             (r'read\(f"{out}/\{{name\}}"\)',), levels=frozenset({3, 4})),
        Rule("errors_file", (r"`(?P<out>/app/\w+)/(?P<err>\w+\.txt)`: one `FILE:LINE` per "
                             r"ERROR result",),
             (r'read\("{out}/{err}"\)',), levels=frozenset({3, 4})),
        Rule("extremes", (r"`(?P<out>/app/\w+)/(?P<ext>\w+\.txt)`: two lines, `max V` and "
                          r"`min V`",),
             (r"def test_extremes\(", r'read\("{out}/{ext}"\)'), levels=frozenset({2, 3, 4})),
        Rule("summary", (r"`(?P<out>/app/\w+)/(?P<sum>\w+\.json)`: `expressions`",),
             (r"def test_summary\(", r'json\.loads\(read\("{out}/{sum}"\)\)'),
             levels=frozenset({4})),
        Rule("program", (r"will call a calculator program",),
             (r"def test_calculator_on_fresh_expressions\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[dict[str, str]] = {
        "implement rational number arithmetic with automatic normalization": "lowest_terms",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        out, in_dir, expr_file, prefix, res_file, err_file, ext_file, sum_file = (
            rng.choice(options)
            for options in (
                RC_OUT_DIRS,
                RC_INPUT_DIRS,
                RC_EXPR_FILES,
                RC_BATCH_PREFIXES,
                RC_RESULT_FILES,
                RC_ERROR_FILES,
                RC_EXTREME_FILES,
                RC_SUMMARY_FILES,
            )
        )
        stem, opener, caller, ask = (
            rng.choice(options) for options in (RC_PROGRAMS, RC_OPENERS, RC_CALLERS, RC_ASKS)
        )
        files: dict[str, str | bytes] = {}
        if level <= 2:
            inputs = [expr_file]
            sizes = [20 if level == 1 else 30]
        else:
            inputs = [f"{prefix}-{i}.txt" for i in range(1, 4 if level == 3 else 5)]
            sizes = [20] * len(inputs)
        exprs = [[rc_expression(rng, level) for _ in range(size)] for size in sizes]
        # random expressions often divide by nothing that is zero: plant one that does
        zero = f"{rng.randint(1, 30)} / 0" if level < 4 else f"{rng.randint(1, 30)} + 0^-1"
        exprs[rng.randrange(len(exprs))].insert(rng.randint(0, sizes[0]), zero)
        for name, lines in zip(inputs, exprs, strict=True):
            files[f"{in_dir}/{name}"] = "\n".join(lines) + "\n"
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        grammar = [
            "non-negative integer literals and the operators `+ - * /` with the usual "
            "precedence (`*` and `/` before `+` and `-`, otherwise left to right); spaces may "
            "appear between tokens or not"
        ]
        if level >= 2:
            grammar.append("parentheses")
        if level >= 3:
            grammar.append("unary minus, as in `-3`, `-(1+2)` or `2 * -3`")
        if level >= 4:
            grammar.append(
                "`^` with an integer exponent written as a literal, possibly negative (`x^2`, "
                "`(1/2)^-3`); it binds tighter than unary minus, so `-2^2` is -4"
            )
        where = (
            f"`/app/{in_dir}/{expr_file}` has one expression per line."
            if level <= 2
            else f"The expressions come in batches, `/app/{in_dir}/{prefix}-1.txt` ... "
            f"`{prefix}-{len(inputs)}.txt`, one per line."
        )
        body = [
            f"{opener} {where} Expressions use:\n"
            + bullets(grammar)
            + "\n\nA result is exact: print it as `p/q` in lowest terms with q > 1 and the sign "
            "on p, or as the integer `p` when the value is whole. Dividing by zero anywhere "
            + ("(including a zero base with a negative exponent) " if level >= 4 else "")
            + "makes that line's result `ERROR`."
        ]
        deliverables = []
        if level <= 2:
            deliverables.append(f"`{out}/{res_file}`: the result of each expression, line by line.")
        else:
            deliverables.append(
                f"`{out}/{prefix}-N.txt` for each input batch: the result of each of its "
                "expressions, line by line."
            )
            deliverables.append(
                f"`{out}/{err_file}`: one `FILE:LINE` per ERROR result (FILE is the batch "
                "file name, LINE 1-based), batches in order."
            )
        if level >= 2:
            deliverables.append(
                f"`{out}/{ext_file}`: two lines, `max V` and `min V`, the largest and "
                "smallest results (ERROR lines excluded), written like the results."
            )
        if level >= 4:
            deliverables.append(
                f"`{out}/{sum_file}`: `expressions` (all lines), `errors`, `integers` "
                "(results that are whole numbers) and `max` / `min` (as strings like in "
                f"{ext_file})."
            )
        body.append(f"{ask} (leave `/app/{in_dir}` as it is):\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, stem)
            body.append(
                f"{caller} will call a calculator program: it reads expressions from standard "
                "input, one per line, and prints one result line for each. "
                + program_sentence(language, program)
                + " It will be compared with our reference on many expressions it has not seen."
            )
        instruction = "\n\n".join(body)

        # the reference steps and the tests are written for the default names
        named = _renamer(
            {
                "/app/out": out,
                "/app/input": f"/app/{in_dir}",
                "results.txt": res_file,
                "errors.txt": err_file,
                "extremes.txt": ext_file,
                "summary.json": sum_file,
            }
        )
        steps = ["mkdir -p /app/out"]
        if language:
            source = {"python": _RC_PY, "bash": _RC_SH, "c": _RC_C}[language]
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            calc = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/ratcalc.sh", _RC_SH))
            calc = "bash /tmp/ratcalc.sh"
        steps.append(f"test \"$(echo '1/2 + 1/3 * 2' | {calc})\" = 7/6")
        if level <= 2:
            steps.append(f"{calc} < /app/input/{expr_file} > /app/out/results.txt")
            outputs = ["/app/out/results.txt"]
        else:
            outputs = []
            for name in inputs:
                steps.append(f"{calc} < /app/input/{name} > /app/out/{name}")
                outputs.append(f"/app/out/{name}")
            numbers = " ".join(str(i) for i in range(1, len(inputs) + 1))
            steps.append(
                f"for b in {numbers}; do awk -v f={prefix}-$b.txt"
                ' \'$0 == "ERROR" {print f ":" NR}\''
                f" /app/out/{prefix}-$b.txt; done > /app/out/errors.txt"
            )
        if level >= 2:
            steps.append(f"cat {' '.join(outputs)} > /tmp/all_results.txt")
            steps.append(
                'awk -F/ \'$0 != "ERROR" {n = $1 + 0; d = (NF > 1) ? $2 + 0 : 1;'
                " if (!seen || n * bd > bn * d) {bn = n; bd = d; big = $0}"
                " if (!seen || n * sd < sn * d) {sn = n; sd = d; small = $0} seen = 1}"
                ' END {print "max " big; print "min " small}\' /tmp/all_results.txt'
                " > /app/out/extremes.txt"
            )
        if level >= 4:
            steps += [
                "total=$(wc -l < /tmp/all_results.txt)",
                "errors=$(grep -c '^ERROR$' /tmp/all_results.txt || true)",
                "integers=$(grep -c '^-*[0-9][0-9]*$' /tmp/all_results.txt || true)",
                "max=$(awk '$1 == \"max\" {print $2}' /app/out/extremes.txt)",
                "min=$(awk '$1 == \"min\" {print $2}' /app/out/extremes.txt)",
                'printf \'{"expressions": %d, "errors": %d, "integers": %d, "max": "%s",'
                ' "min": "%s"}\\n\' "$total" "$errors" "$integers" "$max" "$min"'
                " > /app/out/summary.json",
            ]
        solution = named("\n".join(s for s in steps if s))

        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "inputs": inputs,
            "fuzz": {1: 40, 2: 80, 3: 120, 4: 160}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(rc_eval, rc_expression)
            + "\n\n"
            + settings_lines(params)
            + named(_RC_TESTS)
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_RC_TESTS = """
from fractions import Fraction

LEVEL = CFG["level"]
RESULTS = {}
for _name in CFG["inputs"]:
    _path = Path("/app/input") / _name
    RESULTS[_name] = [rc_eval(e) for e in _path.read_text().splitlines()] if _path.is_file() else []


def lines(items):
    return "".join(f"{i}\\n" for i in items)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_results():
    if LEVEL <= 2:
        (only,) = RESULTS.values()
        assert read("/app/out/results.txt") == lines(only), "results.txt is wrong"
        return
    for name, results in RESULTS.items():
        assert read(f"/app/out/{name}") == lines(results), f"/app/out/{name} is wrong"
    errors = [f"{n}:{i}" for n, rs in RESULTS.items() for i, r in enumerate(rs, 1) if r == "ERROR"]
    assert read("/app/out/errors.txt") == lines(errors), "errors.txt is wrong"


def good():
    return [r for rs in RESULTS.values() for r in rs if r != "ERROR"]


def test_extremes():
    if CFG["level"] >= 2:
        values = good()
        big, small = max(values, key=Fraction), min(values, key=Fraction)
        want = f"max {big}\\nmin {small}\\n"
        assert read("/app/out/extremes.txt") == want, "extremes.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        values = good()
        everything = [r for rs in RESULTS.values() for r in rs]
        want = {
            "expressions": len(everything),
            "errors": everything.count("ERROR"),
            "integers": sum("/" not in v for v in values),
            "max": max(values, key=Fraction),
            "min": min(values, key=Fraction),
        }
        data = json.loads(read("/app/out/summary.json"))
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_calculator_on_fresh_expressions():
    if not CFG["code"]:
        return
    rng = random.Random(65537)
    exprs = [rc_expression(rng, LEVEL) for _ in range(CFG["fuzz"])]
    exprs += ["7", "1/0", "0/5", "6/4", "10 / 4 * 2 - 5"]
    if CFG["level"] >= 4:
        exprs += ["2 - 0^-1", "(1/2)^-3"]
    done = run([], stdin=lines(exprs))
    assert done.returncode == 0, f"the calculator failed: {done.stderr[-1500:]}"
    got = done.stdout.splitlines()
    want = [rc_eval(e) for e in exprs]
    assert len(got) == len(exprs), f"{len(got)} result lines for {len(exprs)} expressions"
    wrong = [(e, g, w) for e, g, w in zip(exprs, got, want) if g.strip() != w]
    assert not wrong, f"{len(wrong)} wrong results (expression, got, expected): {wrong[:5]}"
"""


# =====================================================================================
# software_engineering.semver_pick (text_only or a vendored library to fix)
# =====================================================================================


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
        named = _renamer(
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
