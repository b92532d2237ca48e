"""A mainframe's fixed-width exports to CSV by their layout file (the task's files are
the templates beside this module; the reference converter in Python, Bash or C is
``solution/fw2csv.*``, the totals helper ``solution/csvsum.awk``). The layout and record
generators and the conversion rules stay Python functions: their source is pasted into
the tests and the Python converter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    build_step,
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

FW_NAMES = (
    "Ada Lovelace",
    "Grace Hopper",
    "Alan Turing",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Ken Thompson",
    "Margaret Hamilton",
    "Dennis Ritchie",
)
FW_TRICKY = ("Smith, John", 'Bob "Builder" Ray', "O'Neil, Pat", "  Lee Kwan")
FW_ACCENTED = ("José Núñez", "Zoë Müller", "François Lefèvre", "Åsa Öberg")


def fw_layout(rng, level, group="dept"):
    """[(field, start, width, kind)] with 1-based starts; level 3+ leaves column 1 for the
    record type. ``group`` names the level 2+ text field the totals are grouped by."""
    fields = [
        ("id", "int", rng.randint(5, 8)),
        ("name", "text", rng.randint(14, 24)),
        ("amount", "money", rng.randint(9, 11)),
        ("date", "date", 8),
    ]
    if level >= 2:
        fields.append((group, "text", rng.randint(3, 5)))
    rng.shuffle(fields)
    start = 2 if level >= 3 else 1
    layout = []
    for name, kind, width in fields:
        layout.append((name, start, width, kind))
        start += width
    return layout


def fw_layout_text(layout):
    return "# field start width type\n" + "".join(
        f"{name} {start} {width} {kind}\n" for name, start, width, kind in layout
    )


def fw_parse_layout(text):
    layout = []
    for line in text.split("\n"):
        parts = line.split()
        if len(parts) >= 4 and not parts[0].startswith("#"):
            layout.append((parts[0], int(parts[1]), int(parts[2]), parts[3]))
    return layout


def fw_record(rng, layout, level, broken=None, group="dept"):
    """One detail record (bytes, latin-1) and its amount in cents (None when broken)."""
    cents = rng.randint(-99999, 9999999)
    if rng.random() < 0.05:
        cents = 0
    out = bytearray(b"D" if level >= 3 else b"")
    for name, _start, width, kind in layout:
        if kind == "int":
            field = str(rng.randint(1, 10 ** (width - 1))).rjust(width, "0")
        elif kind == "money":
            digits = str(abs(cents)).rjust(width - 1, "0")
            field = ("-" if cents < 0 else "0") + digits
            if broken == "amount":
                pos = rng.randrange(1, width)
                field = field[:pos] + rng.choice("O lI") + field[pos + 1 :]
        elif kind == "date":
            year, month, day = rng.randint(2019, 2024), rng.randint(1, 12), rng.randint(1, 28)
            field = f"{year}{month:02d}{day:02d}"
            if broken == "date":
                field = rng.choice(["20230230", "20221301", "20240001", "2024-1-5", "20210931"])
        elif name == group:
            field = rng.choice(["HR", "OPS", "FIN", "IT", "R&D", "LAB"])[:width].ljust(width)
        else:
            pool = list(FW_NAMES)
            if level >= 2:
                pool += FW_TRICKY
            if level >= 4:
                pool += FW_ACCENTED
            text = rng.choice(pool)[:width]
            field = text.rjust(width) if rng.random() < 0.15 else text.ljust(width)
        out += field.encode("latin-1")
    if broken == "length":
        out = out[: -rng.randint(1, 4)]
    return bytes(out), (None if broken else cents)


def fw_file(rng, layout, level, count, broken=0, mismatch=False, group="dept"):
    """The bytes of one export file."""
    lines, total, details = [], 0, 0
    if level >= 3:
        lines.append(f"H{rng.randint(20230101, 20231228)} DAILY EXPORT".encode())
    kinds = [None] * count
    for i in rng.sample(range(count), min(broken, count)):
        kinds[i] = rng.choice(["amount", "date", "length"])
    for kind in kinds:
        line, cents = fw_record(rng, layout, level, kind, group)
        lines.append(line)
        details += 1
        if cents is not None:
            total += cents
    if level >= 3:
        if mismatch:
            total += rng.choice([-100, 1, 2500])
        sign = "-" if total < 0 else "0"
        lines.append(f"T{details:08d}{sign}{abs(total):013d}".encode())
    end = b"\r\n" if level >= 2 else b"\n"
    return end.join(lines) + end


def fw_money(cents):
    return f"{'-' if cents < 0 else ''}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def fw_convert(data, layout, level, group="dept"):
    """(header, rows, rejects): rows are (values, cents, group value); rejects (line, reason)."""
    import re

    header = [name for name, _s, _w, _k in layout]
    length = max(start + width - 1 for _n, start, width, _k in layout)
    rows, rejects = [], []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if level >= 2 and raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw or (level >= 3 and raw[:1] != b"D"):
            continue
        if len(raw) != length:
            rejects.append((number, "length"))
            continue
        values, cents, dept, reason = [], 0, "", None
        for name, start, width, kind in layout:
            text = raw[start - 1 : start - 1 + width].decode("latin-1")
            if kind == "text":
                value = text.strip(" ")
                if name == group:
                    dept = value
            elif kind == "int":
                value = str(int(text))
            elif kind == "money":
                if not re.fullmatch(r"-?[0-9]+", text):
                    reason = "amount"
                    break
                cents = int(text)
                value = fw_money(cents)
            else:
                ok = re.fullmatch(r"[0-9]{8}", text) is not None
                if ok:
                    year, month, day = int(text[:4]), int(text[4:6]), int(text[6:])
                    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
                    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
                    ok = 1 <= month <= 12 and 1 <= day <= days[month - 1]
                if not ok:
                    reason = "date"
                    break
                value = f"{text[:4]}-{text[4:6]}-{text[6:]}"
            values.append(value)
        if reason:
            rejects.append((number, reason))
        else:
            rows.append((values, cents, dept))
    return header, rows, rejects


def fw_csv(values):
    out = []
    for value in values:
        if "," in value or '"' in value:
            value = '"' + value.replace('"', '""') + '"'
        out.append(value)
    return ",".join(out)


def fw_csv_text(header, rows):
    return "".join(fw_csv(v) + "\n" for v in [header] + [r[0] for r in rows])


# The names a user would pick for the folders, files, grouping field and program.
_FW_FOLDERS = ("export", "mainframe", "extracts", "feeds", "legacy")
_FW_OUTS = ("out", "csv", "converted", "output", "results")
_FW_LAYOUTS = ("layout.txt", "layout.def", "copybook.txt", "fields.txt", "record_layout.txt")
_FW_SINGLE = ("records", "accounts", "billing", "members", "extract", "ledger")
_FW_DAILY = ("day", "batch", "run", "daily")
_FW_EXTS = (".dat", ".txt", ".fw")
_FW_GROUPS = {"dept": "department", "branch": "branch", "region": "region", "office": "office"}
_FW_PROGRAMS = ("fw2csv", "fixed2csv", "mf2csv", "flat2csv")
_FW_OPENERS = (
    "The mainframe is being retired, and its exports have to become something our new tools "
    "can read.",
    "Nobody here wants to count columns by hand any more, so the mainframe's fixed-width "
    "exports should become CSV.",
    "Our analysts keep asking for the mainframe data in a form they can open in a spreadsheet.",
    "Before we switch the old system off, I want its exports converted to CSV.",
    "The new platform only loads CSV, while the mainframe only writes fixed-width records.",
)


@register
class FixedWidth(Family):
    """Convert a mainframe's fixed-width export to CSV using its layout file; levels add
    CRLF endings, quoting and per-group totals, daily files with header/trailer records
    to validate, and latin-1 text with damaged records to reject plus a JSON summary.
    Folder, file, grouping field and program names are drawn per task. Code asks for a
    converter program fuzzed on fresh layouts and records."""

    name = "file_operations.fixed_width"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("records_csv", (r"`(?P<out>/app/\w+)/records\.csv`: ",),
             (r"def test_records_csv\(", r'read_utf8\("{out}/records\.csv"\)')),
        Rule("field_types", (r"`money`: implied two decimals",), (r"value = fw_money\(cents\)",)),
        Rule("layout_file", (r"in fixed-width columns described by `(?P<layout>/app/\w+/[\w.]+)`",),
             (r'fw_parse_layout\(Path\("{layout}"\)\.read_text\(\)\)',)),
        Rule("inputs_untouched", (r"Leave the files in `(?P<folder>/app/\w+)/` as they are",),
             (r"def test_inputs_untouched\(", r'Path\("{folder}", n\)\.read_bytes\(\)')),
        Rule("csv_quoting", (r"a value containing a comma or a double quote is wrapped",),
             (r"""if "," in value or '"' in value:""",), levels=frozenset({2, 3, 4})),
        Rule("crlf", (r"CRLF line endings",), (r'if level >= 2 and raw\.endswith\(b"\\r"\)',),
             levels=frozenset({2, 3, 4})),
        Rule("group_totals", (r"`(?P<out>/app/\w+)/(?P<group>\w+)_totals\.txt`: `\w+ TOTAL` for "
                              r"each \w+ \(the `(?P=group)` field",),
             (r'read\("{out}/{group}_totals\.txt"\)', r'"group": "{group}"'),
             levels=frozenset({2, 3, 4})),
        Rule("record_types", (r"only `D` lines are records",),
             (r'level >= 3 and raw\[:1\] != b"D"',), levels=frozenset({3, 4})),
        Rule("file_column", (r"extra first column `file`",),
             (r'expected = fw_csv\(\["file"\] \+ header\)',), levels=frozenset({3, 4})),
        Rule("validation", (r"`(?P<out>/app/\w+)/validation\.txt`",),
             (r'read\("{out}/validation\.txt"\)',), levels=frozenset({3, 4})),
        Rule("latin1_to_utf8", (r"Text is latin-1 encoded; the CSV must be UTF-8",),
             (r"pool \+= FW_ACCENTED",), levels=frozenset({4})),
        Rule("reject_damaged", (r"Some D records are damaged and must be rejected",),
             (r'read\("/app/\w+/rejects\.txt"\)',), levels=frozenset({4})),
        Rule("rejects_txt", (r"`(?P<out>/app/\w+)/rejects\.txt`",),
             (r'read\("{out}/rejects\.txt"\)',), levels=frozenset({4})),
        Rule("summary_json", (r"`(?P<out>/app/\w+)/summary\.json`",),
             (r'read\("{out}/summary\.json"\)',), levels=frozenset({4})),
        Rule("program", (r"`(?P<prog>\w+) LAYOUT FILE` prints the CSV",),
             (r"def test_converter_on_fresh_files\(", r"SRC = '/app/{prog}\.(?:py|sh|c)'"),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "extract fields from fixed-width text records": "field_types",
        "normalize Windows line endings to Unix style": "crlf",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        folder = "/app/" + rng.choice(_FW_FOLDERS)
        out = "/app/" + rng.choice(_FW_OUTS)
        layout_path = f"{folder}/{rng.choice(_FW_LAYOUTS)}"
        group = rng.choice(sorted(_FW_GROUPS))
        noun = _FW_GROUPS[group]
        tool_name = rng.choice(_FW_PROGRAMS)
        opener = rng.choice(_FW_OPENERS)
        ext = rng.choice(_FW_EXTS)
        layout = fw_layout(rng, level, group)
        base = folder.removeprefix("/app/")
        files: dict[str, str | bytes] = {layout_path.removeprefix("/app/"): fw_layout_text(layout)}
        if level <= 2:
            names = [rng.choice(_FW_SINGLE) + ext]
            data = fw_file(rng, layout, level, 12 if level == 1 else 25, group=group)
            files[f"{base}/{names[0]}"] = data
        else:
            prefix = rng.choice(_FW_DAILY)
            names = [f"{prefix}-{i}{ext}" for i in (1, 2, 3)]
            bad = rng.randrange(3)
            for i, name in enumerate(names):
                files[f"{base}/{name}"] = fw_file(
                    rng, layout, level, 20, 3 if level >= 4 else 0, i == bad, group
                )
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        program = program_path(language, f"/app/{tool_name}") if language else None
        template = templates(__name__)
        values = {
            "level": level,
            "code": language is not None,
            "opener": opener,
            "folder": folder,
            "out": out,
            "layout_path": layout_path,
            "names": names,
            "group": group,
            "noun": noun,
            "tool_name": tool_name,
        }
        functions = function_sources(fw_parse_layout, fw_money, fw_convert, fw_csv, fw_csv_text)
        if language:
            ext = {"python": "py", "bash": "sh", "c": "c"}[language]
            values["program_sentence"] = program_sentence(language, program)
            values["program"] = program
            values["build"] = build_step(language, program)
            values["tool"] = invoke(language, program)
            source = template.render(
                f"solution/fw2csv.{ext}", level=level, tool_name=tool_name, functions=functions
            )
        else:
            values["tool"] = "bash /tmp/fw2csv.sh"
            source = template.render("solution/fw2csv.sh", level=level, tool_name="fw2csv")
        values["source"] = source.strip()
        values["awk"] = template.render("solution/csvsum.awk").strip()

        params = {
            "level": level,
            "hashes": hashes,
            "names": names,
            "group": group,
            "code": language is not None,
            "cases": {1: 4, 2: 6, 3: 8, 4: 10}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = template.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            names=FW_NAMES,
            tricky=FW_TRICKY,
            accented=FW_ACCENTED,
            functions=function_sources(
                fw_layout,
                fw_layout_text,
                fw_parse_layout,
                fw_record,
                fw_file,
                fw_money,
                fw_convert,
                fw_csv,
                fw_csv_text,
            ),
            settings=settings_lines(params).rstrip("\n"),
            layout_path=layout_path,
            folder=folder,
            out=out,
            group=group,
        )
        return Draft(
            instruction=template.render("instruction.md", **values),
            solution=template.render("solution/solve.sh", **values),
            tests={"test_task.py": tests},
            files=files,
        )
