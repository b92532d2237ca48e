"""Replay a key-value store's write-ahead journal (software_engineering.kv_journal)."""

from __future__ import annotations

import re

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
