"""Task families of the scientific_computing domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    PNG_READER,
    bullets,
    heredoc,
    language_or_bash,
    manifest_line,
    manifest_test_file,
    png_bytes,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# isort: off
from tmax.generate.families.scientific_computing import (  # noqa: F401  (registers them, in this order)
    tone_analysis,
    logistic_rk4,
)
# isort: on

# --- fasta_records -----------------------------------------------------------------------

_FASTA_ORACLE = r'''
def fasta_records(text):
    """[(id, sequence)] from FASTA text (id = header up to the first whitespace)."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(">"):
            records.append([line[1:].split()[0] if line[1:].split() else "", ""])
        elif line and records:
            records[-1][1] += line
    return [(rid, seq) for rid, seq in records]


def record_row(rid, seq, level):
    seq = seq.upper()
    row = [rid, str(len(seq)), str(seq.count("G") + seq.count("C"))]
    if level >= 2:
        row.append(str(seq.count("N")))
    return "\t".join(row)


def fasta_problem(text, level):
    """None when ``text`` is valid FASTA under the task's rules, else a reason."""
    if not text:
        return "empty file"
    if not text.endswith("\n"):
        return "no final newline"
    lines = text[:-1].split("\n")
    seen, current, count = set(), None, 0
    for line in lines:
        if line.startswith(">"):
            if current is not None and count == 0:
                return "record without sequence"
            rid = line[1:]
            if not rid or rid[0] in " \t" or any(c.isspace() and c != " " for c in rid):
                return "bad header"
            rid = rid.split()[0]
            if level >= 2 and rid in seen:
                return "duplicate id"
            seen.add(rid)
            current, count = rid, 0
        else:
            if current is None:
                return "sequence before header"
            if line == "":
                return "blank line"
            if any(c not in "ACGTN" for c in line):
                return "bad residue"
            if level >= 3 and len(line) > 60:
                return "line longer than 60"
            count += len(line)
    if current is None or count == 0:
        return "record without sequence"
    return None
'''

_FASTA_PY = r"""
import sys

LEVEL, MODE = @LEVEL@, "@MODE@"

if __name__ == "__main__":
    with open(sys.argv[1], encoding="latin-1", newline="") as handle:
        text = handle.read()
    if MODE == "check":
        problem = fasta_problem(text, LEVEL)
        if problem:
            print(problem, file=sys.stderr)
            sys.exit(1)
    else:
        for rid, seq in fasta_records(text):
            print(record_row(rid, seq, LEVEL))
"""

_FASTA_BASH_TABLE = r"""
#!/bin/bash
# Usage: fasta.sh FILE -> id, length, G+C count (and N count) per record, tab separated
set -euo pipefail
awk -v L=@LEVEL@ '
function flush() { if (have) { s = toupper(seq); gc = gsub(/[GC]/, "", s); s2 = toupper(seq)
  nn = gsub(/N/, "", s2); line = id "\t" length(seq) "\t" gc; if (L >= 2) line = line "\t" nn
  print line } }
/^>/ { flush(); id = substr($1, 2); seq = ""; have = 1; next }
{ gsub(/[ \t\r]/, ""); if (have) seq = seq $0 }
END { flush() }' "$1"
"""

_FASTA_BASH_CHECK = r"""
#!/bin/bash
# Usage: fasta_check.sh FILE -> exit 0 when the file is valid FASTA, 1 otherwise
set -uo pipefail
f="$1"
[ -s "$f" ] || { echo "empty file" >&2; exit 1; }
[ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || { echo "no final newline" >&2; exit 1; }
LC_ALL=C awk -v L=@LEVEL@ '
function bad(why) { print why > "/dev/stderr"; failed = 1; exit 1 }
/^>/ { if (cur != "" && count == 0) bad("record without sequence")
  rid = substr($0, 2)
  if (rid == "" || rid ~ /^[ \t]/ || rid ~ /[\t\r\v\f]/) bad("bad header")
  split(rid, w, " "); rid = w[1]
  if (L >= 2 && (rid in seen)) bad("duplicate id")
  seen[rid] = 1; cur = rid; count = 0; next }
{ if (cur == "") bad("sequence before header")
  if ($0 == "") bad("blank line")
  if ($0 ~ /[^ACGTN]/) bad("bad residue")
  if (L >= 3 && length($0) > 60) bad("line longer than 60")
  count += length($0) }
END { if (failed) exit 1
  if (cur == "" || count == 0) { print "record without sequence" > "/dev/stderr"; exit 1 } }' "$f"
"""

_FASTA_TESTS = r"""

def rand_seq(rng, n):
    return "".join(rng.choice("ACGTACGTACGTN") for _ in range(n))


def clean_fasta(rng):
    out = []
    for i in range(rng.randint(1, 5)):
        header = f">seq{i}_{rng.randint(0, 999)}" + rng.choice(["", " sample=lake", " len ok"])
        out.append(header)
        seq = rand_seq(rng, rng.randint(1, 150))
        out += [seq[j:j + 60] for j in range(0, len(seq), 60)]
    return "\n".join(out) + "\n"


def evil_fasta(rng, level, index):
    # an invalid file; index walks through every kind of malformation in turn
    base = clean_fasta(rng).split("\n")[:-1]
    kinds = ["noheader", "badres", "lower", "emptyhdr", "emptyrec", "blank", "nonewline",
             "empty", "spacehdr", "crlf", "tabhdr"]
    if level >= 2:
        kinds.append("dup")
    if level >= 3:
        kinds.append("long")
    kind = kinds[index % len(kinds)]
    if kind == "noheader":
        base = [rand_seq(rng, 10)] + base
    elif kind == "badres":
        i = rng.randrange(1, len(base)) if len(base) > 1 else 0
        base.insert(i + 1, rand_seq(rng, 5) + rng.choice("XBZ-*1 ") + rand_seq(rng, 3))
    elif kind == "lower":
        base.append(rand_seq(rng, 4).lower() + "a")
    elif kind == "emptyhdr":
        base += [">", rand_seq(rng, 7)]
    elif kind == "emptyrec":
        base.insert(0, ">orphan")
    elif kind == "blank":
        base.insert(len(base) // 2 + 1, "")
    elif kind == "nonewline":
        return "\n".join(base)
    elif kind == "empty":
        return ""
    elif kind == "spacehdr":
        base += ["> spaced", rand_seq(rng, 5)]
    elif kind == "crlf":
        return "\r\n".join(base) + "\r\n"
    elif kind == "tabhdr":
        base += [">id\tx", rand_seq(rng, 5)]
    elif kind == "dup":
        base += [">dupe", "ACGT", ">dupe other", "GGCC"]
    elif kind == "long":
        base += [">wide", rand_seq(rng, 61)]
    text = "\n".join(base) + "\n"
    assert fasta_problem(text, level), kind
    return text


def test_table():
    if not CFG["table"]:
        return
    for src, out in CFG["pairs"]:
        text = read(src)
        want = [record_row(r, s, CFG["level"]) for r, s in fasta_records(text)]
        if CFG["level"] >= 3:
            want = [w for w in want if int(w.split("\t")[1]) >= CFG["min_len"]]
        got = [l for l in read(out).split("\n") if l.strip()]
        assert got == want, f"{out}: expected\n" + "\n".join(want) + "\ngot\n" + "\n".join(got)
    if CFG["level"] >= 4:
        rows = [l.split("\t") for _, out in CFG["pairs"] for l in read(out).split("\n") if l]
        longest = sorted(rows, key=lambda r: (-int(r[1]), r[0]))[0][0]
        assert read("/app/out/longest.txt").strip() == longest, "longest.txt is wrong"
        gc = sum(int(r[2]) for r in rows)
        total = sum(int(r[1]) for r in rows)
        summary = json.loads(read("/app/out/summary.json"))
        assert summary == {"records": len(rows), "bases": total, "gc": gc}, summary
        check_manifest("/app/out/checksums.sha256", [out for _, out in CFG["pairs"]])


def test_verdicts():
    if not CFG["check"]:
        return
    lines = [l.split() for l in read("/app/out/verdicts.txt").splitlines() if l.strip()]
    want = [[n.rsplit("/", 1)[1], "BAD" if fasta_problem(open(n, encoding="latin-1",
            newline="").read(), CFG["level"]) else "OK"] for n in CFG["samples"]]
    assert lines == want, f"verdicts.txt: expected {want}, got {lines}"
    if CFG["level"] >= 3:
        folder = "/app/out/accepted"
        got = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        assert got == [n for n, v in want if v == "OK"], f"accepted/ holds {got}"
        for name in got:
            with open(os.path.join(folder, name), "rb") as a:
                copy = a.read()
            with open("/app/incoming/" + name, "rb") as b:
                assert copy == b.read(), f"accepted/{name} differs from the original"
    if CFG["level"] >= 4:
        ok = sum(v == "OK" for _, v in want)
        summary = json.loads(read("/app/out/summary.json"))
        assert summary == {"ok": ok, "bad": len(want) - ok}, f"summary.json is {summary}"
        check_manifest("/app/out/checksums.sha256",
                       ["/app/out/verdicts.txt", "/app/out/summary.json"])


def test_program():
    if not CFG["code"]:
        return
    rng = random.Random(2024)
    folder = workdir()
    missed, rejected = [], []
    for i in range(CFG["fresh"]):
        for kind in ("clean", "evil"):
            text = clean_fasta(rng) if kind == "clean" else evil_fasta(rng, CFG["level"], i)
            if CFG["table"] and i % 2:  # soft-masked: bases count case-insensitively
                text = "\n".join(l if l.startswith(">") else l.lower() for l in text.split("\n"))
            path = os.path.join(folder, f"{kind}{i}.fa")
            with open(path, "w", newline="") as handle:
                handle.write(text)
            if CFG["mode"] == "check":
                code = run_program([path], check=False).returncode
                if kind == "evil" and code == 0:
                    missed.append(text)
                if kind == "clean" and code != 0:
                    rejected.append(text)
            elif kind == "clean":
                want = [record_row(r, s, CFG["level"]) for r, s in fasta_records(text)]
                got = [l for l in run_program([path]).stdout.split("\n") if l.strip()]
                assert got == want, f"fresh file {text!r}: expected {want}, got {got}"
    assert not missed, f"{len(missed)} invalid files accepted, e.g. {missed[0]!r}"
    assert not rejected, f"{len(rejected)} valid files rejected, e.g. {rejected[0]!r}"
"""


def _fasta_text(rng, records: int, bad: str | None = None, masked: bool = False) -> str:
    """FASTA text; ``masked`` soft-masks (lower-cases) the tail of every record."""
    out = []
    for i in range(records):
        out.append(
            f">{rng.choice(['contig', 'read', 'scaffold'])}_{i}_{rng.randint(100, 999)}"
            f" sample={rng.choice(['lake', 'soil', 'gut'])}"
        )
        seq = "".join(rng.choice("ACGTACGTGCN") for _ in range(rng.randint(20, 170)))
        if masked:
            cut = rng.randint(0, len(seq))
            seq = seq[:cut] + seq[cut:].lower()
        out += [seq[j : j + 60] for j in range(0, len(seq), 60)]
    if bad == "residue":
        out.insert(2, "ACGTXXACGT")
    elif bad == "blank":
        out.insert(len(out) - 1, "")
    elif bad == "orphan":
        out.insert(0, "ACGT")
    return "\n".join(out) + "\n"


@register
class FastaRecords(Family):
    """Parse FASTA sequencing files into per-record tables, or write a FASTA validator that
    hidden malformed files must fail; level adds files, columns, rules and summaries."""

    name = "scientific_computing.fasta_records"
    domain = "scientific_computing"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        # table mode: per-record tables
        Rule("table_rows", (r"`/app/out/runK\.tsv` with one tab-separated line per record in "
                            r"file order: record id \(header text up to the first whitespace\), "
                            r"sequence length, number of G\+C",),
             (r"def test_table\(", r'seq\.count\("G"\) \+ seq\.count\("C"\)'),
             when={"mode": "table"}),
        Rule("case_insensitive", (r"bases counted case-insensitively",), (r"seq = seq\.upper\(\)",),
             when={"mode": "table"}),
        Rule("n_column", (r"number of G\+C, number of N",),
             (r'row\.append\(str\(seq\.count\("N"\)\)\)',), levels=frozenset({2, 3, 4}),
             when={"mode": "table"}),
        Rule("min_length", (r"leave out records shorter than \d+ bases",),
             (r'>= CFG\["min_len"\]',), levels=frozenset({3, 4}), when={"mode": "table"}),
        Rule("longest", (r"`/app/out/longest\.txt`: id of the longest record kept",),
             (r'read\("/app/out/longest\.txt"\)',), levels=frozenset({4}), when={"mode": "table"}),
        Rule("table_summary",
             (r'`/app/out/summary\.json`: `\{"records": R, "bases": B, "gc": G\}`',),
             (r'assert summary == \{{"records"',), levels=frozenset({4}), when={"mode": "table"}),
        Rule("table_checksums", (r"`/app/out/checksums\.sha256`: sha256sum lines for the \.tsv",),
             (r'check_manifest\("/app/out/checksums\.sha256", \[out for',),
             levels=frozenset({4}), when={"mode": "table"}),
        Rule("table_program", (r"reusable .+? program at `/app/fasta_table",),
             (r"def test_program\(",), when={"mode": "table", "code": True}),
        # check mode: a validator that files kept back must fail
        Rule("validator", (r"I want a validator at `/app/fasta_check",
                           r"exits 0 when the file is valid, non-zero otherwise"),
             (r"def test_program\(", r"assert not missed", r"assert not rejected"),
             when={"mode": "check"}),
        Rule("valid_newlines", (r"the file is non-empty and ends with a newline; lines end in a "
                                r"bare LF",),
             (r'kind == "nonewline"', r'kind == "empty"', r'kind == "crlf"'),
             when={"mode": "check"}),
        Rule("valid_headers", (r"every record starts with a header line `>ID`",),
             (r'kind == "emptyhdr"', r'kind == "spacehdr"', r'kind == "tabhdr"'),
             when={"mode": "check"}),
        Rule("valid_residues", (r"sequence lines contain only the uppercase letters A, C, G, T, N; "
                                r"no blank lines anywhere",),
             (r'kind == "badres"', r'kind == "lower"', r'kind == "blank"'),
             when={"mode": "check"}),
        Rule("valid_records", (r"every record has at least one base; no sequence before the "
                               r"first header",),
             (r'kind == "emptyrec"', r'kind == "noheader"'), when={"mode": "check"}),
        Rule("unique_ids", (r"record IDs are unique within the file",),
             (r'kinds\.append\("dup"\)',), levels=frozenset({2, 3, 4}), when={"mode": "check"}),
        Rule("line_length", (r"sequence lines are at most 60 characters",),
             (r'kinds\.append\("long"\)',), levels=frozenset({3, 4}), when={"mode": "check"}),
        Rule("verdicts", (r"`/app/out/verdicts\.txt` with lines `FILENAME OK` or `FILENAME BAD`",),
             (r'read\("/app/out/verdicts\.txt"\)',), when={"mode": "check"}),
        Rule("accepted", (r"copy every accepted file, unchanged, into `/app/out/accepted/`",),
             (r'folder = "/app/out/accepted"',), levels=frozenset({3, 4}), when={"mode": "check"}),
        Rule("verdict_summary", (r'`/app/out/summary\.json` as `\{"ok": N, "bad": M\}`',),
             (r'assert summary == \{{"ok"',), levels=frozenset({4}), when={"mode": "check"}),
        Rule("verdict_checksums", (r"`/app/out/checksums\.sha256` \(sha256sum format\) covering "
                                   r"verdicts\.txt and summary\.json",),
             (r'\["/app/out/verdicts\.txt", "/app/out/summary\.json"\]',),
             levels=frozenset({4}), when={"mode": "check"}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "parse FASTA sequence files into structured records": "table_rows"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "check" if ctx.verifier_kind == "adversarial_corpus" else "table"
        lang = language_or_bash(ctx)
        code = ctx.needs_code or ctx.verifier_kind != "exact_text"
        files: dict[str, str | bytes] = {}
        min_len = rng.choice([40, 60, 80])
        pairs, samples = [], []
        if mode == "table":
            for f in range(level):
                files[f"seqs/run{f + 1}.fa"] = _fasta_text(rng, 2 + 2 * level, masked=True)
                pairs.append([f"/app/seqs/run{f + 1}.fa", f"/app/out/run{f + 1}.tsv"])
            prog = program_path(lang, "/app/fasta_table")
        else:
            kinds = [None, "residue", None, "blank", "orphan", None][: 2 + level]
            for i, bad in enumerate(kinds):
                files[f"incoming/sample{i + 1}.fa"] = _fasta_text(rng, 2 + level, bad)
                samples.append(f"/app/incoming/sample{i + 1}.fa")
            prog = program_path(lang, "/app/fasta_check")
        cfg = {
            "level": level,
            "mode": mode,
            "table": mode == "table",
            "check": mode == "check",
            "pairs": pairs,
            "samples": samples,
            "lang": lang,
            "program": prog,
            "code": code,
            "min_len": min_len,
            "fresh": {1: 12, 2: 16, 3: 24, 4: 32}[level] if code else 0,
        }
        cols = "record id (header text up to the first whitespace), sequence length, number of G+C"
        if level >= 2:
            cols += ", number of N"
        if mode == "table":
            asks = [
                f"for every `/app/seqs/runK.fa`, `/app/out/runK.tsv` with one tab-separated "
                f"line per record in file order: {cols} (bases counted case-insensitively)"
            ]
            if level >= 3:
                asks.append(f"leave out records shorter than {min_len} bases from the .tsv files")
            if level >= 4:
                asks.append(
                    "`/app/out/longest.txt`: id of the longest record kept (ties: smallest id)"
                )
                asks.append(
                    '`/app/out/summary.json`: `{"records": R, "bases": B, "gc": G}` '
                    "over the rows you kept"
                )
                asks.append("`/app/out/checksums.sha256`: sha256sum lines for the .tsv files")
            body = "Our sequencer drops FASTA files into /app/seqs. Please produce:\n\n" + bullets(
                asks
            )
            if code:
                body += (
                    f"\n\nI need the per-file table as a reusable {LANGUAGE_NAMES[lang]} "
                    f"program at `{prog}`: given a FASTA path it prints every record's "
                    f"line (no length filter) to stdout. I will run it on new files."
                )
        else:
            rules = [
                "the file is non-empty and ends with a newline; lines end in a bare LF",
                "every record starts with a header line `>ID` with optional description "
                "after a space: the ID is non-empty, does not start with whitespace, and "
                "the header has no tabs or other control whitespace",
                "sequence lines contain only the uppercase letters A, C, G, T, N; "
                "no blank lines anywhere",
                "every record has at least one base; no sequence before the first header",
            ]
            if level >= 2:
                rules.append("record IDs are unique within the file")
            if level >= 3:
                rules.append("sequence lines are at most 60 characters")
            body = (
                f"Before sequencing files enter our pipeline I want a validator at `{prog}` "
                f"({LANGUAGE_NAMES[lang]}). It takes one file path and exits 0 when the file "
                "is valid, non-zero otherwise. Valid means:\n\n"
                + bullets(rules)
                + "\n\nThen run it on the files in /app/incoming and write "
                "`/app/out/verdicts.txt` with lines `FILENAME OK` or `FILENAME BAD` (base "
                "name, sorted by name). I will test the validator against files I keep back."
            )
            extra = []
            if level >= 3:
                extra.append("copy every accepted file, unchanged, into `/app/out/accepted/`")
            if level >= 4:
                extra.append('write `/app/out/summary.json` as `{"ok": N, "bad": M}`')
                extra.append(
                    "write `/app/out/checksums.sha256` (sha256sum format) covering "
                    "verdicts.txt and summary.json"
                )
            if extra:
                body += "\n\nAfterwards:\n\n" + bullets(extra)
        if mode == "table":
            source = {"python": _FASTA_ORACLE + _FASTA_PY, "bash": _FASTA_BASH_TABLE}[lang]
        else:
            source = {"python": _FASTA_ORACLE + _FASTA_PY, "bash": _FASTA_BASH_CHECK}[lang]
        source = source.replace("@LEVEL@", str(level)).replace("@MODE@", mode)
        tool = prog if code else "/tmp/fasta_table.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = ["mkdir -p /app/out", heredoc(tool, source)]
        if mode == "table":
            for src, out in pairs:
                if level >= 3:
                    lines.append(f"{run} {src} | awk -F'\\t' '$2 >= {min_len}' > {out}")
                else:
                    lines.append(f"{run} {src} > {out}")
            if level >= 4:
                lines.append("cat /app/out/run*.tsv > /tmp/all.tsv")
                lines.append(
                    "sort -t$'\\t' -k2,2nr -k1,1 /tmp/all.tsv | head -n 1 | cut -f1 "
                    "> /app/out/longest.txt"
                )
                lines.append("records=$(wc -l < /tmp/all.tsv)")
                lines.append("bases=$(awk -F'\\t' '{s += $2} END {print s + 0}' /tmp/all.tsv)")
                lines.append("gc=$(awk -F'\\t' '{s += $3} END {print s + 0}' /tmp/all.tsv)")
                lines.append(
                    'printf \'{"records": %d, "bases": %d, "gc": %d}\\n\' '
                    '"$records" "$bases" "$gc" > /app/out/summary.json'
                )
                lines.append(manifest_line([o.rsplit("/", 1)[1] for _, o in pairs]))
        else:
            lines.append(": > /app/out/verdicts.txt")
            lines.append("for f in $(ls /app/incoming | sort); do")
            lines.append(f"  if {run} /app/incoming/$f 2>/dev/null; then v=OK; else v=BAD; fi")
            lines.append('  echo "$f $v" >> /app/out/verdicts.txt')
            lines.append("done")
            if level >= 3:
                lines.append("mkdir -p /app/out/accepted")
                lines.append("awk '$2 == \"OK\" {print $1}' /app/out/verdicts.txt > /tmp/ok.txt")
                lines.append(
                    "while read -r f; do cp /app/incoming/$f /app/out/accepted/; done < /tmp/ok.txt"
                )
            if level >= 4:
                lines.append("ok=$(grep -c ' OK$' /app/out/verdicts.txt || true)")
                lines.append("bad=$(grep -c ' BAD$' /app/out/verdicts.txt || true)")
                lines.append(
                    'printf \'{"ok": %d, "bad": %d}\\n\' "$ok" "$bad" > /app/out/summary.json'
                )
                lines.append(manifest_line(["verdicts.txt", "summary.json"]))
            lines.append("cat /app/out/verdicts.txt")
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _FASTA_ORACLE + _FASTA_TESTS)},
            files=files,
        )


# --- star_field --------------------------------------------------------------------------

_STAR_ORACLE = r'''
def find_stars(width, height, pixels, threshold, min_size):
    """4-connected blobs of pixels with (R+G+B)//3 >= threshold, in raster order of their
    first pixel: [(x10, y10, size)] with centroids times ten, rounded half up."""
    bright = [sum(p) // 3 >= threshold for p in pixels]
    seen = [False] * len(bright)
    stars = []
    for start in range(len(bright)):
        if not bright[start] or seen[start]:
            continue
        seen[start] = True
        stack, members = [start], []
        while stack:
            i = stack.pop()
            members.append(i)
            x, y = i % width, i // width
            for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                j = ny * width + nx
                if 0 <= nx < width and 0 <= ny < height and bright[j] and not seen[j]:
                    seen[j] = True
                    stack.append(j)
        n = len(members)
        if n < min_size:
            continue
        sx = sum(i % width for i in members)
        sy = sum(i // width for i in members)
        stars.append(((20 * sx + n) // (2 * n), (20 * sy + n) // (2 * n), n))
    return stars


def star_report(width, height, pixels, threshold, min_size):
    stars = find_stars(width, height, pixels, threshold, min_size)
    lines = [f"count {len(stars)}"]
    lines += [f"{x // 10}.{x % 10} {y // 10}.{y % 10} {n}" for x, y, n in stars]
    return "\n".join(lines) + "\n"
'''

_STAR_PY = r"""
import struct
import sys
import zlib

THRESHOLD, MIN_SIZE = @THRESHOLD@, @MIN_SIZE@


def load(path):
    data = open(path, "rb").read()
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    pixels = []
    for y in range(height):
        row = raw[y * stride + 1:(y + 1) * stride]
        pixels += [tuple(row[x * 3:x * 3 + 3]) for x in range(width)]
    return width, height, pixels


if __name__ == "__main__":
    sys.stdout.write(star_report(*load(sys.argv[1]), THRESHOLD, MIN_SIZE))
"""

_STAR_BASH = r"""
#!/bin/bash
# Usage: stars.sh IMAGE.png (8-bit RGB, filter 0, one IDAT) -> star report on stdout
set -euo pipefail
f="$1"
w=$(od -An -tu4 --endian=big -j16 -N4 "$f" | tr -d ' ')
h=$(od -An -tu4 --endian=big -j20 -N4 "$f" | tr -d ' ')
len=$(od -An -tu4 --endian=big -j33 -N4 "$f" | tr -d ' ')
{ printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03'; tail -c +44 "$f" | head -c $((len - 2)); } \
  | { gzip -dc 2>/dev/null || true; } | od -An -v -tu1 -w$((w * 3 + 1)) \
  | awk -v W="$w" -v H="$h" -v T=@THRESHOLD@ -v MS=@MIN_SIZE@ '
{ y = NR - 1
  for (x = 0; x < W; x++) b[y * W + x] = (int(($(3*x+2) + $(3*x+3) + $(3*x+4)) / 3) >= T) }
END {
  count = 0
  for (s = 0; s < W * H; s++) {
    if (!b[s] || seen[s]) continue
    seen[s] = 1; top = 0; st[top++] = s; n = 0; sx = 0; sy = 0
    while (top > 0) {
      i = st[--top]; x = i % W; y = int(i / W); n++; sx += x; sy += y
      if (x + 1 < W && b[i + 1] && !seen[i + 1]) { seen[i + 1] = 1; st[top++] = i + 1 }
      if (x > 0 && b[i - 1] && !seen[i - 1]) { seen[i - 1] = 1; st[top++] = i - 1 }
      if (y + 1 < H && b[i + W] && !seen[i + W]) { seen[i + W] = 1; st[top++] = i + W }
      if (y > 0 && b[i - W] && !seen[i - W]) { seen[i - W] = 1; st[top++] = i - W } }
    if (n < MS) continue
    cx = int((20 * sx + n) / (2 * n)); cy = int((20 * sy + n) / (2 * n))
    out[++count] = int(cx / 10) "." cx % 10 " " int(cy / 10) "." cy % 10 " " n }
  print "count " count
  for (k = 1; k <= count; k++) print out[k] }'
"""

_STAR_TESTS = r"""

def write_png(path, width, height, pixels):
    raw = b"".join(b"\x00" + bytes(v for p in pixels[y * width:(y + 1) * width] for v in p)
                   for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n"
                  + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def random_sky(rng):
    width, height = rng.randint(8, 40), rng.randint(6, 30)
    pixels = [(rng.randint(0, 90),) * 3 for _ in range(width * height)]
    for _ in range(rng.randint(0, 12)):
        x, y = rng.randrange(width), rng.randrange(height)
        for dx, dy in rng.choice([[(0, 0)], [(0, 0), (1, 0)], [(0, 0), (1, 0), (0, 1), (1, 1)],
                                   [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]]):
            if 0 <= x + dx < width and 0 <= y + dy < height:
                v = rng.randint(90, 255)
                pixels[(y + dy) * width + x + dx] = (v, rng.randint(80, 255), v)
    return width, height, pixels


def report_of(path):
    return star_report(*read_png(path), CFG["threshold"], CFG["min_size"])


def test_reports():
    for img, out in CFG["pairs"]:
        want = report_of(img)
        got = read(out)
        assert got == want, f"{out}:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 2:
        want = "".join(f"{os.path.basename(img)} {report_of(img).split()[1]}\n"
                       for img, _ in CFG["pairs"])
        got = read("/app/out/counts.txt")
        assert got == want, f"counts.txt:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 3:
        counts = [(-int(report_of(img).split()[1]), os.path.basename(img))
                  for img, _ in CFG["pairs"]]
        want = min(counts)[1]
        assert read("/app/out/richest.txt").strip() == want, f"richest.txt should be {want}"
    if CFG["level"] >= 4:
        total = sum(int(report_of(img).split()[1]) for img, _ in CFG["pairs"])
        summary = json.loads(read("/app/out/summary.json"))
        want = {"images": len(CFG["pairs"]), "stars": total}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", [out for _, out in CFG["pairs"]]
                       + ["/app/out/counts.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(1977)
    folder = workdir()
    for i in range(CFG["fresh"]):
        width, height, pixels = random_sky(rng)
        path = os.path.join(folder, f"sky{i}.png")
        write_png(path, width, height, pixels)
        want = star_report(width, height, pixels, CFG["threshold"], CFG["min_size"])
        got = run_program([path]).stdout
        assert got == want, f"fresh {width}x{height} image:\nexpected\n{want}\ngot\n{got}"
"""


def _sky(rng, width: int, height: int, stars: int, hot: int) -> bytes:
    noise = [rng.randint(0, 70) for _ in range(97)]
    pixels = [
        (noise[(i * 31) % 97], noise[(i * 17) % 97], noise[(i * 7) % 97])
        for i in range(width * height)
    ]
    centres: list[tuple[int, int]] = []
    shapes = [
        [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)],
        [(0, 0), (1, 0), (0, 1), (1, 1)],
        [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)],
        [(0, 0), (1, 0), (2, 0), (1, 1)],
    ]
    for k in range(stars + hot):
        for _ in range(30):
            x, y = rng.randint(2, width - 3), rng.randint(2, height - 3)
            if all(abs(x - a) + abs(y - b) > 6 for a, b in centres):
                break
        centres.append((x, y))
        shape = [(0, 0)] if k >= stars else rng.choice(shapes)
        for dx, dy in shape:
            v = rng.randint(170, 255)
            pixels[(y + dy) * width + x + dx] = (v, rng.randint(150, 255), rng.randint(150, 255))
    return png_bytes(width, height, pixels)


@register
class StarField(Family):
    """Find stars (4-connected bright blobs) in telescope PNG frames and report centroids,
    counts and summaries; level adds frames, hot-pixel rejection and reports; code asks for
    a reusable detector (stdlib PNG decoding) run on fresh frames."""

    name = "scientific_computing.star_field"
    domain = "scientific_computing"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"image"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("stars_files", (r"`/app/out/NAME\.stars`: a first line `count N`, then one line "
                             r"`X Y SIZE` per star ordered by its first pixel",),
             (r"def test_reports\(",)),
        Rule("star_definition", (r"a star is a 4-connected group of pixels whose brightness "
                                 r"\(R\+G\+B\)//3 is at least \d+",),
             (r"bright = \[sum\(p\) // 3 >= threshold for p in pixels\]",
              r"\(\(x \+ 1, y\), \(x - 1, y\), \(x, y \+ 1\), \(x, y - 1\)\)")),
        Rule("centroid", (r"X, Y = centroid column and row .+? with one decimal, rounded half up",),
             (r"\(20 \* sx \+ n\) // \(2 \* n\)",)),
        Rule("hot_pixels", (r"single-pixel groups are hot pixels, not stars",),
             (r"if n < min_size:", r'"min_size": 2'), levels=frozenset({3, 4})),
        Rule("counts", (r"`/app/out/counts\.txt`: `FILENAME COUNT` per frame in name order",),
             (r'read\("/app/out/counts\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("richest", (r"`/app/out/richest\.txt`: the file name of the frame with the most",),
             (r'read\("/app/out/richest\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r'`/app/out/summary\.json`: `\{"images": I, "stars": S\}`',),
             (r'read\("/app/out/summary\.json"\)',), levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`: sha256sum lines for the \.stars files",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/stars",), (r"def test_program_fresh\(",),
             when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        threshold = rng.choice([120, 128, 140])
        min_size = 2 if level >= 3 else 1
        files: dict[str, str | bytes] = {}
        pairs = []
        for f in range(level):
            width, height = 24 + 8 * level, 18 + 6 * level
            stem = f"frame{f + 1:02d}"
            files[f"frames/{stem}.png"] = _sky(
                rng,
                width,
                height,
                rng.randint(2, 3 + level),
                rng.randint(1, 2) if level >= 3 else 0,
            )
            pairs.append([f"/app/frames/{stem}.png", f"/app/out/{stem}.stars"])
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/stars")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "pairs": pairs,
            "threshold": threshold,
            "min_size": min_size,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 4 * level + 4,
        }
        star_rule = (
            f"a star is a 4-connected group of pixels whose brightness (R+G+B)//3 is "
            f"at least {threshold}"
        )
        if min_size > 1:
            star_rule += "; single-pixel groups are hot pixels, not stars"
        asks = [
            "for each frame `/app/frames/NAME.png`, `/app/out/NAME.stars`: a first line "
            "`count N`, then one line `X Y SIZE` per star ordered by its first pixel in "
            "row-major scan (top row first, left to right): X, Y = centroid column and row "
            "(0-based pixel indices, mean over the star's pixels) with one decimal, rounded "
            "half up; SIZE = its pixel count"
        ]
        if level >= 2:
            asks.append("`/app/out/counts.txt`: `FILENAME COUNT` per frame in name order")
        if level >= 3:
            asks.append(
                "`/app/out/richest.txt`: the file name of the frame with the most "
                "stars (ties: first by name)"
            )
        if level >= 4:
            asks.append('`/app/out/summary.json`: `{"images": I, "stars": S}`')
            asks.append(
                "`/app/out/checksums.sha256`: sha256sum lines for the .stars files and counts.txt"
            )
        body = (
            "The guide camera saved frames as 8-bit RGB PNGs in /app/frames. "
            f"For this job {star_rule}. Please produce:\n\n" + bullets(asks)
        )
        if code:
            body += (
                f"\n\nI need the detector as a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: given one PNG path it prints that frame's .stars content. "
                "It will see other frames and sizes (same PNG flavour: 8-bit RGB, "
                "non-interlaced, one IDAT chunk, filter type 0 on every row). No "
                "third-party imaging libraries are installed."
            )
        source = {"python": _STAR_ORACLE + _STAR_PY, "bash": _STAR_BASH}[lang]
        source = source.replace("@THRESHOLD@", str(threshold))
        source = source.replace("@MIN_SIZE@", str(min_size))
        tool = prog if code else "/tmp/stars.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = ["mkdir -p /app/out", heredoc(tool, source)]
        for img, out in pairs:
            lines.append(f"{run} {img} > {out}")
        if level >= 2:
            lines.append(": > /app/out/counts.txt")
            for img, out in pairs:
                name = img.rsplit("/", 1)[1]
                lines.append(
                    f"echo \"{name} $(head -n 1 {out} | cut -d' ' -f2)\" >> /app/out/counts.txt"
                )
        if level >= 3:
            lines.append(
                "sort -k2,2nr -k1,1 /app/out/counts.txt | head -n 1 | cut -d' ' -f1 "
                "> /app/out/richest.txt"
            )
        if level >= 4:
            lines.append("stars=$(awk '{s += $2} END {print s + 0}' /app/out/counts.txt)")
            lines.append(
                f'printf \'{{"images": {len(pairs)}, "stars": %d}}\\n\' "$stars" '
                "> /app/out/summary.json"
            )
            lines.append(manifest_line([o.rsplit("/", 1)[1] for _, o in pairs] + ["counts.txt"]))
        extra = "\nimport struct\nimport zlib\n" + PNG_READER + _STAR_ORACLE + _STAR_TESTS
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", extra)},
            files=files,
        )
