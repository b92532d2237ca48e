"""More task families of the file_operations domain (kept apart from file_operations.py,
which another engineer may extend at the same time)."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    bullets,
    heredoc,
    manifest_line,
    manifest_test_file,
    program_path,
    start_detached_service,
)

# The order of registration breaks ties between families: keep it.
# isort: off
from tmax.generate.families.file_operations_more import batch_normalize  # noqa: F401
from tmax.generate.families.file_operations_more import dupe_hunt  # noqa: F401
from tmax.generate.families.file_operations_more import archive_audit  # noqa: F401

# isort: on
from tmax.generate.families.file_operations_more._shared import run_command as _run
from tmax.generate.families.file_operations_more._shared import words as _words
from tmax.generate.family import Draft, Family, RenderContext, register

_PRISTINE = r"""
HERE = os.path.dirname(os.path.abspath(__file__))


def pristine(name):
    with open(os.path.join(HERE, "pristine", name), "rb") as handle:
        return handle.read()
"""


# --- inbox_sorter -------------------------------------------------------------------------

_SORT_ORACLE = r'''
import re


def parse_rules(text):
    rules = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and not fields[0].startswith("#"):
            rules[fields[0].lower()] = fields[1]
    return rules


def destination(name, rules):
    """category/year/name for a file called ``name``."""
    base = name[1:] if name.startswith(".") else name
    ext = base.rsplit(".", 1)[1].lower() if "." in base else ""
    category = rules.get(ext, "misc") if ext else "misc"
    found = re.search(r"([0-9]{4})-[0-9]{2}-[0-9]{2}", name)
    return f"{category}/{found.group(1) if found else 'undated'}/{name}"


def plan(rels, rules):
    """[(source relative path, destination relative path)] in byte order of the source."""
    return [(rel, destination(rel.rsplit("/", 1)[-1], rules))
            for rel in sorted(rels, key=lambda r: r.encode("utf-8"))]
'''

_SORT_PY = r"""
import os
import shutil
import sys

if __name__ == "__main__":
    rules_path, src, dest = sys.argv[1:4]
    with open(rules_path, encoding="utf-8") as handle:
        rules = parse_rules(handle.read())
    rels = []
    for folder, _, names in os.walk(src):
        rels += [os.path.relpath(os.path.join(folder, n), src) for n in names]
    for rel, target in plan(rels, rules):
        os.makedirs(os.path.dirname(os.path.join(dest, target)), exist_ok=True)
        shutil.move(os.path.join(src, rel), os.path.join(dest, target))
        sys.stdout.write(f"{rel}\t{target}\n")
"""

_SORT_BASH = r"""
#!/bin/bash
# Usage: sorter.sh RULES SRC DEST -> moves every file, prints "SOURCE<TAB>DESTINATION"
set -euo pipefail
rules=$1 src=$2 dest=$3
declare -A category=()
while read -r ext cat rest; do
  [[ -z $ext || $ext == \#* || -z $cat || -n $rest ]] && continue
  category[${ext,,}]=$cat
done < "$rules"
find "$src" -type f -printf '%P\0' | LC_ALL=C sort -z | while IFS= read -r -d '' rel; do
  name=${rel##*/}
  base=${name#.}
  ext=""
  [[ $base == *.* ]] && ext=${base##*.} && ext=${ext,,}
  cat=misc
  [[ -n $ext && -n ${category[$ext]+set} ]] && cat=${category[$ext]}
  year=undated
  [[ $name =~ ([0-9]{4})-[0-9]{2}-[0-9]{2} ]] && year=${BASH_REMATCH[1]}
  mkdir -p -- "$dest/$cat/$year"
  mv -- "$src/$rel" "$dest/$cat/$year/$name"
  printf '%s\t%s\n' "$rel" "$cat/$year/$name"
done
"""

_SORT_SERVER = r"""
import http.server
import json
import os
import urllib.parse

ROOT = "/app/sorted"
MOVES = "/app/out/moves.tsv"


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, kind="application/json"):
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/categories":
            counts = {}
            for entry in sorted(os.listdir(ROOT)):
                if os.path.isdir(os.path.join(ROOT, entry)):
                    counts[entry] = sum(len(f) for _, _, f in os.walk(os.path.join(ROOT, entry)))
            return self.reply(200, json.dumps(counts))
        if url.path == "/where":
            wanted = urllib.parse.parse_qs(url.query).get("name", [""])[0]
            with open(MOVES, encoding="utf-8") as handle:
                for line in handle:
                    source, _, target = line.rstrip("\n").partition("\t")
                    if source == wanted:
                        return self.reply(200, target + "\n", "text/plain")
            return self.reply(404, "not found\n", "text/plain")
        return self.reply(404, "not found\n", "text/plain")

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
"""

_SORT_TESTS = r"""
import urllib.error
import urllib.parse


def rules():
    return parse_rules(CFG["rules"])


def test_moved_and_manifest():
    moves = plan(list(CFG["inbox"]), rules())
    want = "".join(f"{a}\t{b}\n" for a, b in moves)
    got = read("/app/out/moves.tsv")
    assert got == want, f"moves.tsv:\nexpected\n{want}\ngot\n{got}"
    for source, target in moves:
        path = os.path.join("/app/sorted", target)
        assert os.path.isfile(path), f"{path} is missing"
        with open(path, "rb") as handle:
            assert handle.read() == CFG["inbox"][source].encode("utf-8"), f"{path} differs"
    left = [os.path.join(d, n) for d, _, names in os.walk("/app/inbox") for n in names]
    assert not left, f"files left in /app/inbox: {left}"
    if CFG["level"] >= 3:
        dirs = [d for d, _, _ in os.walk("/app/inbox") if d != "/app/inbox"]
        assert not dirs, f"empty folders left in /app/inbox: {dirs}"


def test_counts_and_index():
    moves = plan(list(CFG["inbox"]), rules())
    counts = {}
    for _, target in moves:
        counts[target.split("/")[0]] = counts.get(target.split("/")[0], 0) + 1
    if CFG["level"] >= 2:
        want = "".join(f"{c} {n}\n" for c, n in sorted(counts.items()))
        got = read("/app/out/counts.txt")
        assert got == want, f"counts.txt:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 4:
        index = {}
        for _, target in moves:
            cat, year, name = target.split("/", 2)
            index.setdefault(cat, {}).setdefault(year, []).append(name)
        index = {c: {y: sorted(v) for y, v in ys.items()} for c, ys in index.items()}
        got = json.loads(read("/app/out/index.json"))
        assert got == index, f"index.json should be {index}, got {got}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/moves.tsv", "/app/out/counts.txt", "/app/out/index.json"])


ODD = ["-n report 2024-01-05.PDF", "two  spaces.txt", ".hidden", ".env.CSV", "..dots.Png",
       "noext", "trailing.", "archive.tar.gz", "été 2023-07-14.jpg", "a'quote\".txt",
       "$(touch pwned).txt", "*.csv", "back\\slash.md", "x 1999-12-31 2005-01-01.TXT"]


def fresh_inbox(rng, folder, adversarial):
    files = {}
    for i in range(rng.randint(1, 9)):
        if adversarial and rng.random() < 0.6:
            name = rng.choice(ODD)
        else:
            name = f"f{i}_{rng.choice(['2021-03-04', 'x', '1999-12-31'])}." + rng.choice(
                ["pdf", "JPG", "csv", "md", "bin", "txt"])
        sub = rng.choice(["", "a/", "a/b c/", "-d/"]) if CFG["level"] >= 3 else ""
        rel = sub + name
        if any(r.rsplit("/", 1)[-1] == name for r in files):
            continue
        files[rel] = f"content {i} {rng.random()}\n"
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(files[rel])
    return files


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(3)
    for i in range(CFG["fresh"]):
        base = workdir()
        src, dest = os.path.join(base, "in"), os.path.join(base, "out")
        os.makedirs(src)
        files = fresh_inbox(rng, src, CFG["adversarial"])
        rules_path = os.path.join(base, "rules.conf")
        with open(rules_path, "w") as handle:
            handle.write(CFG["rules"])
        moves = plan(list(files), rules())
        want = "".join(f"{a}\t{b}\n" for a, b in moves)
        got = run_program([rules_path, src, dest], timeout=60).stdout
        assert got == want, f"fresh inbox {sorted(files)}:\nexpected\n{want}\ngot\n{got}"
        for source, target in moves:
            path = os.path.join(dest, target)
            assert os.path.isfile(path), f"{source} was not moved to {path}"
    assert not os.path.exists(os.path.join(os.getcwd(), "pwned")), "a file name was executed"


def test_service():
    if not CFG["service"]:
        return
    port = CFG["port"]
    status, body = http_get(port, "/categories")
    counts = {}
    for _, target in plan(list(CFG["inbox"]), rules()):
        counts[target.split("/")[0]] = counts.get(target.split("/")[0], 0) + 1
    assert status == 200 and json.loads(body) == counts, f"/categories answered {body!r}"
    probe_dir = "/app/sorted/probe_cat/2020"
    os.makedirs(probe_dir, exist_ok=True)
    with open(os.path.join(probe_dir, "probe.txt"), "w") as handle:
        handle.write("probe\n")
    status, body = http_get(port, "/categories")
    assert json.loads(body).get("probe_cat") == 1, f"/categories is not live: {body!r}"
    for source, target in plan(list(CFG["inbox"]), rules())[:4]:
        status, body = http_get(port, "/where?name=" + urllib.parse.quote(source))
        assert status == 200 and body.strip() == target, f"/where {source!r} answered {body!r}"
    try:
        status, _ = http_get(port, "/where?name=no-such-file.zzz")
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 404, f"/where for an unknown file should be 404, got {status}"
"""

_CATEGORIES = [
    ("pdf", "documents"),
    ("docx", "documents"),
    ("md", "documents"),
    ("jpg", "images"),
    ("png", "images"),
    ("csv", "data"),
    ("json", "data"),
    ("txt", "notes"),
]

_ODD_NAMES = [
    "-rf scan 2023-02-11.PDF",
    "holiday  photo 2022-08-30.JPG",
    ".env.CSV",
    ".bashrc",
    "README",
    "draft.",
    "backup.tar.gz",
    "café menu 2024-03-03.md",
    "$(id) 2021-01-01.txt",
    'it\'s "final".docx',
]


@register
class InboxSorter(Family):
    """Sort a messy inbox into category/year folders by an extension rules file, with a moves
    manifest (counts, nested folders, an index by level); adversarial file names; code asks
    for a reusable sorter, services for a live HTTP index of the sorted tree."""

    name = "file_operations.inbox_sorter"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("move_by_rules", (r"move every file of /app/inbox",),
             (r"def test_moved_and_manifest\(",)),
        Rule("moves_manifest", (r"`/app/out/moves\.tsv`: one line `SOURCE<TAB>DESTINATION`",),
             (r'read\("/app/out/moves\.tsv"\)',)),
        Rule("odd_names", (r"people use all kinds of file names",),
             (r"def test_moved_and_manifest\(",), when={"adversarial": True}),
        Rule("counts", (r"`/app/out/counts\.txt`: `CATEGORY COUNT`",),
             (r'read\("/app/out/counts\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("no_empty_folders", (r"leave no empty folders behind in /app/inbox",),
             (r"empty folders left in /app/inbox",), levels=frozenset({3, 4})),
        Rule("index", (r"`/app/out/index\.json`",), (r'read\("/app/out/index\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/sorter",),
             (r"def test_program_fresh\(",), when={"code": True}),
        Rule("index_service", (r"leave a small HTTP service running on 127\.0\.0\.1:\d+",),
             (r"def test_service\(",), when={"service": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        adversarial = ctx.verifier_kind == "adversarial_corpus"
        chosen = rng.sample(_CATEGORIES, 4 + level)
        rules = "# extension category\n" + "".join(f"{e} {c}\n" for e, c in chosen)
        exts = [e for e, _ in chosen] + ["zip", "log"]
        subdirs = [""] if level < 3 else ["", "old/", "phone/2023/", "scans/"]
        inbox: dict[str, str] = {}
        used: set[str] = set()
        odd = rng.sample(_ODD_NAMES, 3 + level) if adversarial else []
        for i in range(4 + 3 * level + len(odd)):
            if i < len(odd):
                name = odd[i]
            else:
                ext = rng.choice(exts)
                ext = ext.upper() if rng.random() < 0.2 else ext
                date = rng.choice(["", f"_{rng.randint(2015, 2024)}-0{rng.randint(1, 9)}-1{i % 9}"])
                name = f"{rng.choice(['IMG', 'scan', 'notes', 'export', 'memo'])}_{i}{date}.{ext}"
            if name in used:
                continue
            used.add(name)
            inbox[rng.choice(subdirs) + name] = f"{_words(rng, 6)} {i}\n"
        files = {f"inbox/{rel}": text for rel, text in inbox.items()}
        files["rules.conf"] = rules
        serve = ctx.needs_service
        code = ctx.needs_code
        lang = ctx.language if code else "bash"
        prog = program_path(lang, "/app/sorter")
        port = 8000 + rng.randint(100, 899)
        cfg = {
            "level": level,
            "rules": rules,
            "inbox": inbox,
            "lang": lang,
            "program": prog,
            "code": code,
            "adversarial": adversarial,
            "service": serve,
            "port": port,
            "fresh": 4 if not adversarial else 12,
        }
        asks = [
            "move every file of /app/inbox"
            + (" (including subfolders)" if level >= 3 else "")
            + " to `/app/sorted/CATEGORY/YEAR/NAME` (NAME unchanged). The extension is "
            "what follows the last dot of the name, ignoring one leading dot, compared "
            "case-insensitively; CATEGORY comes from /app/rules.conf (`extension category` "
            "lines, `#` comments) and is `misc` for unknown or missing extensions. YEAR is "
            "the year of the first `YYYY-MM-DD` date in the name, else `undated`",
            "`/app/out/moves.tsv`: one line `SOURCE<TAB>DESTINATION` per file, SOURCE relative "
            "to /app/inbox and DESTINATION relative to /app/sorted, ordered by SOURCE in byte "
            "order",
        ]
        if level >= 2:
            asks.append(
                "`/app/out/counts.txt`: `CATEGORY COUNT` lines sorted by category, for the "
                "categories that received files"
            )
        if level >= 3:
            asks.append("leave no empty folders behind in /app/inbox (keep /app/inbox itself)")
        if level >= 4:
            asks.append(
                '`/app/out/index.json`: `{"CATEGORY": {"YEAR": [NAME, ...]}}` with sorted '
                "name lists"
            )
            asks.append(
                "`/app/out/checksums.sha256`: sha256sum lines for moves.tsv, counts.txt "
                "and index.json"
            )
        body = (
            "Everything people drop into /app/inbox piles up unsorted. Please file it:\n\n"
            + bullets(asks)
        )
        if adversarial:
            body += (
                "\n\nCareful: people use all kinds of file names (spaces, quotes, leading "
                "dashes, shell characters, non-ASCII letters); every one must survive as is."
            )
        if code:
            body += (
                f"\n\nWrite the sorter as a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: `RULES SOURCE_DIR DEST_DIR` moves every file of SOURCE_DIR "
                "(recursively) into that layout under DEST_DIR and prints the moves.tsv "
                "lines for it to stdout."
            )
        if serve:
            body += (
                f"\n\nFinally leave a small HTTP service running on 127.0.0.1:{port}: `GET "
                "/categories` → 200 JSON object mapping every folder directly under "
                "/app/sorted to the number of files below it, computed at request time; "
                "`GET /where?name=SOURCE` → 200 text/plain with the DESTINATION of that "
                "SOURCE from moves.tsv, 404 when it is not listed."
            )
        source = {"python": _SORT_ORACLE + _SORT_PY, "bash": _SORT_BASH}[lang]
        tool = prog if code else "/tmp/sorter.sh"
        lines = [
            "mkdir -p /app/out /app/sorted",
            heredoc(tool, source),
            f"{_run(lang, tool)} /app/rules.conf /app/inbox /app/sorted > /app/out/moves.tsv",
        ]
        if level >= 2:
            lines.append(
                "cut -f2 /app/out/moves.tsv | cut -d/ -f1 | LC_ALL=C sort | uniq -c "
                "| awk '{print $2, $1}' > /app/out/counts.txt"
            )
        if level >= 3:
            lines.append("find /app/inbox -mindepth 1 -depth -type d -empty -delete")
        if level >= 4:
            lines += [
                "python3 - <<'TMAX_PY'",
                "import json",
                "index = {}",
                "for line in open('/app/out/moves.tsv', encoding='utf-8'):",
                "    cat, year, name = line.rstrip('\\n').split('\\t')[1].split('/', 2)",
                "    index.setdefault(cat, {}).setdefault(year, []).append(name)",
                "index = {c: {y: sorted(n) for y, n in ys.items()} for c, ys in index.items()}",
                "with open('/app/out/index.json', 'w', encoding='utf-8') as out:",
                "    json.dump(index, out, ensure_ascii=False, indent=1, sort_keys=True)",
                "TMAX_PY",
                manifest_line(["moves.tsv", "counts.txt", "index.json"]),
                "find /app/sorted -type f | wc -l",
                'test -z "$(find /app/inbox -mindepth 1 -print -quit)"',
                "cat /app/out/counts.txt",
                "wc -l < /app/out/moves.tsv",
                "(cd /app/out && sha256sum -c --quiet checksums.sha256)",
                "python3 -m json.tool /app/out/index.json > /dev/null",
            ]
        if serve:
            server = _SORT_SERVER.replace('"127.0.0.1", PORT', f'"127.0.0.1", {port}')
            lines.append(heredoc("/app/indexd.py", server))
            lines.append(start_detached_service("python3 /app/indexd.py", port, "/app/indexd.log"))
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, _SORT_TESTS, _SORT_ORACLE)},
            files=files,
            keep_agent_processes=serve,
        )
