"""Product-analytics questions over a JSON-lines clickstream (the task's files are the
templates beside this module; the reference report tool in Python or Bash is
``solution/events.*``, the generator and oracle the tests and this module share is
``tests/events.py``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    code_note,
    invoke,
    minimal_test_file,
    program_path,
    program_setup,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


@functools.cache
def _events() -> dict[str, Any]:
    """``make_events`` and ``report_text`` of ``tests/events.py`` (pasted into the tests)."""
    namespace: dict[str, Any] = {"json": json}
    exec(templates(__name__).render("tests/events.py"), namespace)
    return namespace


_EVENTS_REPORTS = ["counts", "top_buyers", "funnel", "by_country"]
# Drawn per task so that instructions differ in the names a real shop would pick.
_EVENTS_DATA_DIRS = ["data", "clickstream", "export", "tracking", "weblogs"]
_EVENTS_OUT_DIRS = ["out", "reports", "analytics", "results", "funnel"]
_EVENTS_PROGRAMS = ["events", "clicks", "shop_stats", "event_report"]
_EVENTS_OPENERS = [
    "Our web shop's clickstream export is in:",
    "The tracking export from our web shop has arrived:",
    "Here is the raw event log our web shop exported:",
    "I downloaded the visitor events of our online shop to:",
    "The shop's clickstream for the last few days is stored in:",
]


@register
class EventFunnel(Family):
    """Answer product-analytics questions over a JSON-lines clickstream: event counts, top
    buyers, an ordered view→cart→purchase funnel and revenue by country (joined from a
    users CSV); duplicates and shuffled keys from level 3. Code asks for a report tool
    fuzzed on fresh logs."""

    name = "data_querying.event_funnel"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("counts", (r"`/app/(?P<out>\w+)/counts\.csv`: header `event,count`",),
             (r'"reports": \["counts"', r'if report == "counts":', r"def test_report_files\(",
              r'"out_dir": "/app/{out}"', r'os\.path\.join\(CFG\["out_dir"\], report')),
        Rule("top_buyers", (r"`/app/\w+/top_buyers\.csv`: header `user,orders,revenue_cents`, "
                            r"the \(at most\) (?P<n>\d+) users with the highest purchase",),
             (r'"reports": \[[^\]]*"top_buyers"', r'if report == "top_buyers":',
              r'"top_n": {n}\b', r"\[:top_n\]"),
             levels=frozenset({2, 3, 4})),
        Rule("funnel", (r"`/app/\w+/funnel\.csv`: header `step,users`",),
             (r'"reports": \[[^\]]*"funnel"', r'if report == "funnel":'),
             levels=frozenset({3, 4})),
        Rule("dedupe_event_ids", (r"Count every event id once",),
             (r"lines\.append\(lines\[-1\]\)", r'if event\["id"\] not in seen:'),
             levels=frozenset({3, 4})),
        Rule("by_country", (r"`/app/\w+/by_country\.csv`: header",),
             (r'"reports": \[[^\]]*"by_country"', r'if report == "by_country":'),
             levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `(?P<program>/app/\w+\.\w+)`",),
             (r"def test_program_on_fresh_logs\(", r'"program": "{program}"'),
             when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "export query results to CSV with header rows": "counts",
        "find duplicate keys that break expected uniqueness": "dedupe_event_ids",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        files = _events()["make_events"](rng, level, 6 + 5 * level, 25 + 35 * level)
        reports = _EVENTS_REPORTS[:level]
        fuzz = ctx.verifier_kind == "fuzz_equivalence"
        code = ctx.needs_code or fuzz
        data = f"/app/{rng.choice(_EVENTS_DATA_DIRS)}"
        out = f"/app/{rng.choice(_EVENTS_OUT_DIRS)}"
        top_n = rng.randint(3, 8)
        opener = rng.choice(_EVENTS_OPENERS)
        program = program_path(ctx.language, "/app/" + rng.choice(_EVENTS_PROGRAMS))
        usage = (
            f"called with a data folder (laid out like `{data}`) and a report name ("
            + ", ".join(f"`{r}`" for r in reports)
            + "), it prints exactly that report's CSV."
        )
        lang = ctx.language if code else "bash"
        source = program if code else "/tmp/events.sh"
        folder = templates(__name__)
        body = folder.render(
            "solution/events.py" if lang == "python" else "solution/events.sh", top_n=top_n
        )
        values = {
            "level": level,
            "opener": opener,
            "data": data,
            "out": out,
            "top_n": top_n,
            "reports": reports,
            "code": code,
            "fuzz": fuzz,
            "code_note": code_note(ctx, program, usage) if code else "",
            "setup": "\n".join(program_setup(lang, source, body)),
            "run": invoke(lang, source),
        }
        params = {
            "level": level,
            "code": code,
            "language": ctx.language,
            "program": program,
            "reports": reports,
            "out_dir": out,
            "top_n": top_n,
            "cases": (8 if fuzz else 3) + level,
        }
        tests = {
            "test_task.py": folder.render(
                "tests/test_task.py",
                head=minimal_test_file(params, ""),
                generator=folder.render("tests/events.py"),
            )
        }
        tests.update(files)
        return Draft(
            instruction=folder.render("instruction.md", **values),
            solution=folder.render("solution/solve.sh", **values),
            tests=tests,
            files={f"{data[len('/app/') :]}/{name}": text_ for name, text_ in files.items()},
        )
