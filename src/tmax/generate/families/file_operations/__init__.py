"""Task families of the file_operations domain.

Families here work on trees, records and archives: finding and cleaning up duplicate
files, parsing fixed-width exports, screening uploaded archives, and repairing legacy text
encodings. Reference code is written once as plain functions and pasted into tests and
Python reference programs; the task plumbing (test head, service frame, solution lines)
comes from :mod:`tmax.generate.builders`.
"""

from __future__ import annotations  # noqa: I001  (the family folders register first, in this order)

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    bullets,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    settings_lines,
    sha256_hex,
)
from tmax.generate.families.file_operations import (  # noqa: F401  (registers them first, in this order)
    duplicate_files,
    fixed_width,
    archive_guard,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# =====================================================================================
# file_operations.encoding_fix
# =====================================================================================

EF_WORDS = {
    "ascii": ["invoice", "total", "order", "shipped", "pending", "Berlin", "Oslo", "12.50"],
    "latin": ["café", "naïve", "Müller", "façade", "Ærø", "smörgåsbord", "jalapeño", "°C", "½"],
    "cp1252": ["€100", "“quoted”", "— dash", "…", "™", "‘tick’", "Œuvre", "šalt"],
    "wide": ["Łódź", "Ωmega", "日本", "Привет", "ﬁ ligature", "≤ 5", "🙂"],
}
EF_KINDS = ("utf-8", "utf-8-bom", "utf-16le", "utf-16be", "windows-1252", "latin-1")


def ef_text(rng, kind, level):
    pools = ["ascii", "latin"]
    if kind == "windows-1252":
        pools.append("cp1252")
    if kind.startswith("utf"):
        pools += ["cp1252", "wide"]
    lines = []
    for _ in range(rng.randint(2, 8)):
        words = [rng.choice(EF_WORDS[rng.choice(pools)]) for _ in range(rng.randint(2, 7))]
        lines.append(" ".join(words))
    if kind == "windows-1252":
        lines[rng.randrange(len(lines))] += " " + rng.choice(EF_WORDS["cp1252"])
    return "\n".join(lines) + "\n"


def ef_file(rng, level, kind=None):
    """(bytes, kind) of one vendor file."""
    kind = kind or rng.choice(EF_KINDS)
    text = ef_text(rng, kind, level)
    if level >= 2 and rng.random() < 0.4:
        text = text.replace("\n", "\r\n")
    if level >= 3 and rng.random() < 0.25:
        text += "\x1a"
    codec = {"utf-8-bom": "utf-8-sig", "utf-16le": "utf-16-le", "utf-16be": "utf-16-be"}
    data = text.encode(codec.get(kind, kind))
    if kind == "utf-16le":
        data = b"\xff\xfe" + data
    elif kind == "utf-16be":
        data = b"\xfe\xff" + data
    return data, kind


def ef_detect(data):
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8-bom"
    if data.startswith(b"\xff\xfe"):
        return "utf-16le"
    if data.startswith(b"\xfe\xff"):
        return "utf-16be"
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if any(0x80 <= b <= 0x9F for b in data):
        return "windows-1252"
    return "latin-1"


def ef_convert(data, level):
    kind = ef_detect(data)
    if kind == "utf-8-bom":
        text = data[3:].decode("utf-8")
    elif kind == "utf-16le":
        text = data[2:].decode("utf-16-le")
    elif kind == "utf-16be":
        text = data[2:].decode("utf-16-be")
    else:
        text = data.decode({"utf-8": "utf-8", "windows-1252": "cp1252"}.get(kind, "latin-1"))
    if level >= 2:
        text = text.replace("\r\n", "\n")
    if level >= 3 and text.endswith("\x1a"):
        text = text[:-1]
    return text.encode("utf-8")


_EF_PY = (
    """#!/usr/bin/env python3
\"\"\"Convert one vendor text file to clean UTF-8 on standard output.\"\"\"
import sys

LEVEL = @LEVEL@

"""
    + function_sources(ef_detect, ef_convert)
    + """


if __name__ == "__main__":
    if sys.argv[1] == "--detect":
        print(ef_detect(open(sys.argv[2], "rb").read()))
    else:
        sys.stdout.buffer.write(ef_convert(open(sys.argv[1], "rb").read(), LEVEL))
"""
)

_EF_SH = r"""#!/bin/bash
# Convert one vendor text file to clean UTF-8 on standard output (--detect FILE: its encoding).
export LC_ALL=C
LEVEL=@LEVEL@

detect() {
  local head
  head=$(head -c 3 "$1" | od -An -tx1 | tr -d ' \n')
  case $head in
    efbbbf) echo utf-8-bom ;;
    fffe*) echo utf-16le ;;
    feff*) echo utf-16be ;;
    *)
      if iconv -f UTF-8 -t UTF-8 "$1" > /dev/null 2>&1; then echo utf-8
      elif [[ $(tr -d '\000-\177\240-\377' < "$1" | head -c 1 | wc -c) -gt 0 ]]; then
        echo windows-1252
      else echo latin-1
      fi ;;
  esac
}

if [[ $1 == --detect ]]; then detect "$2"; exit 0; fi
kind=$(detect "$1")
case $kind in
  utf-8-bom) skip=3 from=UTF-8 ;;
  utf-16le) skip=2 from=UTF-16LE ;;
  utf-16be) skip=2 from=UTF-16BE ;;
  utf-8) skip=0 from=UTF-8 ;;
  windows-1252) skip=0 from=WINDOWS-1252 ;;
  *) skip=0 from=ISO-8859-1 ;;
esac
work=$(mktemp)
trap 'rm -f "$work"' EXIT
tail -c +$((skip + 1)) "$1" | iconv -f "$from" -t UTF-8 > "$work"
if ((LEVEL >= 2)); then sed -i 's/\r$//' "$work"; fi
if ((LEVEL >= 3)) && [[ $(tail -c 1 "$work" | od -An -tx1 | tr -d ' \n') == 1a ]]; then
  head -c -1 "$work"
else
  cat "$work"
fi
"""


# The names a user would pick for the folders, files and program, and how strict to be.
_EF_INBOXES = ("inbox", "incoming", "drops", "vendor_files", "landing")
_EF_DESTS = ("utf8", "clean", "converted", "normalized")
_EF_OUTS = ("out", "reports", "results")
_EF_REPORTS = ("encodings.txt", "detected.txt", "charsets.txt")
_EF_PROGRAMS = ("toutf8", "fixenc", "recode_utf8", "normalize_text")
_EF_SENDERS = ("northwind", "bluepeak", "kestrel", "lindqvist", "oakmont", "tamarind", "vega")
_EF_STEMS = (
    "orders",
    "stock",
    "prices",
    "customers",
    "notes",
    "returns",
    "catalogue",
    "availability",
    "products",
    "invoices",
    "rates",
    "contacts",
)
# Below 1 at every level: a metric task that needs every file is an exact task, and its
# instruction would ask for "at least 100%" (level 4's 18 files: one may be wrong).
_EF_THRESHOLDS = {1: (0.6, 0.65, 0.7), 2: (0.75, 0.8), 3: (0.85, 0.9), 4: (0.9,)}
_EF_LEADS = (
    "Tell the encodings apart like this:",
    "Decide each file's encoding by these checks, in this order:",
    "Work out the encoding of each file as follows:",
    "This is how to recognise which encoding a file uses:",
)
_EF_PROGRAM_INTROS = (
    "New drops arrive daily, so I also want a converter program",
    "More files come in every night, so I also need this as a program",
    "Our nightly import job should do the conversion itself, so please also write a program",
    "Since the senders will not change their systems, I also want a reusable converter",
)
_EF_OPENERS = (
    "The text files other organisations send us land in {tree}, each in whatever encoding "
    "the sender's system happens to use.",
    "Files from our partners arrive in {tree}, and half of them show garbled characters when "
    "we open them.",
    "Everything that lands in {tree} has to be readable as UTF-8 before our import jobs touch "
    "it, but the senders use all sorts of encodings.",
    "Our import scripts choke on the files in {tree}: every sender writes text in a different "
    "encoding.",
    "I keep finding mojibake in the files that arrive in {tree}, because every sender picks "
    "its own encoding.",
)


@register
class EncodingFix(Family):
    """Normalise vendor text files in mixed legacy encodings (BOMs, UTF-16, windows-1252,
    latin-1) to clean UTF-8; levels add CRLF endings and an encoding report, nested folders
    and DOS end-of-file markers, and a manifest with a JSON summary. metric_threshold scores
    the share of files converted exactly (a drawn bar, tightening with the level); code asks
    for a converter program run on fresh files. Folder, file and program names are drawn
    per task."""

    name = "file_operations.encoding_fix"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("convert", (r"Write each file, decoded accordingly, to the same relative path under "
                         r"`(?P<dest>/app/\w+)/` as UTF-8 without a BOM",),
             (r"def test_converted_files\(", r'out = Path\("{dest}", path\)')),
        Rule("detect_bom", (r"a file starting with the bytes EF BB BF is UTF-8 with a BOM",),
             (r'if data\.startswith\(b"\\xef\\xbb\\xbf"\)',)),
        Rule("detect_utf8", (r"otherwise, a file that is valid UTF-8 is UTF-8",),
             (r'data\.decode\("utf-8"\)\s+return "utf-8"',)),
        Rule("detect_legacy", (r"a file containing a byte from 0x80 to 0x9F is Windows-1252",),
             (r"if any\(0x80 <= b <= 0x9F for b in data\)",)),
        Rule("all_exact", (r"Every file must be converted exactly\.",),
             (r'need = CFG\["threshold"\] if CFG\["metric"\] else 1\.0',), when={"metric": False}),
        Rule("share_exact", (r"I need at least (?P<percent>\d+)% of the files converted exactly "
                             r"right",),
             (r'need = CFG\["threshold"\] if CFG\["metric"\] else 1\.0',), when={"metric": True}),
        Rule("inputs_untouched", (r"Leave the originals in `(?P<inbox>/app/\w+)/` as they are",),
             (r"def test_inputs_untouched\(", r'Path\("{inbox}", p\)\.read_bytes\(\)')),
        Rule("crlf", (r"CRLF line endings turned into LF",),
             (r'text = text\.replace\("\\r\\n", "\\n"\)',), levels=frozenset({2, 3, 4})),
        Rule("encodings_txt", (r"`(?P<report>/app/\w+/\w+\.txt)`: `PATH ENCODING`",),
             (r"assert paths == list\(SOURCES\)", r'read\("{report}"\)\.splitlines\(\)'),
             levels=frozenset({2, 3, 4})),
        Rule("eof_marker",
             (r"a final U\+001A character \(the old DOS end-of-file marker\) removed",),
             (r'if level >= 3 and text\.endswith\("\\x1a"\)',), levels=frozenset({3, 4})),
        Rule("manifest_tsv", (r"`(?P<out>/app/\w+)/manifest\.tsv`",),
             (r'read\("{out}/manifest\.tsv"\)',), levels=frozenset({4})),
        Rule("summary_json", (r"`(?P<out>/app/\w+)/summary\.json`",),
             (r'read\("{out}/summary\.json"\)',), levels=frozenset({4})),
        Rule("program",
             (r"given one file's path it writes the converted bytes to standard output\. Write it "
              r"in [^`]+ at `(?P<src>/app/\w+\.(?:py|sh))`",),
             (r"def test_converter_on_fresh_files\(", r"SRC = '{src}'"), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "detect legacy file encodings and convert them to UTF-8": "detect_legacy",
        "normalize Windows line endings to Unix style": "crlf",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        metric = ctx.verifier_kind == "metric_threshold"
        threshold = rng.choice(_EF_THRESHOLDS[level])
        count = {1: 6, 2: 10, 3: 14, 4: 18}[level]
        inbox = "/app/" + rng.choice(_EF_INBOXES)
        dest = "/app/" + rng.choice(_EF_DESTS)
        out = "/app/" + rng.choice(_EF_OUTS)
        report = f"{out}/{rng.choice(_EF_REPORTS)}"
        tool_name = rng.choice(_EF_PROGRAMS)
        opener = rng.choice(_EF_OPENERS)
        lead = rng.choice(_EF_LEADS)
        program_intro = rng.choice(_EF_PROGRAM_INTROS)
        stems = rng.sample(_EF_STEMS, 6)
        if level <= 2:
            folders = [""]
        else:
            senders = rng.sample(_EF_SENDERS, 3)
            year = rng.randint(2019, 2024)
            folders = [f"{senders[0]}/", f"{senders[1]}/", f"{senders[2]}/{year}/"]
        base = inbox.removeprefix("/app/")
        files: dict[str, str | bytes] = {}
        kinds = list(EF_KINDS) * 4
        rng.shuffle(kinds)
        for i in range(count):
            data, _kind = ef_file(rng, level, kinds[i])
            files[f"{base}/{rng.choice(folders)}{rng.choice(stems)}-{i:02d}.txt"] = data
        paths = sorted(rel.removeprefix(f"{base}/") for rel in files)
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        rules = [
            "a file starting with the bytes EF BB BF is UTF-8 with a BOM (`utf-8-bom`); FF FE "
            "is UTF-16 little-endian (`utf-16le`), FE FF UTF-16 big-endian (`utf-16be`), the BOM "
            "being part of neither the text nor the output",
            "otherwise, a file that is valid UTF-8 is UTF-8 (`utf-8`)",
            "otherwise, a file containing a byte from 0x80 to 0x9F is Windows-1252 "
            "(`windows-1252`), and anything else is ISO-8859-1 (`latin-1`)",
        ]
        cleanup = ["UTF-8 without a BOM"]
        if level >= 2:
            cleanup.append("CRLF line endings turned into LF")
        if level >= 3:
            cleanup.append(
                "a final U+001A character (the old DOS end-of-file marker) removed, if present"
            )
        tree = f"`{inbox}/` (with subfolders)" if level >= 3 else f"`{inbox}/`"
        goal = (
            f"I need at least {threshold:.0%} of the files converted exactly right."
            if metric
            else "Every file must be converted exactly."
        )
        body = [
            opener.format(tree=tree)
            + f" {lead}\n"
            + bullets(rules)
            + f"\n\nWrite each file, decoded accordingly, to the same relative path under "
            f"`{dest}/` as "
            + ", ".join(cleanup)
            + ". "
            + goal
            + f" Leave the originals in `{inbox}/` as they are."
        ]
        deliverables = []
        if level >= 2:
            deliverables.append(
                f"`{report}`: `PATH ENCODING` for every file (PATH relative to `{inbox}`, "
                "ENCODING one of the names above), sorted by path."
            )
        if level >= 4:
            deliverables.append(
                f"`{out}/manifest.tsv`: `PATH<TAB>ENCODING<TAB>LINES<TAB>SHA256` per file, "
                "sorted by path: LINES counts the newline characters of the converted file, "
                "SHA256 is the hex digest of the converted file."
            )
            deliverables.append(
                f"`{out}/summary.json`: `files`, `by_encoding` (encoding → number of files) "
                "and `bytes` (total size of the converted files)."
            )
        if deliverables:
            body.append("Also write:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, f"/app/{tool_name}")
            share = (
                f"at least {threshold:.0%} of them exactly right"
                if metric
                else "all of them exactly right"
            )
            body.append(
                f"{program_intro}: given one file's path it writes the converted bytes to "
                "standard output. "
                + program_sentence(language, program)
                + f" It will be tried on files you have not seen and must get {share}."
            )
        instruction = "\n\n".join(body)

        steps = [f"mkdir -p {dest} {out}"]
        if level >= 2:
            steps.append(f"find {inbox} -type f -exec file -b {{}} + | sort | uniq -c")
        if level >= 4:
            steps.append(f"find {inbox} -type f | wc -l")
        if language:
            source = {"python": _EF_PY, "bash": _EF_SH}[language]
            steps.append(program_step(language, program, source.replace("@LEVEL@", str(level))))
            tool = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/toutf8.sh", _EF_SH.replace("@LEVEL@", str(level))))
            tool = "bash /tmp/toutf8.sh"
        steps.append(
            f"cd {inbox} && find . -type f | sed 's|^\\./||' | LC_ALL=C sort > /tmp/files.txt"
        )
        steps.append(
            f'while IFS= read -r f; do mkdir -p "{dest}/$(dirname "$f")";'
            f' {tool} "{inbox}/$f" > "{dest}/$f"; done < /tmp/files.txt'
        )
        if level >= 2:
            steps.append(
                f'while IFS= read -r f; do echo "$f $({tool} --detect "{inbox}/$f")";'
                f" done < /tmp/files.txt > {report}"
            )
        if level >= 4:
            steps += [
                'while read -r f enc; do printf \'%s\\t%s\\t%s\\t%s\\n\' "$f" "$enc"'
                f' "$(tr -dc \'\\n\' < "{dest}/$f" | wc -c)"'
                f' "$(sha256sum < "{dest}/$f" | cut -d\' \' -f1)";'
                f" done < {report} > {out}/manifest.tsv",
                f"files=$(wc -l < {out}/manifest.tsv)",
                f"bytes=$(find {dest} -type f -exec cat {{}} + | wc -c)",
                'by=$(awk \'{n[$2]++} END {for (e in n) printf "%s\\"%s\\": %d",'
                f' (k++ ? ", " : ""), e, n[e]}}\' {report})',
                'printf \'{"files": %d, "by_encoding": {%s}, "bytes": %d}\\n\' "$files"'
                f' "$by" "$bytes" > {out}/summary.json',
                f"python3 -m json.tool {out}/summary.json",
            ]
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "hashes": hashes,
            "paths": paths,
            "code": language is not None,
            "metric": metric,
            "threshold": threshold,
            "fresh": {1: 8, 2: 12, 3: 16, 4: 20}[level],
        }
        # the tests are written for the default paths; the drawn ones replace them
        named = {
            "/app/inbox": inbox,
            "/app/utf8": dest,
            "/app/out/encodings.txt": report,
            "/app/out": out,
        }
        checks = _EF_TESTS
        for default, chosen in named.items():
            checks = checks.replace(default, chosen)
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + f"EF_WORDS = {EF_WORDS!r}\nEF_KINDS = {EF_KINDS!r}\n\n"
            + function_sources(ef_text, ef_file, ef_detect, ef_convert)
            + "\n\n"
            + settings_lines(params)
            + checks
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_EF_TESTS = '''
LEVEL = CFG["level"]
SOURCES = {p: Path("/app/inbox", p).read_bytes() for p in CFG["paths"]}


def score(pairs):
    """Share of (got, expected) pairs that are equal."""
    return sum(got == want for got, want in pairs) / len(pairs)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_converted_files():
    pairs = []
    for path, data in SOURCES.items():
        out = Path("/app/utf8", path)
        pairs.append((out.read_bytes() if out.is_file() else None, ef_convert(data, LEVEL)))
    share = score(pairs)
    print(f"metric: {share:.3f} of the files converted exactly")
    need = CFG["threshold"] if CFG["metric"] else 1.0
    wrong = [p for p, (g, w) in zip(SOURCES, pairs) if g != w]
    assert share >= need, f"converted exactly: {share:.2f} < {need:.2f}; wrong: {wrong[:6]}"


def test_encodings():
    if CFG["level"] >= 2:
        lines = read("/app/out/encodings.txt").splitlines()
        paths = [line.split(" ", 1)[0] for line in lines]
        assert paths == list(SOURCES), "encodings.txt must list every file once, sorted by path"
        pairs = [(line, f"{p} {ef_detect(d)}") for line, (p, d) in zip(lines, SOURCES.items())]
        share = score(pairs)
        print(f"metric: {share:.3f} of the encodings reported right")
        need = CFG["threshold"] if CFG["metric"] else 1.0
        assert share >= need, f"encodings right: {share:.2f} < {need:.2f}"


def test_manifest_and_summary():
    if CFG["level"] >= 4:
        reported = dict(line.split(" ", 1) for line in read("/app/out/encodings.txt").splitlines())
        rows, total, by = [], 0, {}
        for path in SOURCES:
            data = Path("/app/utf8", path).read_bytes()
            total += len(data)
            by[reported[path]] = by.get(reported[path], 0) + 1
            digest, lines = hashlib.sha256(data).hexdigest(), data.count(b"\\n")
            rows.append(f"{path}\\t{reported[path]}\\t{lines}\\t{digest}\\n")
        assert read("/app/out/manifest.tsv") == "".join(rows), "manifest.tsv is wrong"
        data = json.loads(read("/app/out/summary.json"))
        want = {"files": len(SOURCES), "by_encoding": by, "bytes": total}
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_converter_on_fresh_files(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1252)
    pairs = []
    for i in range(CFG["fresh"]):
        data, _kind = ef_file(rng, LEVEL, EF_KINDS[i % len(EF_KINDS)])
        path = tmp_path / f"drop{i}.txt"
        path.write_bytes(data)
        done = subprocess.run(program() + [str(path)], capture_output=True, timeout=60)
        pairs.append((done.stdout if done.returncode == 0 else None, ef_convert(data, LEVEL)))
    share = score(pairs)
    print(f"metric: the converter got {share:.3f} of fresh files exactly right")
    need = CFG["threshold"] if CFG["metric"] else 1.0
    assert share >= need, f"fresh files converted exactly: {share:.2f} < {need:.2f}"
'''
