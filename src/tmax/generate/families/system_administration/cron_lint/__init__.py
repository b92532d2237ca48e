"""Lint crontab files (the task's files are the templates beside this module; the
reference linter in Python or Bash is ``solution/cronlint.*``, the oracle the tests and the
Python linter share is ``tests/oracle.py``)."""

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
"""The reference linter of each language: ``solution/cronlint.<extension>``."""


_CRON_FOLDERS = ["cron", "crontabs", "cron.d", "schedules"]
_CRON_HOSTS = ["web", "db", "batch", "mail", "etl", "reports"]
_CRON_PROGRAMS = ["cronlint", "cron_check", "lintcron"]
_CRON_OPENERS = [
    "Before I install the crontabs in {folder} on the new server I want them linted.",
    "We are moving the scheduled jobs in {folder} ({names}) to a new host; lint them first.",
    "Some entries in {folder} ({names}) look broken and cron only complains by mail, so lint them.",
    "I inherited the crontabs in {folder} ({names}) and do not trust them; please lint them.",
]


@register
class CronLint(Family):
    """Lint crontab files (field ranges, lists, steps; names, macros and env lines by level):
    report invalid lines from fixtures, or write a linter that hidden broken entries must
    not slip past."""

    name = "system_administration.cron_lint"
    domain = "system_administration"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("ignored_lines", (r"lines whose first non-blank character is `#` are ignored",),
             (r'return "skip"',)),
        Rule("five_fields", (r"an entry has five whitespace-separated time fields",),
             (r"if len\(parts\) < 6:",)),
        Rule("field_syntax", (r"a field is a comma-separated list of items",),
             (r"def _field_ok\(",)),
        Rule("month_day_names", (r"month names \(jan-dec\) and day names \(sun-sat\)",),
             (r"level >= 2 and _NAMES\[index\]",), levels=frozenset({2, 3, 4})),
        Rule("macros", (r"`@reboot @hourly @daily @weekly @monthly @yearly @annually`",),
             (r'level >= 3 and parts\[0\]\.startswith\("@"\)',), levels=frozenset({3, 4})),
        Rule("env_lines", (r"environment lines `NAME=value`",),
             (r"level >= 4 and re\.fullmatch",), levels=frozenset({4})),
        Rule("invalid_report", (r"`/app/out/invalid\.txt`: `FILE:LINE`",),
             (r'read\("/app/out/invalid\.txt"\)',)),
        Rule("counts", (r"`/app/out/counts\.txt`: `FILE VALID INVALID`",),
             (r'read\("/app/out/counts\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("clean_copies", (r"`/app/out/clean/FILE`: each crontab with its invalid lines",),
             (r'out = "/app/out/clean/"',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/(?:cronlint|cron_check|lintcron)",),
             (r"def test_hidden_corpus\(",), when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        lang = language_or_bash(ctx)
        code = ctx.needs_code or ctx.verifier_kind == "adversarial_corpus"
        app_files: dict[str, str | bytes] = {}
        tabs = []
        good_pool = [
            "0 2 * * * /opt/backup.sh",
            "*/15 * * * * /usr/bin/poll-queue",
            "30 6 1-7 * 1 /opt/report --monthly",
            "0 0,12 * * * run-parts /etc/x",
            "5 4 * jan-mar mon-fri /opt/season.sh",
            "@daily /usr/sbin/logrotate /etc/lr",
            "MAILTO=ops@example.com",
            "15 3 * * sun /opt/weekly.sh",
            "0 */4 * * * /usr/local/bin/sync",
        ]
        bad_pool = [
            "61 * * * * /opt/x.sh",
            "0 25 * * * /opt/y.sh",
            "* * * * /opt/four-fields",
            "*/0 * * * * /opt/zero-step",
            "0 0 32 * * /opt/day",
            "10-5 * * * * /opt/r",
            "0 0 * 13 * /opt/m",
            "@hourlyy /opt/typo",
            "0 0 * * funday /opt/d",
        ]
        folder = "/app/" + rng.choice(_CRON_FOLDERS)
        for t in range(1 if level < 3 else 2 + (level == 4)):
            rows = ["# maintained by ops"]
            for _ in range(5 + 3 * level):
                rows.append(rng.choice(good_pool if rng.random() < 0.65 else bad_pool))
            name = f"{rng.choice(_CRON_HOSTS)}{t + 1}.cron"
            app_files[f"{folder.removeprefix('/app/')}/{name}"] = "\n".join(rows) + "\n"
            tabs.append(f"{folder}/{name}")
        tabs.sort()
        prog = program_path(lang, "/app/" + rng.choice(_CRON_PROGRAMS))
        names = ", ".join(tab.rsplit("/", 1)[1] for tab in tabs)
        cfg = {
            "level": level,
            "tabs": tabs,
            "lang": lang,
            "program": prog,
            "code": code,
            "files_out": True,
            "fresh": {1: 30, 2: 45, 3: 60, 4: 80}[level],
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/cronlint.sh"
        values = {
            "level": level,
            "opener": rng.choice(_CRON_OPENERS).format(folder=folder, names=names),
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tabs": tabs,
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "source": files.render(
                f"solution/cronlint.{_EXTENSIONS[lang]}", level=level, oracle=oracle
            ).strip(),
        }
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), oracle=oracle
                )
            },
            files=app_files,
        )
