"""Find groups of byte-identical files in a shared tree (the task's files are the templates
beside this module; the reference finder in Python or Bash is ``solution/dupes.*``, the
oracle the tests and the Python finder share is ``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    manifest_line,
    manifest_test_file,
    program_path,
)
from tmax.generate.families.file_operations._shared import run_command, words
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_ROOTS = ["shared", "teamdrive", "nas", "fileserver", "dept_share"]
_PROGRAMS = ["dupes", "find_dupes", "dupefinder"]
_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference finder of each language: ``solution/dupes.<extension>``."""
_OPENERS = [
    "Our shared drive at {root} is full of copies of the same documents under different names.",
    "The team share at {root} has grown to {count} files, many of them copies of the same "
    "documents saved under other names.",
    "People have been copying documents around {root} for years; the {count} files there "
    "contain plenty of duplicates under different names.",
    "Before we migrate {root} ({count} files) to the new file server I want to know which "
    "files are copies of each other.",
]


@register
class DupeHunt(Family):
    """Find groups of byte-identical files in a shared tree (reclaimable space, hard-linking
    the copies, summary and checksums by level); code asks for a reusable duplicate finder
    checked on random trees."""

    name = "file_operations.dupe_hunt"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("duplicate_groups", (r"`/app/out/duplicates\.txt`: one line per group",),
             (r'read\("/app/out/duplicates\.txt"\)',)),
        Rule("empty_not_duplicates", (r"Empty files never count as duplicates",),
             (r"if data:",)),
        Rule("tree_intact", (r"no file may disappear or change content",),
             (r"def test_tree_state\(",)),
        Rule("reclaimable", (r"`/app/out/reclaimable\.txt`: the number of bytes",),
             (r'read\("/app/out/reclaimable\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("hard_links", (r"replace every file but the first with a hard link",),
             (r"should be a hard link to", r"was linked"), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/(?:dupes|find_dupes|dupefinder)",),
             (r"def test_program_fresh\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "find duplicate files by comparing content checksums": "duplicate_groups"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        dirs = ["", "docs/", "backup/", "backup/old/", "projects/q3/", "inbox/", "misc/tmp/"]
        dirs = dirs[: 3 + level]
        stems = ["notes", "budget", "minutes", "plan", "draft", "invoice", "memo", "agenda"]
        blobs = [
            f"{words(rng, rng.randint(4, 12))}\nref {rng.randint(1000, 9999)}\n"
            for _ in range(3 + 2 * level)
        ]
        # same size, different content: a size-only comparison is not enough
        blobs.append(blobs[0][:-2] + ("9" if blobs[0][-2] != "9" else "8") + "\n")
        tree: dict[str, str] = {}
        for i in range(6 + 4 * level):
            rel = f"{rng.choice(dirs)}{rng.choice(stems)}_{i}.txt"
            tree[rel] = rng.choice(blobs)
        tree[f"{dirs[-1]}empty_a.txt"] = ""
        tree[f"{dirs[1]}empty_b.txt"] = ""
        root = "/app/" + rng.choice(_ROOTS)
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        lang = ctx.language if code else "bash"
        prog = program_path(lang, "/app/" + rng.choice(_PROGRAMS))
        cfg = {
            "level": level,
            "root": root,
            "tree": tree,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 4 if ctx.verifier_kind == "exact_text" else 8 * level + 8,
        }
        tool = prog if code else "/tmp/dupes.sh"
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        values = {
            "level": level,
            "opener": rng.choice(_OPENERS).format(root=root, count=len(tree)),
            "root": root,
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": run_command(lang, tool),
            "source": files.render(f"solution/dupes.{_EXTENSIONS[lang]}", oracle=oracle).strip(),
            "manifest": manifest_line(["duplicates.txt", "reclaimable.txt", "summary.json"]),
        }
        prelude = manifest_test_file(cfg, "")
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render("tests/test_task.py", oracle=oracle, prelude=prelude)
            },
            files={f"{root.removeprefix('/app/')}/{k}": v for k, v in tree.items()},
        )
