"""Validate sign-up records (the task's files are the templates beside this module; the
reference filter in Python or Bash is ``solution/signup_filter.*``, the oracle the tests and
the Python filter share is ``tests/oracle.py``)."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    language_or_bash,
    manifest_test_file,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference filter of each language: ``solution/signup_filter.<extension>``."""

_SIGNUP_PREFIXES = ("C", "U", "M", "S", "A")
_SIGNUP_CAPS = (5000, 10000, 25000, 100000)
_SIGNUP_FOLDERS = ("incoming", "inbox", "uploads")
_SIGNUP_NAMES = ("signups", "registrations", "new_accounts", "enrolments")
_SIGNUP_INTROS = (
    "Sign-up records (no header) arrive in {path}. A record is valid when:",
    "Our sign-up form writes one record per line (no header) to {path}. A record counts "
    "as valid only when:",
    "{path} holds the latest sign-up records, one per line, no header. Treat a record as "
    "valid when:",
)


@register
class SignupValidator(Family):
    """Validate sign-up records (ids, emails, calendar dates, amounts, duplicates by level):
    shell-split a fixture into clean/rejected outputs, or write a filter that hidden hostile
    records must not pass."""

    name = "data_processing.signup_validator"
    domain = "data_processing"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("four_fields", (r"exactly four comma-separated fields",),
             (r"if len\(fields\) != 4:",)),
        Rule("id_format", (r"`id` is `(?P<prefix>[A-Z])` followed by exactly six digits",),
             (r'ID_PREFIX = "{prefix}"', r're\.fullmatch\(ID_PREFIX \+ r"\[0-9\]\{{6\}}", rid\)')),
        Rule("email_format", (r"`email` is lowercase `local@domain\.tld`",),
             (r"_EMAIL\.fullmatch\(email\)",)),
        Rule("date_format", (r"`signup_date` is `YYYY-MM-DD`",),
             (r'fullmatch\(r"\[0-9\]\{{4\}}-\[0-9\]\{{2\}}-\[0-9\]\{{2\}}", (?:text|day)\)',)),
        Rule("calendar_date", (r"a real calendar date \(leap years count\)",),
             (r"if not valid_date\(day\):",), levels=frozenset({2, 3, 4})),
        Rule("amount_format", (r"`amount` is digits, a dot, two digits",),
             (r're\.fullmatch\(r"-\?\[0-9\]\+\\\.\[0-9\]\{{2\}}", amount\)',)),
        Rule("amount_range", (r"`amount` must not be negative nor above (?P<cap>\d+)\.00",),
             (r"AMOUNT_CAP = {cap}\n",
              r'level >= 3 and \(amount\.startswith\("-"\) or float\(amount\) > AMOUNT_CAP\)'),
             levels=frozenset({3, 4})),
        Rule("duplicate_id", (r"an `id` already accepted earlier in the file makes the later",),
             (r"if rid in seen:",), levels=frozenset({4})),
        Rule("clean_file", (r"`/app/out/clean\.csv`: the valid records, unchanged and in input",),
             (r'read\("/app/out/clean\.csv"\)',)),
        Rule("rejected_file", (r"`/app/out/rejected\.txt`: line numbers",),
             (r'read\("/app/out/rejected\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("per_year_file", (r"`/app/out/per_year\.txt`: `YEAR COUNT`",),
             (r'read\("/app/out/per_year\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary_and_checksums", (r"`/app/out/summary\.json`", r"checksums\.sha256"),
             (r'read\("/app/out/summary\.json"\)', r"check_manifest\("),
             levels=frozenset({4})),
        Rule("filter_program", (r"reusable .+? filter at `/app/signup_filter",),
             (r"def test_hidden_corpus\(",), when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/signup_filter")
        code = ctx.needs_code or ctx.verifier_kind == "adversarial_corpus"
        prefix, cap = ctx.pick(_SIGNUP_PREFIXES), rng.choice(_SIGNUP_CAPS)
        source_path = f"/app/{ctx.pick(_SIGNUP_FOLDERS)}/{ctx.pick(_SIGNUP_NAMES)}.csv"
        rows = []
        for _ in range(8 + 8 * level):
            rid = f"{prefix}{rng.randint(0, 999999):06d}"
            user = rng.choice(["ana", "li.wei", "omar_k", "jo+news"])
            host = rng.choice(["example", "mail.corp", "uni-x"])
            email = f"{user}@{host}.{rng.choice(['com', 'org', 'de'])}"
            year = rng.choice([2019, 2023, 2024])
            day = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            amount = f"{rng.randint(0, 5000)}.{rng.randint(0, 99):02d}"
            fields = [rid, email, day, amount]
            flaw = rng.random()
            if flaw < 0.1:
                fields[1] = fields[1].upper()
            elif flaw < 0.2:
                fields[2] = rng.choice(["2023-02-29", "2024-04-31", "2024/05/01"])
            elif flaw < 0.28:
                fields[3] = rng.choice(["-5.00", "12.5", f"{cap}.50"])
            elif flaw < 0.34 and rows:
                fields[0] = rows[-1].split(",")[0]
            elif flaw < 0.4:
                fields.append("")
            rows.append(",".join(fields))
        app_files = {source_path[len("/app/") :]: "\n".join(rows) + "\n"}
        cfg = {
            "level": level,
            "input": source_path,
            "lang": lang,
            "program": prog,
            "code": code,
            "files_out": True,
            "fresh": {1: 25, 2: 40, 3: 60, 4: 80}[level],
        }
        files = templates(__name__)
        tool = prog if code else "/tmp/signup_filter.sh"
        values = {
            "level": level,
            "prefix": prefix,
            "cap": cap,
            "intro": ctx.pick(_SIGNUP_INTROS).format(path=source_path),
            "source_path": source_path,
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
        }
        values["oracle"] = files.render("tests/oracle.py", **values)
        values["source"] = files.render(
            f"solution/signup_filter.{_EXTENSIONS[lang]}", **values
        ).strip()
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), **values
                )
            },
            files=app_files,
        )
