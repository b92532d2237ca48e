"""Screening uploaded tar archives before extracting them (the task's files are the
templates beside this module; the reference checker in Python or Bash is
``solution/tarcheck.*``). The archive builder and the screening rules stay Python
functions: their source is pasted into the tests and the Python checker."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    fixture_test_head,
    function_sources,
    invoke,
    program_path,
    program_sentence,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

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

        program = program_path(language, "/app/tarcheck") if language else None
        template = templates(__name__)
        values = {
            "level": level,
            "code": language is not None,
            "limits": limits,
            "mode": ctx.verifier_kind,
        }
        functions = function_sources(ag_members, ag_escapes, ag_verdict)
        if language:
            ext = {"python": "py", "bash": "sh"}[language]
            values["program_sentence"] = program_sentence(language, program)
            values["program"] = program
            values["check"] = invoke(language, program)
        else:
            ext = "sh"
            values["check"] = "bash /tmp/tarcheck.sh"
        values["source"] = template.render(
            f"solution/tarcheck.{ext}", level=level, limits=limits, functions=functions
        ).strip()

        params = {
            "level": level,
            "limits": list(limits),
            "hashes": hashes,
            "names": sorted(name for name, _ in corpus),
            "mode": ctx.verifier_kind,
            "code": language is not None,
            "hidden": {1: 12, 2: 16, 3: 20, 4: 24}[level],
        }
        tests = template.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            rules=AG_RULES,
            functions=function_sources(ag_build, ag_members, ag_escapes, ag_verdict, ag_corpus),
            settings=settings_lines(params).rstrip("\n"),
        )
        return Draft(
            instruction=template.render("instruction.md", **values),
            solution=template.render("solution/solve.sh", **values),
            tests={"test_task.py": tests},
            files=files,
        )
