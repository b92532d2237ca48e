"""Sort a messy inbox into category/year folders (the task's files are the templates
beside this module; the reference sorter in Python or Bash is ``solution/sorter.*``, the
oracle the tests and the Python sorter share is ``tests/oracle.py``, the live index
service ``solution/indexd.py``)."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    manifest_line,
    manifest_test_file,
    program_path,
    start_detached_service,
)
from tmax.generate.families.file_operations._shared import run_command, words
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference sorter of each language: ``solution/sorter.<extension>``."""

_CATEGORIES = [
    ("pdf", "documents"),
    ("docx", "documents"),
    ("md", "documents"),
    ("jpg", "images"),
    ("png", "images"),
    ("csv", "data"),
    ("json", "data"),
    ("txt", "notes"),
]

_ODD_NAMES = [
    "-rf scan 2023-02-11.PDF",
    "holiday  photo 2022-08-30.JPG",
    ".env.CSV",
    ".bashrc",
    "README",
    "draft.",
    "backup.tar.gz",
    "café menu 2024-03-03.md",
    "$(id) 2021-01-01.txt",
    'it\'s "final".docx',
]


@register
class InboxSorter(Family):
    """Sort a messy inbox into category/year folders by an extension rules file, with a moves
    manifest (counts, nested folders, an index by level); adversarial file names; code asks
    for a reusable sorter, services for a live HTTP index of the sorted tree."""

    name = "file_operations.inbox_sorter"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("move_by_rules", (r"move every file of /app/inbox",),
             (r"def test_moved_and_manifest\(",)),
        Rule("moves_manifest", (r"`/app/out/moves\.tsv`: one line `SOURCE<TAB>DESTINATION`",),
             (r'read\("/app/out/moves\.tsv"\)',)),
        Rule("odd_names", (r"people use all kinds of file names",),
             (r"def test_moved_and_manifest\(",), when={"adversarial": True}),
        Rule("counts", (r"`/app/out/counts\.txt`: `CATEGORY COUNT`",),
             (r'read\("/app/out/counts\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("no_empty_folders", (r"leave no empty folders behind in /app/inbox",),
             (r"empty folders left in /app/inbox",), levels=frozenset({3, 4})),
        Rule("index", (r"`/app/out/index\.json`",), (r'read\("/app/out/index\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/sorter",),
             (r"def test_program_fresh\(",), when={"code": True}),
        Rule("index_service", (r"leave a small HTTP service running on 127\.0\.0\.1:\d+",),
             (r"def test_service\(",), when={"service": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        adversarial = ctx.verifier_kind == "adversarial_corpus"
        chosen = rng.sample(_CATEGORIES, 4 + level)
        rules = "# extension category\n" + "".join(f"{e} {c}\n" for e, c in chosen)
        exts = [e for e, _ in chosen] + ["zip", "log"]
        subdirs = [""] if level < 3 else ["", "old/", "phone/2023/", "scans/"]
        inbox: dict[str, str] = {}
        used: set[str] = set()
        odd = rng.sample(_ODD_NAMES, 3 + level) if adversarial else []
        for i in range(4 + 3 * level + len(odd)):
            if i < len(odd):
                name = odd[i]
            else:
                ext = rng.choice(exts)
                ext = ext.upper() if rng.random() < 0.2 else ext
                date = rng.choice(["", f"_{rng.randint(2015, 2024)}-0{rng.randint(1, 9)}-1{i % 9}"])
                name = f"{rng.choice(['IMG', 'scan', 'notes', 'export', 'memo'])}_{i}{date}.{ext}"
            if name in used:
                continue
            used.add(name)
            inbox[rng.choice(subdirs) + name] = f"{words(rng, 6)} {i}\n"
        app_files = {f"inbox/{rel}": text for rel, text in inbox.items()}
        app_files["rules.conf"] = rules
        serve = ctx.needs_service
        code = ctx.needs_code
        lang = ctx.language if code else "bash"
        prog = program_path(lang, "/app/sorter")
        port = 8000 + rng.randint(100, 899)
        cfg = {
            "level": level,
            "rules": rules,
            "inbox": inbox,
            "lang": lang,
            "program": prog,
            "code": code,
            "adversarial": adversarial,
            "service": serve,
            "port": port,
            "fresh": 4 if not adversarial else 12,
        }
        tool = prog if code else "/tmp/sorter.sh"
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        values = {
            "level": level,
            "adversarial": adversarial,
            "code": code,
            "serve": serve,
            "port": port,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": run_command(lang, tool),
            "source": files.render(f"solution/sorter.{_EXTENSIONS[lang]}", oracle=oracle).strip(),
            "manifest": manifest_line(["moves.tsv", "counts.txt", "index.json"]),
            "server": files.render("solution/indexd.py", port=port).strip(),
            "start_service": start_detached_service(
                "python3 /app/indexd.py", port, "/app/indexd.log"
            ),
        }
        prelude = manifest_test_file(cfg, "")
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render("tests/test_task.py", oracle=oracle, prelude=prelude)
            },
            files=app_files,
            keep_agent_processes=serve,
        )
