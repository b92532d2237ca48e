"""Duplicate photos by content in a folder tree (the task's files are the templates
beside this module; the reference finder in Python or Bash is ``solution/dupes.*``, the
group service ``solution/dupes_server.py``). The tree generator and the grouping rules
stay Python functions: their source is pasted into the tests, the Python finder and the
service."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    ANSWER_SERVER_FRAME,
    asked_program_language,
    fixture_test_head,
    function_sources,
    invoke,
    program_path,
    program_sentence,
    service_ports,
    settings_lines,
    sha256_hex,
    start_python_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

DD_EXCLUDED = (".cache", "@eaDir")


def dd_tree(rng, level, count):
    """({relative path: bytes}, [(link path, target)]) for a photo folder with duplicates."""
    folders = ["", "2019", "2019/Summer Trip", "2020/raw", "phone", "Camera Uploads", "misc"]
    if level >= 3:
        folders += [".cache", "2019/@eaDir", "phone/.cache/thumbs"]
    stems = ["IMG_", "DSC_", "PXL_", "scan ", "copy of IMG_"]
    blobs, files = [], {}
    while len(files) < count:
        folder = rng.choice(folders)
        name = (
            f"{rng.choice(stems)}{rng.randint(1, 9999):04d}{rng.choice(['.jpg', '.JPG', '.png'])}"
        )
        if rng.random() < 0.15:
            name = name.replace(".", " (1).", 1)
        path = f"{folder}/{name}" if folder else name
        if path in files:
            continue
        roll = rng.random()
        if level >= 2 and roll < 0.06:
            data = b""
        elif blobs and roll < 0.4:
            data = rng.choice(blobs)
        else:
            data = rng.randbytes(rng.randint(40, 1200))
            blobs.append(data)
        files[path] = data
    links = []
    if level >= 4:
        targets = sorted(p for p, d in files.items() if d)
        for i in range(3):
            links.append((f"link-{i}.jpg", rng.choice(targets)))
    return files, links


def dd_considered(path, data, level):
    if level >= 3 and any(part in DD_EXCLUDED for part in path.split("/")[:-1]):
        return False
    return not (level >= 2 and not data)


def dd_groups(files, level):
    """Sorted groups (sorted path lists) of identical files; ``files`` maps path to content
    (or to any digest of it)."""
    by_content = {}
    for path, data in files.items():
        if dd_considered(path, data, level):
            by_content.setdefault(data, []).append(path)
    return sorted(sorted(group) for group in by_content.values() if len(group) > 1)


def dd_text(groups):
    return "".join("\t".join(group) + "\n" for group in groups)


def dd_keep(group):
    return min(group, key=lambda p: (p.count("/"), p))


def dd_scan(root):
    """{relative path: bytes} of the regular files under root (symlinks skipped)."""
    import os

    files = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(folder, name)
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as handle:
                    files[os.path.relpath(full, root)] = handle.read()
    return files


@register
class DuplicateFiles(Family):
    """Find duplicate photos by content in a folder tree; levels add empty files, wasted
    space, excluded thumbnail/cache folders with a keep rule, symlinks, and an actual clean-up
    into a trash folder with a JSON summary. Code asks for a reusable duplicate finder run on
    fresh trees; services answer duplicate-group queries over TCP."""

    name = "file_operations.duplicate_files"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("duplicates_txt", (r"`/app/report/duplicates\.txt`: one line per group",),
             (r"def test_duplicates\(",)),
        Rule("same_content", (r"duplicates when their contents are byte-for-byte identical",),
             (r"by_content\.setdefault\(data, \[\]\)",)),
        Rule("library_intact", (r"Leave the library itself as it is",),
             (r"def test_library_intact\(",)),
        Rule("empty_files", (r"Empty files are never duplicates",),
             (r"not \(level >= 2 and not data\)",), levels=frozenset({2, 3, 4})),
        Rule("wasted_bytes", (r"`/app/report/wasted_bytes\.txt`",),
             (r'read\("/app/report/wasted_bytes\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("ignored_folders", (r"Ignore everything inside folders named `\.cache` or `@eaDir`",),
             (r"if level >= 3 and any\(part in DD_EXCLUDED",), levels=frozenset({3, 4})),
        Rule("keep_txt", (r"`/app/report/keep\.txt`",), (r'read\("/app/report/keep\.txt"\)',),
             levels=frozenset({3, 4})),
        Rule("symlinks", (r"Symbolic links are not files: ignore them",),
             (r'for link in CFG\["links"\]:',), levels=frozenset({4})),
        Rule("cleanup", (r"move every other copy from `/app/photos/PATH` to `/app/trash/PATH`",),
             (r'read\("/app/report/moved\.txt"\)',), levels=frozenset({4})),
        Rule("summary_json", (r"`/app/report/summary\.json`",),
             (r'read\("/app/report/summary\.json"\)',), levels=frozenset({4})),
        Rule("program", (r"I also need a program that takes a directory",),
             (r"def test_program_on_fresh_trees\(",), when={"code": True}),
        Rule("group_service", (r"leave a service running on 127\.0\.0\.1 port \d+",),
             (r"def test_service\(",), when={"service": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "find duplicate files by comparing content checksums": "same_content"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        serve = ctx.needs_service
        tree, links = dd_tree(rng, level, {1: 14, 2: 24, 3: 36, 4: 50}[level])
        files: dict[str, str | bytes] = {f"photos/{p}": d for p, d in tree.items()}
        manifest = {p: sha256_hex(d) for p, d in tree.items()}
        steps_docker = []
        if links:
            cmds = [
                f"ln -s {shlex.quote(target)} {shlex.quote('/app/photos/' + link)}"
                for link, target in links
            ]
            steps_docker.append("RUN " + " && ".join(cmds))
        program = program_path(language, "/app/dupes") if language else None
        port = service_ports(ctx)[0]
        template = templates(__name__)
        values = {"level": level, "code": language is not None, "service": serve, "port": port}
        if language:
            values["program_sentence"] = program_sentence(language, program)
            values["program"] = program
            values["program_folder"] = program.rsplit("/", 1)[0]
            values["tool"] = invoke(language, program)
        else:
            values["tool"] = "bash /tmp/dupes.sh"
        ext = "py" if language == "python" else "sh"
        values["source"] = template.render(
            f"solution/dupes.{ext}",
            level=level,
            functions=function_sources(dd_considered, dd_groups, dd_text, dd_scan),
        ).strip()
        if serve:
            values["server"] = template.render(
                "solution/dupes_server.py",
                level=level,
                excluded=DD_EXCLUDED,
                port=port,
                considered=function_sources(dd_considered),
                frame=ANSWER_SERVER_FRAME,
            ).strip()
            values["start_service"] = start_python_service("/app/dupes_server.py", [port])

        params = {
            "level": level,
            "manifest": manifest,
            "links": [link for link, _ in links],
            "port": port,
            "code": language is not None,
            "service": serve,
            "cases": {1: 4, 2: 6, 3: 8, 4: 10}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = template.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            excluded=DD_EXCLUDED,
            functions=function_sources(
                dd_tree, dd_considered, dd_groups, dd_text, dd_keep, dd_scan
            ),
            settings=settings_lines(params).rstrip("\n"),
        )
        return Draft(
            instruction=template.render("instruction.md", **values),
            solution=template.render("solution/solve.sh", **values),
            tests={"test_task.py": tests},
            files=files,
            dockerfile_steps=tuple(steps_docker),
            keep_agent_processes=serve,
        )
