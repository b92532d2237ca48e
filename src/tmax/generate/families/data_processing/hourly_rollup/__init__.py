"""Roll minute-level sensor readings into hourly per-sensor aggregates (the task's files
are the templates beside this module; the reference roll-up in Python or Bash is
``solution/rollup.*``, the oracle the tests and the Python program share is
``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

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
"""The reference roll-up of each language: ``solution/rollup.<extension>``."""

_ROLLUP_FOLDERS = ("readings", "uploads", "telemetry", "sensor_logs")
_ROLLUP_STEMS = ("station", "site", "logger")
_ROLLUP_INTROS = (
    "Our weather stations upload minute readings to /app/{folder}/*.csv (header "
    "`timestamp,sensor,value`; stations do not all log in UTC). Please produce:",
    "The greenhouse loggers drop minute-level readings into /app/{folder}/*.csv (header "
    "`timestamp,sensor,value`); not every logger writes UTC timestamps. I need:",
    "Minute readings from our cold-storage monitors land in /app/{folder}/*.csv (header "
    "`timestamp,sensor,value`). The sites log with different UTC offsets. Please "
    "produce:",
    "Each file in /app/{folder}/ is a CSV of minute readings (header "
    "`timestamp,sensor,value`) from one of our plant-floor sensor stations, some of "
    "them not on UTC. From them, please produce:",
)
"""Where the readings lie and how the user says so (the offsets are in every wording)."""


@register
class HourlyRollup(Family):
    """Roll minute-level sensor readings (mixed UTC offsets, junk lines) into hourly per-sensor
    aggregates; level adds sources, derived reports and a manifest; code asks for a
    reusable roll-up program checked on random inputs."""

    name = "data_processing.hourly_rollup"
    domain = "data_processing"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("hourly_file",
             (r"`/app/out/hourly\.csv` with header `hour,sensor,count,min,max,mean`",),
             (r"def test_rollup_file\(",)),
        Rule("utc_hours", (r"`hour` written `YYYY-MM-DDTHH` in UTC",),
             (r"astimezone\(datetime\.timezone\.utc\)",)),
        Rule("mean_half_up", (r"mean with two decimals rounded half up",),
             (r"mean = \(20 \* s \+ n\) // \(2 \* n\)",)),
        Rule("skip_malformed", (r"Lines that are not `timestamp,sensor,value` with an ISO",
                                r"one decimal are skipped"),
             (r"if not _STAMP\.fullmatch\(stamp\) or not _VALUE\.fullmatch\(value\):",)),
        Rule("busiest_file", (r"`/app/out/busiest\.txt`: `HOUR SENSOR`",),
             (r'read\("/app/out/busiest\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("peaks_file", (r"`/app/out/peaks\.txt`: `SENSOR MAX`",),
             (r'read\("/app/out/peaks\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary_and_checksums", (r"`/app/out/summary\.json`", r"checksums\.sha256"),
             (r'read\("/app/out/summary\.json"\)', r"check_manifest\("),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/rollup",), (r"def test_program_fresh\(",),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "resample minute-level readings into hourly aggregates": "hourly_file",
        "align timestamps from sources in different timezones": "utc_hours",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        sensors = rng.sample(["temp_a", "temp_b", "hum_1", "co2", "pres"], 1 + min(level, 3))
        app_files: dict[str, str | bytes] = {}
        inputs = []
        day = rng.randint(1, 27)
        folder, stem = ctx.pick(_ROLLUP_FOLDERS), ctx.pick(_ROLLUP_STEMS)
        for f in range(1 + level // 2):
            # one station off UTC at every level, so the UTC rule shows in the fixture
            zone = "Z" if f == 0 and level >= 2 else rng.choice(["+02:00", "-04:00", "+05:30"])
            lines = ["timestamp,sensor,value"]
            for _ in range(10 + 10 * level):
                lines.append(
                    f"2024-03-{day:02d}T{rng.randint(6, 11):02d}:{rng.randint(0, 59):02d}:"
                    f"{rng.randint(0, 59):02d}{zone},{rng.choice(sensors)},"
                    f"{rng.randint(150, 320)}.{rng.randint(0, 9)}"
                )
                if rng.random() < 0.05:
                    lines.append(rng.choice(["ERROR sensor offline", "2024-03-01T00:00:00Z,,"]))
            # at least one line to skip in every file: junk, or a value with two decimals
            lines.insert(
                rng.randint(1, len(lines)),
                rng.choice(
                    [
                        "ERROR sensor offline",
                        f"2024-03-{day:02d}T09:30:00{zone},{rng.choice(sensors)},"
                        f"{rng.randint(150, 320)}.{rng.randint(10, 99)}",
                    ]
                ),
            )
            name = f"{folder}/{stem}{f + 1}.csv"
            app_files[name] = "\n".join(lines) + "\n"
            inputs.append("/app/" + name)
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/rollup")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "inputs": inputs,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 5 * level + 5,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/rollup.sh"
        values = {
            "level": level,
            "intro": ctx.pick(_ROLLUP_INTROS).format(folder=folder),
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "inputs": inputs,
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "source": files.render(f"solution/rollup.{_EXTENSIONS[lang]}", oracle=oracle).strip(),
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
