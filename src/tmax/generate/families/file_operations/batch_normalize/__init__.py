"""Bring a batch of legacy CSV exports to clean UTF-8/LF copies (the task's files are the
templates beside this module; the reference normaliser in Python, Bash or C is
``solution/normalize.*``, the oracle the tests and the Python programs share is
``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import LANGUAGE_NAMES, manifest_test_file, program_path
from tmax.generate.families.file_operations._shared import run_command
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_PEOPLE = [
    ("Zoë", "Zürich"),
    ("José", "Málaga"),
    ("Ångström", "Göteborg"),
    ("François", "Besançon"),
    ("Björn", "Tromsø"),
    ("Inès", "Montréal"),
    ("Dana", "Boston"),
    ("Kai", "Oslo"),
]
_STEMS = ["clients", "refunds", "branch_north", "payroll", "vendors", "donors", "tenants"]
_STEMS += ["admissions", "suppliers", "orders", "members", "invoices", "lab_results"]
_DATA_DIRS = ["data", "exports", "legacy", "incoming", "dumps"]
_OUT_DIRS = ["out", "output", "converted", "results"]
_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference normaliser of each language: ``solution/normalize.<extension>``."""
_PROGRAMS = ["normalize", "to_utf8", "fix_text"]
_OPENERS = [
    "The CSV exports in {folder} come from {count} different legacy systems: some are "
    "Latin-1, some UTF-8 (maybe with a BOM), some have Windows line endings.",
    "I copied {names} from the old systems into {folder}, and no two of them agree: Latin-1 "
    "or UTF-8 (sometimes with a BOM), CR LF or LF line endings.",
    "Before anything new can read the {count} exports in {folder} ({names}), they need one "
    "encoding and one line-ending style; the old systems wrote Latin-1 or UTF-8 with the "
    "odd BOM, and some used Windows line endings.",
    "Each of the legacy exports in {folder} ({names}) was written its own way: Latin-1 or "
    "UTF-8, maybe a byte-order mark, Windows or Unix line endings.",
    "Our import keeps choking on the CSV files in {folder}: {names} come from old systems "
    "that mix Latin-1 and UTF-8 (some with a BOM) and CR LF and LF line endings.",
]
# Each legacy system named its columns its own way (same meaning, same order).
_HEADERS = [
    ("id", "ref", "record_no", "key"),
    ("name", "customer", "contact", "full_name"),
    ("city", "town", "site", "location"),
    ("amount", "total", "balance", "value"),
    ("note", "comment", "remarks", "memo"),
]


def _legacy_csv(rng, level: int, with_bom: bool) -> str:
    header = [rng.choice(options) for options in _HEADERS]
    if level < 3:
        header.pop()
    rows = [",".join(header)]
    for i in range(rng.randint(4, 6) + 2 * level):
        name, city = rng.choice(_PEOPLE)
        row = [str(100 + i), name, city, str(rng.randint(-50, 900))]
        if level >= 3:
            row.append(rng.choice(['"late, paid twice"', "ok", '"see ""memo"""', ""]))
        rows.append(",".join(row))
    return ("\ufeff" if with_bom else "") + "\n".join(rows) + "\n"


@register
class BatchNormalize(Family):
    """Bring a batch of legacy CSV exports (Latin-1 or UTF-8, CRLF or LF, BOMs) to clean
    UTF-8/LF copies; higher levels add a per-file report, CSV-to-JSON conversion, a summary
    and checksums; code asks for a reusable normaliser checked on random byte strings."""

    name = "file_operations.batch_normalize"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("originals_untouched", (r"Leave the originals alone",),
             (r"def test_originals_untouched\(",)),
        Rule("clean_copies", (r"`/app/\w+/\w+/NAME` for every `/app/\w+/NAME`",),
             (r"def test_clean_copies\(",)),
        Rule("legacy_to_utf8", (r"A file that is valid UTF-8 is UTF-8, anything else is Latin-1",),
             (r'got == text\.encode\("utf-8"\)',)),
        Rule("crlf_to_lf", (r"every CR LF pair becomes LF",),
             (r'text\.replace\("\\r\\n", "\\n"\)',)),
        Rule("report", (r"`/app/\w+/\w+\.txt`: one line `NAME ENCODING ENDINGS ROWS`",),
             (r'read\(CFG\["report"\]\)',), levels=frozenset({2, 3, 4})),
        Rule("csv_to_json", (r"`/app/\w+/\w+/STEM\.json` for every `STEM\.csv`",),
             (r'path = os\.path\.join\(CFG\["json"\]',), levels=frozenset({3, 4})),
        Rule("summary", (r'`/app/\w+/\w+\.json`: `\{"files": F, "rows": R, "converted"',),
             (r'read\(CFG\["summary"\]\)',), levels=frozenset({4})),
        Rule("checksums",
             (r"`/app/\w+/(?:checksums\.sha256|SHA256SUMS|clean\.sha256)`: sha256sum",),
             (r'check_manifest\(CFG\["checksums"\]',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/(?:normalize|to_utf8|fix_text)\.",),
             (r"def test_program_fresh\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "detect legacy file encodings and convert them to UTF-8": "legacy_to_utf8",
        "normalize Windows line endings to Unix style": "crlf_to_lf",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        stems = rng.sample(_STEMS, 4)
        names = [f"{s}.csv" for s in stems[: level + 1 if level < 4 else 4]]
        data_dir = "/app/" + rng.choice(_DATA_DIRS)
        out = "/app/" + rng.choice(_OUT_DIRS)
        clean = f"{out}/{rng.choice(['clean', 'utf8', 'fixed', 'normalized'])}"
        json_dir = f"{out}/{rng.choice(['json', 'records', 'rows'])}"
        report = f"{out}/{rng.choice(['report.txt', 'encodings.txt', 'inventory.txt'])}"
        summary = f"{out}/{rng.choice(['summary.json', 'totals.json', 'overview.json'])}"
        checksums = f"{out}/{rng.choice(['checksums.sha256', 'SHA256SUMS', 'clean.sha256'])}"
        app_files: dict[str, str | bytes] = {}
        pristine: dict[str, str | bytes] = {}
        encs = ["latin-1", "utf-8"] + [rng.choice(["latin-1", "utf-8"]) for _ in names]
        for i, name in enumerate(names):
            enc = encs[i]
            crlf = (i % 2 == 0) if level > 1 else rng.random() < 0.5
            text = _legacy_csv(rng, level, with_bom=enc == "utf-8" and level >= 3 and i == 1)
            if crlf:
                text = text.replace("\n", "\r\n")
            data = text.encode(enc)
            app_files[f"{data_dir.removeprefix('/app/')}/{name}"] = data
            pristine[f"pristine/{name}"] = data
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        lang = ctx.language if code else "bash"
        prog = program_path(lang, "/app/" + rng.choice(_PROGRAMS))
        cfg = {
            "level": level,
            "files": names,
            "data": data_dir,
            "clean": clean,
            "json": json_dir,
            "report": report,
            "summary": summary,
            "checksums": checksums,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 4 if ctx.verifier_kind == "exact_text" else 10 * level + 10,
        }
        opener = rng.choice(_OPENERS).format(
            folder=data_dir, count=len(names), names=", ".join(names)
        )
        tool = prog if code else "/tmp/normalize.sh"
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        values = {
            "level": level,
            "opener": opener,
            "data_dir": data_dir,
            "clean": clean,
            "json_dir": json_dir,
            "report": report,
            "summary": summary,
            "checksums": checksums,
            "code": code,
            "lang": lang,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": run_command(lang, tool),
            "source": files.render(
                f"solution/normalize.{_EXTENSIONS[lang]}", oracle=oracle
            ).strip(),
            "tojson": files.render("solution/tojson.py", oracle=oracle).strip(),
        }
        tests: dict[str, str | bytes] = {
            "test_task.py": files.render(
                "tests/test_task.py", oracle=oracle, prelude=manifest_test_file(cfg, "")
            )
        }
        tests.update(pristine)
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests=tests,
            files=app_files,
        )
