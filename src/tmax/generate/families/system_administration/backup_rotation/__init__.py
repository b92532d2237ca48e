"""Rotate nightly database backups under a retention policy (the task's files are the
templates beside this module; the reference planner in Python or Bash is
``solution/rotate.*``, the oracle the tests and the Python planner share is
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
"""The reference planner of each language: ``solution/rotate.<extension>``."""


@register
class BackupRotation(Family):
    """Rotate nightly database backups under a retention policy (newest N, monthly keepers,
    several hosts, LATEST markers and freed-space summary by level); code asks for a
    reusable dry-run planner checked on random directories."""

    name = "system_administration.backup_rotation"
    domain = "system_administration"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("keep_newest", (r"keep the newest \d+ \(by the date in the name\)",),
             (r"def test_rotation_applied\(",)),
        Rule("keep_newest_seven", (r"keep the newest 7 \(by the date in the name\)",),
             (r"def test_rotation_applied\(",), when={"keep": 7}),
        Rule("monthly_keepers", (r"also keep the newest backup of every calendar month",),
             (r"months\.add\(name\[3:9\]\)",), levels=frozenset({2, 3, 4})),
        Rule("per_host", (r"each host directory under /app/backups is rotated on its own",),
             (r'for host, files in sorted\(CFG\["dirs"\]\.items\(\)\)',),
             levels=frozenset({3, 4})),
        Rule("apply", (r"apply the policy \(really delete the files\)",),
             (r"assert now == stay",)),
        Rule("deleted_list", (r"`/app/out/deleted\.txt`: `HOST/FILE`",),
             (r'read\("/app/out/deleted\.txt"\)',)),
        Rule("kept_list", (r"`/app/out/kept\.txt`: `HOST/FILE`",),
             (r'read\("/app/out/kept\.txt"\)',), levels=frozenset({3, 4})),
        Rule("latest_marker", (r"`/app/backups/HOST/LATEST`",), (r'read\(path \+ "/LATEST"\)',),
             levels=frozenset({4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/rotate",),
             (r"def test_program_fresh\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "rotate backups keeping only the newest seven copies": "keep_newest_seven"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        keep = rng.choice([3, 5, 7])
        hosts = (
            ["db01"]
            if level < 3
            else sorted(rng.sample(["db01", "db02", "ledger", "wiki"], level - 1))
        )
        app_files: dict[str, str | bytes] = {}
        dirs: dict[str, dict[str, int]] = {}
        for host in hosts:
            listing: dict[str, int] = {}
            for _ in range(8 + 4 * level):
                name = (
                    f"db-{rng.choice([2023, 2024])}{rng.randint(1, 12):02d}"
                    f"{rng.randint(1, 28):02d}.tar.gz"
                )
                size = rng.randint(20, 400)
                listing[name] = size
            if level >= 3:
                listing["README.txt"] = 40
            for name, size in listing.items():
                content = (
                    "README: nightly dumps land here\n".ljust(size, ".")[:size]
                    if name == "README.txt"
                    else (f"{host}/{name}\n" * 40)[:size]
                )
                listing[name] = len(content.encode())
                app_files[f"backups/{host}/{name}"] = content
            dirs[host] = dict(sorted(listing.items()))
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/rotate")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "keep": keep,
            "dirs": dirs,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 5 * level + 5,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/rotate.sh"
        values = {
            "level": level,
            "keep": keep,
            "hosts": hosts,
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "oracle": oracle,
        }
        values["source"] = files.render(f"solution/rotate.{_EXTENSIONS[lang]}", **values).strip()
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
