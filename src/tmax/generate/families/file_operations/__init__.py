"""Task families of the file_operations domain.

Families here work on trees, records and archives: finding and cleaning up duplicate
files, parsing fixed-width exports, screening uploaded archives, and repairing legacy text
encodings. Reference code is written once as plain functions and pasted into tests and
Python reference programs; the task plumbing (test head, service frame, solution lines)
comes from :mod:`tmax.generate.builders`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
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
    settings_lines,
    sha256_hex,
)
from tmax.generate.families.file_operations import duplicate_files  # noqa: F401  (registers it first)
from tmax.generate.family import Draft, Family, RenderContext, register

# =====================================================================================
# file_operations.fixed_width
# =====================================================================================

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


_FW_PY = (
    """#!/usr/bin/env python3
\"\"\"Convert a fixed-width export to CSV: fw2csv LAYOUT FILE (CSV on stdout, UTF-8;
rejected records as `LINE REASON` on stderr).\"\"\"
import sys

LEVEL = @LEVEL@

"""
    + function_sources(fw_parse_layout, fw_money, fw_convert, fw_csv, fw_csv_text)
    + """


def main():
    layout = fw_parse_layout(open(sys.argv[1], encoding="utf-8").read())
    header, rows, rejects = fw_convert(open(sys.argv[2], "rb").read(), layout, LEVEL)
    sys.stdout.buffer.write(fw_csv_text(header, rows).encode("utf-8"))
    for number, reason in rejects:
        print(number, reason, file=sys.stderr)


if __name__ == "__main__":
    main()
"""
)

_FW_SH = r"""#!/bin/bash
# Convert a fixed-width export to CSV: fw2csv LAYOUT FILE (CSV on stdout, UTF-8;
# rejected records as `LINE REASON` on stderr).
export LC_ALL=C
LEVEL=@LEVEL@
names=() starts=() widths=() kinds=()
while read -r name start width kind rest || [[ -n $name ]]; do
  [[ -z $name || -z $kind || $name == \#* ]] && continue
  names+=("$name") starts+=("$start") widths+=("$width") kinds+=("$kind")
done < "$1"
length=0
for i in "${!names[@]}"; do
  end=$((starts[i] + widths[i] - 1))
  ((end > length)) && length=$end
done

valid_date() {
  [[ $1 =~ ^[0-9]{8}$ ]] || return 1
  local y=$((10#${1:0:4})) m=$((10#${1:4:2})) d=$((10#${1:6:2})) days
  ((m >= 1 && m <= 12 && d >= 1)) || return 1
  case $m in
    2) if (((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)); then days=29; else days=28; fi ;;
    4 | 6 | 9 | 11) days=30 ;;
    *) days=31 ;;
  esac
  ((d <= days))
}

{
  (IFS=,; printf '%s\n' "${names[*]}")
  n=0
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    if ((LEVEL >= 2)); then line=${line%$'\r'}; fi
    [[ -z $line ]] && continue
    if ((LEVEL >= 3)) && [[ ${line:0:1} != D ]]; then continue; fi
    if ((${#line} != length)); then echo "$n length" >&2; continue; fi
    out="" bad=""
    for i in "${!names[@]}"; do
      v=${line:starts[i]-1:widths[i]}
      case ${kinds[i]} in
        text) v=${v#"${v%%[! ]*}"}; v=${v%"${v##*[! ]}"} ;;
        int) v=$((10#$v)) ;;
        money)
          if [[ ! $v =~ ^-?[0-9]+$ ]]; then bad=amount; break; fi
          cents=$((10#${v#-}))
          sign=""
          if [[ $v == -* ]] && ((cents)); then sign=-; fi
          printf -v v '%s%d.%02d' "$sign" $((cents / 100)) $((cents % 100)) ;;
        date)
          if ! valid_date "$v"; then bad=date; break; fi
          v=${v:0:4}-${v:4:2}-${v:6:2} ;;
      esac
      if [[ $v == *[,\"]* ]]; then v=\"${v//\"/\"\"}\"; fi
      if ((i > 0)); then out+=,; fi
      out+=$v
    done
    if [[ -n $bad ]]; then echo "$n $bad" >&2; continue; fi
    printf '%s\n' "$out"
  done < "$2"
} | iconv -f ISO-8859-1 -t UTF-8
"""

_FW_C = r"""/* Convert a fixed-width export to CSV: fw2csv LAYOUT FILE (CSV on stdout, UTF-8;
   rejected records as `LINE REASON` on stderr). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL @LEVEL@

static char fname[64][64], fkind[64][16];
static int fstart[64], fwidth[64], nfields;

static void put(const unsigned char *s, size_t n, char *out, size_t *len) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x80) {
            out[(*len)++] = (char)s[i];
        } else {
            out[(*len)++] = (char)(0xC0 | (s[i] >> 6));
            out[(*len)++] = (char)(0x80 | (s[i] & 0x3F));
        }
    }
}

static void field(const unsigned char *v, size_t n, char *out, size_t *len) {
    int quote = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ',' || v[i] == '"') quote = 1;
    if (!quote) {
        put(v, n, out, len);
        return;
    }
    out[(*len)++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '"') out[(*len)++] = '"';
        put(v + i, 1, out, len);
    }
    out[(*len)++] = '"';
}

static int valid_date(const unsigned char *s) {
    for (int i = 0; i < 8; i++)
        if (!isdigit(s[i])) return 0;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int m = (s[4] - '0') * 10 + (s[5] - '0'), d = (s[6] - '0') * 10 + (s[7] - '0');
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1];
}

int main(int argc, char **argv) {
    static char line[65536], out[262144];
    if (argc < 3) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return perror(argv[1]), 1;
    while (fgets(line, sizeof line, in) && nfields < 64) {
        char name[64], kind[16];
        int start, width;
        if (line[0] == '#') continue;
        if (sscanf(line, "%63s %d %d %15s", name, &start, &width, kind) != 4) continue;
        strcpy(fname[nfields], name);
        strcpy(fkind[nfields], kind);
        fstart[nfields] = start;
        fwidth[nfields++] = width;
    }
    fclose(in);
    int length = 0;
    for (int i = 0; i < nfields; i++)
        if (fstart[i] + fwidth[i] - 1 > length) length = fstart[i] + fwidth[i] - 1;
    for (int i = 0; i < nfields; i++) printf("%s%s", i ? "," : "", fname[i]);
    putchar('\n');
    in = fopen(argv[2], "rb");
    if (!in) return perror(argv[2]), 1;
    long number = 0;
    while (fgets(line, sizeof line, in)) {
        number++;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        if (LEVEL >= 2 && n && line[n - 1] == '\r') line[--n] = 0;
        if (!n || (LEVEL >= 3 && line[0] != 'D')) continue;
        if ((int)n != length) {
            fprintf(stderr, "%ld length\n", number);
            continue;
        }
        size_t len = 0;
        const char *bad = NULL;
        for (int i = 0; i < nfields && !bad; i++) {
            const unsigned char *v = (const unsigned char *)line + fstart[i] - 1;
            size_t w = (size_t)fwidth[i];
            char text[128];
            if (i) out[len++] = ',';
            if (!strcmp(fkind[i], "text")) {
                while (w && *v == ' ') v++, w--;
                while (w && v[w - 1] == ' ') w--;
                field(v, w, out, &len);
            } else if (!strcmp(fkind[i], "int")) {
                long long x = 0;
                for (size_t k = 0; k < w; k++) x = x * 10 + (v[k] - '0');
                len += (size_t)sprintf(out + len, "%lld", x);
            } else if (!strcmp(fkind[i], "money")) {
                size_t k = v[0] == '-' ? 1 : 0;
                if (k == w) bad = "amount";
                for (size_t j = k; j < w; j++)
                    if (!isdigit(v[j])) bad = "amount";
                if (bad) break;
                long long cents = 0;
                for (size_t j = k; j < w; j++) cents = cents * 10 + (v[j] - '0');
                snprintf(text, sizeof text, "%s%lld.%02lld", k && cents ? "-" : "", cents / 100,
                         cents % 100);
                field((const unsigned char *)text, strlen(text), out, &len);
            } else {
                if (w != 8 || !valid_date(v)) {
                    bad = "date";
                    break;
                }
                snprintf(text, sizeof text, "%.4s-%.2s-%.2s", (const char *)v,
                         (const char *)v + 4, (const char *)v + 6);
                field((const unsigned char *)text, strlen(text), out, &len);
            }
        }
        if (bad) {
            fprintf(stderr, "%ld %s\n", number, bad);
            continue;
        }
        out[len++] = '\n';
        fwrite(out, 1, len, stdout);
    }
    fclose(in);
    return 0;
}
"""


_FW_AWK = r"""function csvsplit(line, out,    n, i, c, f, q) {
  n = 0; f = ""; q = 0
  for (i = 1; i <= length(line); i++) {
    c = substr(line, i, 1)
    if (q) {
      if (c == "\"") { if (substr(line, i + 1, 1) == "\"") { f = f c; i++ } else q = 0 }
      else f = f c
    } else if (c == "\"") q = 1
    else if (c == ",") { out[++n] = f; f = "" }
    else f = f c
  }
  out[++n] = f
  return n
}
function money(c,    s) {
  s = c < 0 ? "-" : ""
  if (c < 0) c = -c
  return sprintf("%s%d.%02d", s, int(c / 100), c % 100)
}
NR == 1 { n = csvsplit($0, h); for (i = 1; i <= n; i++) col[h[i]] = i; next }
{
  csvsplit($0, v); a = v[col["amount"]]; neg = substr(a, 1, 1) == "-"; gsub(/[-.]/, "", a)
  c = (neg ? -1 : 1) * a; total += c
  if (group in col) dept[v[col[group]]] += c
}
END { if (mode == "dept") { for (d in dept) print d, money(dept[d]) } else print money(total) }
"""


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

        kinds = [
            "`text`: trim the surrounding spaces",
            "`int`: zero-padded; write it without leading zeros",
            "`money`: implied two decimals, the first character is `-` for negative amounts "
            "(or `0`); write it like `1234.50`, `-0.07` or `0.00`",
            "`date`: `YYYYMMDD`; write it as `YYYY-MM-DD`",
        ]
        if level <= 2:
            where = f"`{folder}/{names[0]}` is an export from our old mainframe"
        else:
            where = (
                f"`{folder}/{names[0]}`, `{names[1]}` and `{names[2]}` are daily exports from "
                "our old mainframe"
            )
        notes = []
        if level >= 2:
            notes.append("The files come from a Windows share (CRLF line endings).")
        if level >= 3:
            notes.append(
                "Each file starts with an `H` line and ends with a `T` trailer; only `D` lines "
                "are records (the layout's columns count that first character). The trailer is "
                "`T`, the number of D lines as 8 digits, then the total of the amounts of the "
                "good records as 14 characters (sign character and 13 digits, implied two "
                "decimals)."
            )
        if level >= 4:
            notes.append(
                "Text is latin-1 encoded; the CSV must be UTF-8. Some D records are damaged and "
                "must be rejected: reason `length` when the line does not have the layout's "
                "length, else `amount` (not an optional `-` followed by digits) or `date` (not "
                "a real calendar date), whichever field comes first in the layout."
            )
        notes.append(f"Leave the files in `{folder}/` as they are.")
        body = [
            f"{opener} {where}, in fixed-width columns described by `{layout_path}` "
            "(`field start width type`, start is 1-based). Types:\n"
            + bullets(kinds)
            + "\n\n"
            + " ".join(notes),
        ]
        # only level 2+ names contain commas and quotes, so only there is quoting tested
        csv_rule = (
            "CSV rules: a header line with the field names in layout order, then one line per "
            "record"
            + (
                "; a value containing a comma or a double quote is wrapped in double quotes "
                "with inner quotes doubled."
                if level >= 2
                else "."
            )
        )
        deliverables = []
        if level <= 2:
            deliverables.append(f"`{out}/records.csv`: the records as CSV.")
        else:
            deliverables.append(
                f"`{out}/records.csv`: all good records as one CSV with an extra first "
                f"column `file` (the file name, like `{names[0]}`), files in name order."
            )
        if level >= 2:
            deliverables.append(
                f"`{out}/{group}_totals.txt`: `{group.upper()} TOTAL` for each {noun} (the "
                f"`{group}` field; amounts summed, money format), sorted by {noun}."
            )
        if level >= 3:
            deliverables.append(
                f"`{out}/validation.txt`: for each file in name order, `FILE RECORDS TOTAL "
                "STATUS` where RECORDS counts its D lines, TOTAL sums the amounts of its good "
                "records, and STATUS is `OK` when both agree with the trailer, else `MISMATCH`."
            )
        if level >= 4:
            deliverables.append(
                f"`{out}/rejects.txt`: `FILE:LINE REASON` for each rejected record (LINE is "
                "1-based), files in name order, lines ascending."
            )
            deliverables.append(
                f"`{out}/summary.json`: `files`, `records` (good records), `rejected`, "
                "`total` (all good amounts, as a money string) and `mismatched` (the sorted "
                "list of files whose STATUS is MISMATCH)."
            )
        body.append(csv_rule + "\n\nPlease produce:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, f"/app/{tool_name}")
            body.append(
                f"We get such files every day, so I also want a converter program: `{tool_name} "
                "LAYOUT FILE` prints the CSV of one file (header and good records, no `file` "
                "column) to standard output. "
                + program_sentence(language, program)
                + " It will be tried on other layouts and files."
            )
        instruction = "\n\n".join(body)

        steps = [f"mkdir -p {out}", f"cat {layout_path}"]
        if language:
            source = {"python": _FW_PY, "bash": _FW_SH, "c": _FW_C}[language]
            source = source.replace("@LEVEL@", str(level)).replace("fw2csv", tool_name)
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            tool = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/fw2csv.sh", _FW_SH.replace("@LEVEL@", str(level))))
            tool = "bash /tmp/fw2csv.sh"
        if level >= 2:
            steps.append(heredoc("/tmp/csvsum.awk", _FW_AWK))
        if level <= 2:
            steps.append(f"{tool} {layout_path} {folder}/{names[0]} > {out}/records.csv")
        else:
            steps.append(
                f"printf 'file,%s\\n' \"$({tool} {layout_path} /dev/null | head -n 1)\""
                f" > {out}/records.csv"
            )
            for i, name in enumerate(names):
                steps.append(
                    f"{tool} {layout_path} {folder}/{name} > /tmp/f{i}.csv 2> /tmp/f{i}.rej"
                )
                steps.append(f"tail -n +2 /tmp/f{i}.csv | sed 's/^/{name},/' >> {out}/records.csv")
        if level >= 2:
            steps.append(
                f"awk -v mode=dept -v group={group} -f /tmp/csvsum.awk {out}/records.csv"
                f" | LC_ALL=C sort -k1,1 > {out}/{group}_totals.txt"
            )
        if level >= 3:
            steps.append(
                f"i=0; for n in {' '.join(names)}; do f={folder}/$n;"
                " count=$(grep -c '^D' \"$f\");"
                " total=$(awk -f /tmp/csvsum.awk /tmp/f$i.csv);"
                " t=$(grep '^T' \"$f\" | tr -d '\\r');"
                ' tc=$((10#${t:1:8})); tv=$((10#${t:10:13})); [ "${t:9:1}" = - ] && tv=$((-tv));'
                ' c=${total//./}; if [ "${c:0:1}" = - ]; then cents=$((-10#${c#-}));'
                " else cents=$((10#$c)); fi;"
                ' status=MISMATCH; [ "$tc" -eq "$count" ] && [ "$tv" -eq "$cents" ]'
                " && status=OK;"
                f' echo "$n $count $total $status"; i=$((i + 1)); done > {out}/validation.txt'
            )
        if level >= 4:
            steps += [
                "{ "
                + " ".join(f'sed "s/^/{name}:/" /tmp/f{i}.rej;' for i, name in enumerate(names))
                + f" }} > {out}/rejects.txt",
                f"records=$(($(wc -l < {out}/records.csv) - 1))",
                f"rejected=$(wc -l < {out}/rejects.txt)",
                f"total=$(awk -f /tmp/csvsum.awk {out}/records.csv)",
                'mismatched=$(awk \'$4 == "MISMATCH" {printf "%s\\"%s\\"", (n++ ? ", " :'
                f' ""), $1}}\' {out}/validation.txt)',
                'printf \'{"files": 3, "records": %d, "rejected": %d, "total": "%s",'
                ' "mismatched": [%s]}\\n\' "$records" "$rejected" "$total" "$mismatched"'
                f" > {out}/summary.json",
            ]
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "hashes": hashes,
            "names": names,
            "group": group,
            "code": language is not None,
            "cases": {1: 4, 2: 6, 3: 8, 4: 10}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        # the tests are written for the default paths; the drawn ones replace them
        named = {
            "/app/export/layout.txt": layout_path,
            "/app/export": folder,
            "/app/out": out,
            "dept_totals": f"{group}_totals",
        }
        checks = _FW_TESTS
        for default, chosen in named.items():
            checks = checks.replace(default, chosen)
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + f"FW_NAMES = {FW_NAMES!r}\nFW_TRICKY = {FW_TRICKY!r}\n"
            + f"FW_ACCENTED = {FW_ACCENTED!r}\n\n"
            + function_sources(
                fw_layout,
                fw_layout_text,
                fw_parse_layout,
                fw_record,
                fw_file,
                fw_money,
                fw_convert,
                fw_csv,
                fw_csv_text,
            )
            + "\n\n"
            + settings_lines(params)
            + checks
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_FW_TESTS = """
LEVEL = CFG["level"]
LAYOUT = fw_parse_layout(Path("/app/export/layout.txt").read_text())
CONVERTED = {
    n: fw_convert(Path("/app/export", n).read_bytes(), LAYOUT, LEVEL, CFG["group"])
    for n in CFG["names"]
}


def read_utf8(path):
    p = Path(path)
    assert p.is_file(), f"{path} is missing"
    return p.read_bytes().decode("utf-8")


def good_rows():
    return [(n, row) for n in CFG["names"] for row in CONVERTED[n][1]]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_records_csv():
    header = [name for name, _s, _w, _k in LAYOUT]
    if LEVEL <= 2:
        expected = fw_csv_text(header, CONVERTED[CFG["names"][0]][1])
    else:
        expected = fw_csv(["file"] + header) + "\\n"
        expected += "".join(fw_csv([n] + row[0]) + "\\n" for n, row in good_rows())
    assert read_utf8("/app/out/records.csv") == expected, "records.csv is wrong"


def test_group_totals():
    if CFG["level"] >= 2:
        totals = {}
        for _n, (_values, cents, key) in good_rows():
            totals[key] = totals.get(key, 0) + cents
        expected = "".join(f"{k} {fw_money(c)}\\n" for k, c in sorted(totals.items()))
        assert read("/app/out/dept_totals.txt") == expected, "dept_totals.txt is wrong"


def validation():
    rows = []
    for name in CFG["names"]:
        data = Path("/app/export", name).read_bytes().decode("latin-1")
        lines = [l.rstrip("\\r") for l in data.split("\\n")]
        count = sum(1 for l in lines if l.startswith("D"))
        total = sum(cents for _v, cents, _d in CONVERTED[name][1])
        trailer = [l for l in lines if l.startswith("T")][0]
        ok = int(trailer[1:9]) == count and int(trailer[9:]) == total
        rows.append((name, count, total, "OK" if ok else "MISMATCH"))
    return rows


def test_validation():
    if CFG["level"] >= 3:
        expected = "".join(f"{n} {c} {fw_money(t)} {s}\\n" for n, c, t, s in validation())
        assert read("/app/out/validation.txt") == expected, "validation.txt is wrong"


def test_rejects_and_summary():
    if CFG["level"] >= 4:
        rejects = [f"{n}:{line} {why}\\n" for n in CFG["names"] for line, why in CONVERTED[n][2]]
        assert read("/app/out/rejects.txt") == "".join(rejects), "rejects.txt is wrong"
        data = json.loads(read("/app/out/summary.json"))
        want = {
            "files": len(CFG["names"]),
            "records": len(good_rows()),
            "rejected": len(rejects),
            "total": fw_money(sum(row[1] for _n, row in good_rows())),
            "mismatched": [n for n, _c, _t, s in validation() if s == "MISMATCH"],
        }
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_converter_on_fresh_files(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(7070)
    for case in range(CFG["cases"]):
        layout = fw_layout(rng, LEVEL)
        layout_path = tmp_path / f"layout{case}.txt"
        layout_path.write_text(fw_layout_text(layout))
        broken = rng.randint(0, 3) if LEVEL >= 4 else 0
        data = fw_file(rng, layout, LEVEL, rng.randint(1, 25), broken, rng.random() < 0.5)
        data_path = tmp_path / f"data{case}.dat"
        data_path.write_bytes(data)
        done = subprocess.run(
            program() + [str(layout_path), str(data_path)], capture_output=True, timeout=60
        )
        assert done.returncode == 0, f"case {case} failed: {done.stderr[-1500:]!r}"
        header, rows, _rejects = fw_convert(data, layout, LEVEL)
        expected = fw_csv_text(header, rows)
        got = done.stdout.decode("utf-8", "replace")
        assert got == expected, (
            f"case {case}: wrong CSV\\n--- got\\n{got[:800]}\\n--- expected\\n{expected[:800]}"
        )
"""


# =====================================================================================
# file_operations.archive_guard
# =====================================================================================

AG_RULES = ("absolute", "traversal", "link", "special", "duplicate", "count", "size")


def ag_build(rng, level, evil, limits, gz=False):
    """A tar archive (bytes, ustar, fixed times): clean, or breaking rule ``evil``."""
    import gzip as gzip_module

    base = rng.choice(["docs", "site", "report", "assets", "data", "photos"])
    members = [(base, "dir", None)]
    for i in range(rng.randint(2, 5)):
        folder = base + rng.choice(["", "", "/sub", "/img"])
        members.append((f"{folder}/file{i}.txt", "file", rng.randbytes(rng.randint(5, 300))))
    members.append((f"{base}/notes..v2.txt", "file", b"two dots inside a name are fine\n"))
    if level >= 2:
        members.append((f"{base}/sub/latest.txt", "symlink", "../file0.txt"))
        members.append((f"{base}/copy.txt", "hardlink", f"{base}/notes..v2.txt"))
    if evil == "absolute":
        members.append((rng.choice(["/etc/cron.d/job", "/tmp/x.sh"]), "file", b"echo pwned\n"))
    elif evil == "traversal":
        name = rng.choice(["../../home/user/.bashrc", f"{base}/../../escape.txt", "../x"])
        members.append((name, "file", b"alias ls=rm\n"))
    elif evil == "link":
        kind = rng.choice(["symlink", "symlink", "hardlink"])
        if kind == "symlink":
            target = rng.choice(["/etc/passwd", "../../etc", "../../../root/.ssh"])
            members.append((f"{base}/{rng.choice(['up', 'sub/deep'])}", "symlink", target))
        else:
            members.append((f"{base}/grab", "hardlink", rng.choice(["/etc/shadow", "../x"])))
    elif evil == "special":
        members.append(
            (f"{base}/{rng.choice(['pipe', 'null'])}", rng.choice(["fifo", "char"]), None)
        )
    elif evil == "duplicate":
        name = members[1][0]
        members.append((name, "file", b"a second copy that overwrites the first\n"))
    elif evil == "count":
        for i in range(limits[0] + 1 - len(members) + rng.randint(0, 5)):
            members.append((f"{base}/many/f{i:03d}", "file", b"x"))
    elif evil == "size":
        members.append((f"{base}/huge.bin", "file", bytes(limits[1] + rng.randint(1, 4000))))
    types = {"file": b"0", "hardlink": b"1", "symlink": b"2", "char": b"3", "dir": b"5"}
    types["fifo"] = b"6"
    out = bytearray()
    for name, kind, payload in members:
        body = payload if kind == "file" else b""
        link = payload.encode() if kind in ("symlink", "hardlink") else b""
        head = bytearray(512)
        head[0:100] = name.encode().ljust(100, b"\0")
        head[100:108] = b"%07o\0" % (0o755 if kind == "dir" else 0o644)
        head[108:124] = b"0000000\x000000000\0"
        head[124:136] = b"%011o\0" % len(body)
        head[136:148] = b"%011o\0" % 1700000000
        head[148:156] = b" " * 8
        head[156:157] = types[kind]
        head[157:257] = link.ljust(100, b"\0")
        head[257:265] = b"ustar\x0000"
        if kind == "char":
            head[329:345] = b"0000001\x000000003\0"
        head[148:156] = b"%06o\0 " % sum(head)
        out += head + body + b"\0" * (-len(body) % 512)
    data = bytes(out + b"\0" * 1024)
    return gzip_module.compress(data, mtime=0) if gz else data


def ag_members(data):
    """[(name, kind, size, link target)] of a tar archive given as bytes (gzip or plain)."""
    import io
    import tarfile

    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for m in tar.getmembers():
            if m.isdir():
                kind = "dir"
            elif m.issym():
                kind = "symlink"
            elif m.islnk():
                kind = "hardlink"
            elif m.isfile():
                kind = "file"
            else:
                kind = "special"
            out.append((m.name.rstrip("/"), kind, m.size if kind == "file" else 0, m.linkname))
    return out


def ag_escapes(start, target):
    if target.startswith("/"):
        return True
    parts = [p for p in start if p not in ("", ".")]
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return True
            parts.pop()
        else:
            parts.append(part)
    return False


def ag_verdict(members, level, limits):
    """The first rule an archive breaks (in AG_RULES order), or None if it is safe."""
    names = [m[0] for m in members]
    broken = {
        "absolute": any(n.startswith("/") for n in names),
        "traversal": any(".." in n.split("/") for n in names),
    }
    if level >= 2:
        broken["link"] = any(
            (kind == "symlink" and ag_escapes(name.split("/")[:-1], target))
            or (kind == "hardlink" and ag_escapes([], target))
            for name, kind, _size, target in members
        )
    if level >= 3:
        broken["special"] = any(kind == "special" for _n, kind, _s, _t in members)
        broken["count"] = len(members) > limits[0]
        broken["size"] = sum(size for _n, _k, size, _t in members) > limits[1]
    if level >= 4:
        broken["duplicate"] = len(set(names)) != len(names)
    for rule in AG_RULES:
        if broken.get(rule):
            return rule
    return None


def ag_corpus(rng, level, count, limits):
    """[(file name, bytes)] of uploaded archives, clean and hostile."""
    rules = ["absolute", "traversal"]
    rules += ["link"] if level >= 2 else []
    rules += ["special", "count", "size"] if level >= 3 else []
    rules += ["duplicate"] if level >= 4 else []
    out, turn = [], rng.randrange(len(rules))
    for i in range(count):
        evil = None
        if i % 3 != 2 and rng.random() < 0.8:
            evil, turn = rules[turn % len(rules)], turn + 1
        gz = level >= 4 and rng.random() < 0.5
        stem = f"upload-{rng.randint(1000, 9999)}-{i}"
        out.append((stem + (".tar.gz" if gz else ".tar"), ag_build(rng, level, evil, limits, gz)))
    return out


_AG_PY = (
    """#!/usr/bin/env python3
\"\"\"Screen a tar archive before extraction: prints OK or REJECT RULE.\"\"\"
import sys

LEVEL = @LEVEL@
LIMITS = @LIMITS@
AG_RULES = ("absolute", "traversal", "link", "special", "duplicate", "count", "size")

"""
    + function_sources(ag_members, ag_escapes, ag_verdict)
    + """


if __name__ == "__main__":
    rule = ag_verdict(ag_members(open(sys.argv[1], "rb").read()), LEVEL, LIMITS)
    print("OK" if rule is None else "REJECT " + rule)
"""
)

_AG_SH = r"""#!/bin/bash
# Screen a tar archive before extraction: prints OK or REJECT RULE.
export LC_ALL=C
LEVEL=@LEVEL@
MAX_MEMBERS=@COUNT@
MAX_BYTES=@BYTES@

escapes() {  # start directory $1 (may be empty), link target $2
  local target=$2 part
  [[ $target == /* ]] && return 0
  local -a parts=()
  local IFS=/
  for part in $1; do [[ -n $part && $part != . ]] && parts+=("$part"); done
  for part in $target; do
    case $part in
      "" | .) ;;
      ..) ((${#parts[@]})) || return 0; unset 'parts[${#parts[@]}-1]' ;;
      *) parts+=("$part") ;;
    esac
  done
  return 1
}

declare -A broken=()
count=0 bytes=0
names=()
while IFS= read -r line; do
  read -r perms _owner size _date _time rest <<< "$line"
  type=${perms:0:1}
  name=$rest
  case $type in
    l) name=${rest% -> *}; target=${rest#* -> } ;;
    h) name=${rest% link to *}; target=${rest#* link to } ;;
  esac
  name=${name%/}
  names+=("$name")
  count=$((count + 1))
  [[ $name == /* ]] && broken[absolute]=1
  [[ /$name/ == */../* ]] && broken[traversal]=1
  if ((LEVEL >= 2)); then
    if [[ $type == l ]]; then
      dir=""
      [[ $name == */* ]] && dir=${name%/*}
      escapes "$dir" "$target" && broken[link]=1
    elif [[ $type == h ]]; then
      escapes "" "$target" && broken[link]=1
    fi
  fi
  case $type in
    -) bytes=$((bytes + size)) ;;
    c | b | p) broken[special]=1 ;;
  esac
done < <(tar -tvPf "$1" --numeric-owner)
if ((LEVEL >= 3)); then
  ((count > MAX_MEMBERS)) && broken[count]=1
  ((bytes > MAX_BYTES)) && broken[size]=1
else
  unset 'broken[special]'
fi
if ((LEVEL >= 4)) && [[ -n $(printf '%s\n' "${names[@]}" | sort | uniq -d) ]]; then
  broken[duplicate]=1
fi
for rule in absolute traversal link special duplicate count size; do
  if [[ -n ${broken[$rule]-} ]]; then echo "REJECT $rule"; exit 0; fi
done
echo OK
"""


def _ag_stem(name: str) -> str:
    return name.removesuffix(".gz").removesuffix(".tar")


@register
class ArchiveGuard(Family):
    """Screen uploaded tar archives before extracting them (absolute paths, traversal;
    levels add escaping links, special files, member-count and size bombs, gzip and
    duplicate members), extract the safe ones and inventory them. adversarial_corpus runs
    the agent's checker on hidden hostile and clean archives."""

    name = "file_operations.archive_guard"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("verdicts_txt", (r"`/app/out/verdicts\.txt`: one line per archive",),
             (r"def test_verdicts\(",)),
        Rule("absolute", (r"`absolute`: a member name starts with `/`",),
             (r'"absolute": any\(n\.startswith\("/"\)',)),
        Rule("traversal", (r"`traversal`: a member name has a `\.\.` path component",),
             (r'"traversal": any\("\.\." in n\.split\("/"\)',)),
        Rule("inputs_untouched", (r"Leave the uploads in `/app/incoming/` as they are",),
             (r"def test_inputs_untouched\(",)),
        Rule("link", (r"`link`: a symbolic link whose target",), (r'broken\["link"\] = any\(',),
             levels=frozenset({2, 3, 4})),
        Rule("rule_named", (r"`NAME REJECT RULE`",), (r'REJECT \{{rule\}}\\n" if LEVEL >= 2',),
             levels=frozenset({2, 3, 4})),
        Rule("extract_ok", (r"Extract every OK archive into `/app/extracted/STEM/`",),
             (r'target = Path\("/app/extracted", stem\(name\)\)',), levels=frozenset({2, 3, 4})),
        Rule("special", (r"`special`: a member is a device file or a FIFO",),
             (r'broken\["special"\] = any\(',), levels=frozenset({3, 4})),
        Rule("count", (r"`count`: the archive has more than \d+ members",),
             (r'broken\["count"\] = len\(members\) > limits\[0\]',), levels=frozenset({3, 4})),
        Rule("size", (r"`size`: its regular files add up to more than \d+ bytes",),
             (r'broken\["size"\] = sum\(',), levels=frozenset({3, 4})),
        Rule("inventory_tsv", (r"`/app/out/inventory\.tsv`",),
             (r'read\("/app/out/inventory\.tsv"\)',), levels=frozenset({3, 4})),
        Rule("duplicate", (r"`duplicate`: two members have the same name",),
             (r'broken\["duplicate"\] = len\(set\(names\)\) != len\(names\)',),
             levels=frozenset({4})),
        Rule("summary_json", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checker", (r"The upload service will call a checker program",),
             (r"def test_checker_on_unseen_archives\(",), when={"code": True}),
        Rule("checker_policy", (r"compared with our policy on archives you have not seen",),
             (r"elif got != want:",), when={"code": True, "mode": "exact_text"}),
        Rule("checker_hostile",
             (r"every hostile one must be rejected and every clean one accepted",),
             (r'if CFG\["mode"\] == "adversarial_corpus":',),
             when={"code": True, "mode": "adversarial_corpus"}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        limits = (rng.choice([30, 40, 50]), rng.choice([16000, 20000, 24000]))
        corpus = ag_corpus(rng, level, {1: 6, 2: 7, 3: 8, 4: 10}[level], limits)
        files: dict[str, str | bytes] = {f"incoming/{name}": data for name, data in corpus}
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        rules = {
            "absolute": "a member name starts with `/`",
            "traversal": "a member name has a `..` path component",
            "link": "a symbolic link whose target, resolved from the link's own folder, is "
            "absolute or leaves the extraction folder, or a hard link whose target (a path "
            "from the archive root) does",
            "special": "a member is a device file or a FIFO",
            "duplicate": "two members have the same name (ignoring a trailing `/`)",
            "count": f"the archive has more than {limits[0]} members (folders count)",
            "size": f"its regular files add up to more than {limits[1]} bytes",
        }
        active = [r for r in AG_RULES if r in ("absolute", "traversal")]
        if level >= 2:
            active.append("link")
        if level >= 3:
            active += ["special"]
        if level >= 4:
            active.append("duplicate")
        if level >= 3:
            active += ["count", "size"]
        kinds = "`.tar` or `.tar.gz` files" if level >= 4 else "`.tar` files"
        body = [
            f"Users upload archives ({kinds}) to `/app/incoming/`, and we extract them on the "
            "server. Before we extract anything, every archive must be screened, looking at "
            "its members exactly as recorded. An archive is rejected for the first of these "
            "rules (in this order) that it breaks:\n"
            + bullets(f"`{r}`: {rules[r]}" for r in active)
            + "\nOtherwise it is OK. Leave the uploads in `/app/incoming/` as they are."
        ]
        deliverables = [
            "`/app/out/verdicts.txt`: one line per archive, sorted by file name: `NAME OK` or "
            + ("`NAME REJECT RULE`." if level >= 2 else "`NAME REJECT`.")
        ]
        if level >= 2:
            deliverables.append(
                "Extract every OK archive into `/app/extracted/STEM/` (STEM is the file name "
                "without `.tar`/`.tar.gz`); extract nothing from rejected ones."
            )
        if level >= 3:
            deliverables.append(
                "`/app/out/inventory.tsv`: `ARCHIVE<TAB>PATH<TAB>SIZE` for every regular-file "
                "member (not links) of the OK archives, sorted by archive then path."
            )
        if level >= 4:
            deliverables.append(
                "`/app/out/summary.json`: `archives`, `safe` (OK count), `rejected` (an object "
                "mapping each rule to how many archives it rejected), `files` (inventory "
                "lines) and `bytes` (their total size)."
            )
        body.append("Please take care of:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, "/app/tarcheck")
            hostile = (
                " It will be run on hostile and clean archives you have not seen: every hostile "
                "one must be rejected and every clean one accepted."
                if ctx.verifier_kind == "adversarial_corpus"
                else " It will be compared with our policy on archives you have not seen."
            )
            body.append(
                "The upload service will call a checker program: given the path of one archive, "
                "it prints `OK` or `REJECT RULE` (one line). "
                + program_sentence(language, program)
                + hostile
            )
        instruction = "\n\n".join(body)

        def fill(source: str) -> str:
            return (
                source.replace("@LEVEL@", str(level))
                .replace("@LIMITS@", repr(limits))
                .replace("@COUNT@", str(limits[0]))
                .replace("@BYTES@", str(limits[1]))
            )

        steps = ["mkdir -p /app/out /app/extracted"]
        if level >= 3:
            steps.append("ls -l /app/incoming")
        if language:
            source = {"python": _AG_PY, "bash": _AG_SH}[language]
            steps.append(program_step(language, program, fill(source)))
            check = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/tarcheck.sh", fill(_AG_SH)))
            check = "bash /tmp/tarcheck.sh"
        steps.append(
            f'for a in /app/incoming/*; do echo "$(basename "$a") $({check} "$a")"; done'
            " | LC_ALL=C sort > /tmp/verdicts.txt"
        )
        if level >= 2:
            steps.append("cp /tmp/verdicts.txt /app/out/verdicts.txt")
            steps.append(
                "awk '$2 == \"OK\" {print $1}' /app/out/verdicts.txt | while read -r a; do"
                ' stem=${a%.gz}; stem=${stem%.tar}; mkdir -p "/app/extracted/$stem";'
                ' tar -xf "/app/incoming/$a" -C "/app/extracted/$stem"; done'
            )
        else:
            steps.append("sed 's/ REJECT .*/ REJECT/' /tmp/verdicts.txt > /app/out/verdicts.txt")
        if level >= 3:
            steps.append(
                "awk '$2 == \"OK\" {print $1}' /app/out/verdicts.txt | while read -r a; do"
                ' tar -tvf "/app/incoming/$a" --numeric-owner | awk -v a="$a"'
                ' \'$1 ~ /^-/ {print a "\\t" $6 "\\t" $3}\'; done | LC_ALL=C sort'
                " > /app/out/inventory.tsv"
            )
        if level >= 4:
            steps += [
                "archives=$(wc -l < /app/out/verdicts.txt)",
                "safe=$(grep -c ' OK$' /app/out/verdicts.txt || true)",
                'rejected=$(awk \'$2 == "REJECT" {n[$3]++} END {for (r in n) printf "%s\\"%s\\":'
                ' %d", (k++ ? ", " : ""), r, n[r]}\' /app/out/verdicts.txt)',
                "files=$(wc -l < /app/out/inventory.tsv)",
                "bytes=$(awk -F'\\t' '{s += $3} END {print s + 0}' /app/out/inventory.tsv)",
                'printf \'{"archives": %d, "safe": %d, "rejected": {%s}, "files": %d,'
                ' "bytes": %d}\\n\' "$archives" "$safe" "$rejected" "$files" "$bytes"'
                " > /app/out/summary.json",
            ]
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "limits": list(limits),
            "hashes": hashes,
            "names": sorted(name for name, _ in corpus),
            "mode": ctx.verifier_kind,
            "code": language is not None,
            "hidden": {1: 12, 2: 16, 3: 20, 4: 24}[level],
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + f"AG_RULES = {AG_RULES!r}\n\n"
            + function_sources(ag_build, ag_members, ag_escapes, ag_verdict, ag_corpus)
            + "\n\n"
            + settings_lines(params)
            + _AG_TESTS
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_AG_TESTS = """
LEVEL = CFG["level"]
LIMITS = tuple(CFG["limits"])
MEMBERS = {n: ag_members(Path("/app/incoming", n).read_bytes()) for n in CFG["names"]}
VERDICTS = {n: ag_verdict(m, LEVEL, LIMITS) for n, m in MEMBERS.items()}


def stem(name):
    return name.removesuffix(".gz").removesuffix(".tar")


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_verdicts():
    rows = []
    for name in CFG["names"]:
        rule = VERDICTS[name]
        if rule is None:
            rows.append(f"{name} OK\\n")
        else:
            rows.append(f"{name} REJECT {rule}\\n" if LEVEL >= 2 else f"{name} REJECT\\n")
    assert read("/app/out/verdicts.txt") == "".join(rows), "verdicts.txt is wrong"


def test_extraction():
    if CFG["level"] >= 2:
        for name, members in MEMBERS.items():
            target = Path("/app/extracted", stem(name))
            if VERDICTS[name] is not None:
                assert not target.exists(), f"{name} was rejected but {target} exists"
                continue
            import io
            import tarfile

            with tarfile.open(fileobj=io.BytesIO(Path("/app/incoming", name).read_bytes())) as tar:
                for m in tar.getmembers():
                    path = target / m.name
                    if m.isfile():
                        data = tar.extractfile(m).read()
                        assert path.is_file() and path.read_bytes() == data, f"{path} is wrong"
                    elif m.issym():
                        assert path.is_symlink(), f"{path} should be a symlink"


def inventory():
    rows = []
    for name, members in MEMBERS.items():
        if VERDICTS[name] is None:
            rows += [(name, n, size) for n, kind, size, _t in members if kind == "file"]
    return sorted(rows)


def test_inventory():
    if CFG["level"] >= 3:
        expected = "".join(f"{a}\\t{p}\\t{s}\\n" for a, p, s in inventory())
        assert read("/app/out/inventory.tsv") == expected, "inventory.tsv is wrong"


def test_summary():
    if CFG["level"] >= 4:
        rejected = {}
        for rule in VERDICTS.values():
            if rule is not None:
                rejected[rule] = rejected.get(rule, 0) + 1
        rows = inventory()
        want = {
            "archives": len(VERDICTS),
            "safe": sum(r is None for r in VERDICTS.values()),
            "rejected": rejected,
            "files": len(rows),
            "bytes": sum(s for _a, _p, s in rows),
        }
        data = json.loads(read("/app/out/summary.json"))
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_checker_on_unseen_archives(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(2024)
    corpus = ag_corpus(rng, LEVEL, CFG["hidden"], LIMITS)
    missed, blocked, wrong = [], [], []
    for name, data in corpus:
        path = tmp_path / name
        path.write_bytes(data)
        rule = ag_verdict(ag_members(data), LEVEL, LIMITS)
        want = "OK" if rule is None else f"REJECT {rule}"
        done = run([path])
        assert done.returncode == 0, f"the checker failed on {name}: {done.stderr[-800:]}"
        got = done.stdout.strip()
        if CFG["mode"] == "adversarial_corpus":
            if rule is not None and not got.startswith("REJECT"):
                missed.append((name, want))
            if rule is None and got != "OK":
                blocked.append((name, got))
        elif got != want:
            wrong.append((name, got, want))
    assert not missed, f"hostile archives accepted: {missed}"
    assert not blocked, f"clean archives rejected: {blocked}"
    assert not wrong, f"wrong verdicts (archive, got, expected): {wrong}"
"""


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
