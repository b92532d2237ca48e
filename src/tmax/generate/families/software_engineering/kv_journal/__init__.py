"""Replay a key-value store's write-ahead journal (software_engineering.kv_journal).

The task's files are the templates beside this module: the reference replay in
Python, Bash and C is ``solution/kvreplay.*``, the line and HTTP service
``solution/kv_server.py``; the reference functions below are pasted into both
the Python programs and the tests."""

from __future__ import annotations

import re

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    ANSWER_SERVER_FRAME,
    asked_program_language,
    fixture_test_head,
    function_sources,
    invoke,
    program_path,
    program_sentence,
    service_ports,
    settings_lines,
    sha256_hex,
    start_python_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


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
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}
        program = program_path(language, "/app/kvreplay") if language else None
        ports = service_ports(ctx)
        folder = templates(__name__)
        extension = {"python": "py", "bash": "sh", "c": "c"}[language or "bash"]
        source = folder.render(
            f"solution/kvreplay.{extension}",
            level=level,
            functions=function_sources(kv_op, kv_replay, kv_dump, kv_load, kv_stats),
        )
        values = {
            "level": level,
            "language": language,
            "serve": serve,
            "http": use_http,
            "ports": ports,
            "replay": replay,
            "program": program,
            "program_dir": program.rsplit("/", 1)[0] if program else None,
            "program_sentence": program_sentence(language, program) if language else None,
            "source": source.strip(),
            "tool": invoke(language, program) if language else "bash /tmp/kvreplay.sh",
        }
        if serve:
            values["server"] = folder.render(
                "solution/kv_server.py",
                functions=function_sources(kv_op, kv_replay, kv_load),
                level=level,
                replay=replay,
                ports=ports if use_http else (ports[0], None),
                frame=ANSWER_SERVER_FRAME,
            ).strip()
            values["start_service"] = start_python_service(
                "/app/kv_server.py", ports[: 1 + use_http]
            )
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
        tests = folder.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            functions=function_sources(
                kv_op, kv_replay, kv_dump, kv_load, kv_stats, kv_keys, kv_journal
            ),
            settings=settings_lines(params),
        )
        return Draft(
            instruction=folder.render("instruction.md", **values),
            # the steps are lines joined by newlines: none after the last
            solution=folder.render("solution/solve.sh", **values).rstrip("\n"),
            tests={"test_task.py": tests},
            files=files,
            keep_agent_processes=serve,
        )
