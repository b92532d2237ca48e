"""Vendor text files in mixed legacy encodings (BOMs, UTF-16, windows-1252, latin-1)
normalised to clean UTF-8 (the task's files are the templates beside this module; the
reference converter in Python or Bash is ``solution/toutf8.*``). The file generator and
the detection and conversion rules stay Python functions: their source is pasted into
the tests and the Python converter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    fixture_test_head,
    function_sources,
    invoke,
    program_path,
    program_sentence,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

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

        tree = f"`{inbox}/` (with subfolders)" if level >= 3 else f"`{inbox}/`"
        program = program_path(language, f"/app/{tool_name}") if language else None
        template = templates(__name__)
        values = {
            "level": level,
            "code": language is not None,
            "metric": metric,
            "percent": f"{threshold:.0%}",
            "opener": opener.format(tree=tree),
            "lead": lead,
            "program_intro": program_intro,
            "inbox": inbox,
            "dest": dest,
            "out": out,
            "report": report,
        }
        if language:
            ext = {"python": "py", "bash": "sh"}[language]
            values["program_sentence"] = program_sentence(language, program)
            values["program"] = program
            values["tool"] = invoke(language, program)
        else:
            ext = "sh"
            values["tool"] = "bash /tmp/toutf8.sh"
        values["source"] = template.render(
            f"solution/toutf8.{ext}",
            level=level,
            functions=function_sources(ef_detect, ef_convert),
        ).strip()

        params = {
            "level": level,
            "hashes": hashes,
            "paths": paths,
            "code": language is not None,
            "metric": metric,
            "threshold": threshold,
            "fresh": {1: 8, 2: 12, 3: 16, 4: 20}[level],
        }
        tests = template.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            words=EF_WORDS,
            kinds=EF_KINDS,
            functions=function_sources(ef_text, ef_file, ef_detect, ef_convert),
            settings=settings_lines(params).rstrip("\n"),
            inbox=inbox,
            dest=dest,
            report=report,
            out=out,
        )
        return Draft(
            instruction=template.render("instruction.md", **values),
            solution=template.render("solution/solve.sh", **values),
            tests={"test_task.py": tests},
            files=files,
        )
