"""Task families of the file_operations domain.

Families here work on trees, records and archives: finding and cleaning up duplicate
files, parsing fixed-width exports, screening uploaded archives, and repairing legacy text
encodings. Reference code is written once as plain functions and pasted into tests and
Python reference programs; the task plumbing (test head, service frame, solution lines)
comes from :mod:`tmax.generate.builders`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    bullets,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    settings_lines,
    sha256_hex,
)
from tmax.generate.families.file_operations import (  # noqa: F401  (registers them first, in this order)
    duplicate_files,
    fixed_width,
)
from tmax.generate.family import Draft, Family, RenderContext, register

# =====================================================================================
# file_operations.archive_guard
# =====================================================================================

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


_AG_PY = (
    """#!/usr/bin/env python3
\"\"\"Screen a tar archive before extraction: prints OK or REJECT RULE.\"\"\"
import sys

LEVEL = @LEVEL@
LIMITS = @LIMITS@
AG_RULES = ("absolute", "traversal", "link", "special", "duplicate", "count", "size")

"""
    + function_sources(ag_members, ag_escapes, ag_verdict)
    + """


if __name__ == "__main__":
    rule = ag_verdict(ag_members(open(sys.argv[1], "rb").read()), LEVEL, LIMITS)
    print("OK" if rule is None else "REJECT " + rule)
"""
)

_AG_SH = r"""#!/bin/bash
# Screen a tar archive before extraction: prints OK or REJECT RULE.
export LC_ALL=C
LEVEL=@LEVEL@
MAX_MEMBERS=@COUNT@
MAX_BYTES=@BYTES@

escapes() {  # start directory $1 (may be empty), link target $2
  local target=$2 part
  [[ $target == /* ]] && return 0
  local -a parts=()
  local IFS=/
  for part in $1; do [[ -n $part && $part != . ]] && parts+=("$part"); done
  for part in $target; do
    case $part in
      "" | .) ;;
      ..) ((${#parts[@]})) || return 0; unset 'parts[${#parts[@]}-1]' ;;
      *) parts+=("$part") ;;
    esac
  done
  return 1
}

declare -A broken=()
count=0 bytes=0
names=()
while IFS= read -r line; do
  read -r perms _owner size _date _time rest <<< "$line"
  type=${perms:0:1}
  name=$rest
  case $type in
    l) name=${rest% -> *}; target=${rest#* -> } ;;
    h) name=${rest% link to *}; target=${rest#* link to } ;;
  esac
  name=${name%/}
  names+=("$name")
  count=$((count + 1))
  [[ $name == /* ]] && broken[absolute]=1
  [[ /$name/ == */../* ]] && broken[traversal]=1
  if ((LEVEL >= 2)); then
    if [[ $type == l ]]; then
      dir=""
      [[ $name == */* ]] && dir=${name%/*}
      escapes "$dir" "$target" && broken[link]=1
    elif [[ $type == h ]]; then
      escapes "" "$target" && broken[link]=1
    fi
  fi
  case $type in
    -) bytes=$((bytes + size)) ;;
    c | b | p) broken[special]=1 ;;
  esac
done < <(tar -tvPf "$1" --numeric-owner)
if ((LEVEL >= 3)); then
  ((count > MAX_MEMBERS)) && broken[count]=1
  ((bytes > MAX_BYTES)) && broken[size]=1
else
  unset 'broken[special]'
fi
if ((LEVEL >= 4)) && [[ -n $(printf '%s\n' "${names[@]}" | sort | uniq -d) ]]; then
  broken[duplicate]=1
fi
for rule in absolute traversal link special duplicate count size; do
  if [[ -n ${broken[$rule]-} ]]; then echo "REJECT $rule"; exit 0; fi
done
echo OK
"""


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

        rules = {
            "absolute": "a member name starts with `/`",
            "traversal": "a member name has a `..` path component",
            "link": "a symbolic link whose target, resolved from the link's own folder, is "
            "absolute or leaves the extraction folder, or a hard link whose target (a path "
            "from the archive root) does",
            "special": "a member is a device file or a FIFO",
            "duplicate": "two members have the same name (ignoring a trailing `/`)",
            "count": f"the archive has more than {limits[0]} members (folders count)",
            "size": f"its regular files add up to more than {limits[1]} bytes",
        }
        active = [r for r in AG_RULES if r in ("absolute", "traversal")]
        if level >= 2:
            active.append("link")
        if level >= 3:
            active += ["special"]
        if level >= 4:
            active.append("duplicate")
        if level >= 3:
            active += ["count", "size"]
        kinds = "`.tar` or `.tar.gz` files" if level >= 4 else "`.tar` files"
        body = [
            f"Users upload archives ({kinds}) to `/app/incoming/`, and we extract them on the "
            "server. Before we extract anything, every archive must be screened, looking at "
            "its members exactly as recorded. An archive is rejected for the first of these "
            "rules (in this order) that it breaks:\n"
            + bullets(f"`{r}`: {rules[r]}" for r in active)
            + "\nOtherwise it is OK. Leave the uploads in `/app/incoming/` as they are."
        ]
        deliverables = [
            "`/app/out/verdicts.txt`: one line per archive, sorted by file name: `NAME OK` or "
            + ("`NAME REJECT RULE`." if level >= 2 else "`NAME REJECT`.")
        ]
        if level >= 2:
            deliverables.append(
                "Extract every OK archive into `/app/extracted/STEM/` (STEM is the file name "
                "without `.tar`/`.tar.gz`); extract nothing from rejected ones."
            )
        if level >= 3:
            deliverables.append(
                "`/app/out/inventory.tsv`: `ARCHIVE<TAB>PATH<TAB>SIZE` for every regular-file "
                "member (not links) of the OK archives, sorted by archive then path."
            )
        if level >= 4:
            deliverables.append(
                "`/app/out/summary.json`: `archives`, `safe` (OK count), `rejected` (an object "
                "mapping each rule to how many archives it rejected), `files` (inventory "
                "lines) and `bytes` (their total size)."
            )
        body.append("Please take care of:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, "/app/tarcheck")
            hostile = (
                " It will be run on hostile and clean archives you have not seen: every hostile "
                "one must be rejected and every clean one accepted."
                if ctx.verifier_kind == "adversarial_corpus"
                else " It will be compared with our policy on archives you have not seen."
            )
            body.append(
                "The upload service will call a checker program: given the path of one archive, "
                "it prints `OK` or `REJECT RULE` (one line). "
                + program_sentence(language, program)
                + hostile
            )
        instruction = "\n\n".join(body)

        def fill(source: str) -> str:
            return (
                source.replace("@LEVEL@", str(level))
                .replace("@LIMITS@", repr(limits))
                .replace("@COUNT@", str(limits[0]))
                .replace("@BYTES@", str(limits[1]))
            )

        steps = ["mkdir -p /app/out /app/extracted"]
        if level >= 3:
            steps.append("ls -l /app/incoming")
        if language:
            source = {"python": _AG_PY, "bash": _AG_SH}[language]
            steps.append(program_step(language, program, fill(source)))
            check = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/tarcheck.sh", fill(_AG_SH)))
            check = "bash /tmp/tarcheck.sh"
        steps.append(
            f'for a in /app/incoming/*; do echo "$(basename "$a") $({check} "$a")"; done'
            " | LC_ALL=C sort > /tmp/verdicts.txt"
        )
        if level >= 2:
            steps.append("cp /tmp/verdicts.txt /app/out/verdicts.txt")
            steps.append(
                "awk '$2 == \"OK\" {print $1}' /app/out/verdicts.txt | while read -r a; do"
                ' stem=${a%.gz}; stem=${stem%.tar}; mkdir -p "/app/extracted/$stem";'
                ' tar -xf "/app/incoming/$a" -C "/app/extracted/$stem"; done'
            )
        else:
            steps.append("sed 's/ REJECT .*/ REJECT/' /tmp/verdicts.txt > /app/out/verdicts.txt")
        if level >= 3:
            steps.append(
                "awk '$2 == \"OK\" {print $1}' /app/out/verdicts.txt | while read -r a; do"
                ' tar -tvf "/app/incoming/$a" --numeric-owner | awk -v a="$a"'
                ' \'$1 ~ /^-/ {print a "\\t" $6 "\\t" $3}\'; done | LC_ALL=C sort'
                " > /app/out/inventory.tsv"
            )
        if level >= 4:
            steps += [
                "archives=$(wc -l < /app/out/verdicts.txt)",
                "safe=$(grep -c ' OK$' /app/out/verdicts.txt || true)",
                'rejected=$(awk \'$2 == "REJECT" {n[$3]++} END {for (r in n) printf "%s\\"%s\\":'
                ' %d", (k++ ? ", " : ""), r, n[r]}\' /app/out/verdicts.txt)',
                "files=$(wc -l < /app/out/inventory.tsv)",
                "bytes=$(awk -F'\\t' '{s += $3} END {print s + 0}' /app/out/inventory.tsv)",
                'printf \'{"archives": %d, "safe": %d, "rejected": {%s}, "files": %d,'
                ' "bytes": %d}\\n\' "$archives" "$safe" "$rejected" "$files" "$bytes"'
                " > /app/out/summary.json",
            ]
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "limits": list(limits),
            "hashes": hashes,
            "names": sorted(name for name, _ in corpus),
            "mode": ctx.verifier_kind,
            "code": language is not None,
            "hidden": {1: 12, 2: 16, 3: 20, 4: 24}[level],
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + f"AG_RULES = {AG_RULES!r}\n\n"
            + function_sources(ag_build, ag_members, ag_escapes, ag_verdict, ag_corpus)
            + "\n\n"
            + settings_lines(params)
            + _AG_TESTS
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_AG_TESTS = """
LEVEL = CFG["level"]
LIMITS = tuple(CFG["limits"])
MEMBERS = {n: ag_members(Path("/app/incoming", n).read_bytes()) for n in CFG["names"]}
VERDICTS = {n: ag_verdict(m, LEVEL, LIMITS) for n, m in MEMBERS.items()}


def stem(name):
    return name.removesuffix(".gz").removesuffix(".tar")


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_verdicts():
    rows = []
    for name in CFG["names"]:
        rule = VERDICTS[name]
        if rule is None:
            rows.append(f"{name} OK\\n")
        else:
            rows.append(f"{name} REJECT {rule}\\n" if LEVEL >= 2 else f"{name} REJECT\\n")
    assert read("/app/out/verdicts.txt") == "".join(rows), "verdicts.txt is wrong"


def test_extraction():
    if CFG["level"] >= 2:
        for name, members in MEMBERS.items():
            target = Path("/app/extracted", stem(name))
            if VERDICTS[name] is not None:
                assert not target.exists(), f"{name} was rejected but {target} exists"
                continue
            import io
            import tarfile

            with tarfile.open(fileobj=io.BytesIO(Path("/app/incoming", name).read_bytes())) as tar:
                for m in tar.getmembers():
                    path = target / m.name
                    if m.isfile():
                        data = tar.extractfile(m).read()
                        assert path.is_file() and path.read_bytes() == data, f"{path} is wrong"
                    elif m.issym():
                        assert path.is_symlink(), f"{path} should be a symlink"


def inventory():
    rows = []
    for name, members in MEMBERS.items():
        if VERDICTS[name] is None:
            rows += [(name, n, size) for n, kind, size, _t in members if kind == "file"]
    return sorted(rows)


def test_inventory():
    if CFG["level"] >= 3:
        expected = "".join(f"{a}\\t{p}\\t{s}\\n" for a, p, s in inventory())
        assert read("/app/out/inventory.tsv") == expected, "inventory.tsv is wrong"


def test_summary():
    if CFG["level"] >= 4:
        rejected = {}
        for rule in VERDICTS.values():
            if rule is not None:
                rejected[rule] = rejected.get(rule, 0) + 1
        rows = inventory()
        want = {
            "archives": len(VERDICTS),
            "safe": sum(r is None for r in VERDICTS.values()),
            "rejected": rejected,
            "files": len(rows),
            "bytes": sum(s for _a, _p, s in rows),
        }
        data = json.loads(read("/app/out/summary.json"))
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_checker_on_unseen_archives(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(2024)
    corpus = ag_corpus(rng, LEVEL, CFG["hidden"], LIMITS)
    missed, blocked, wrong = [], [], []
    for name, data in corpus:
        path = tmp_path / name
        path.write_bytes(data)
        rule = ag_verdict(ag_members(data), LEVEL, LIMITS)
        want = "OK" if rule is None else f"REJECT {rule}"
        done = run([path])
        assert done.returncode == 0, f"the checker failed on {name}: {done.stderr[-800:]}"
        got = done.stdout.strip()
        if CFG["mode"] == "adversarial_corpus":
            if rule is not None and not got.startswith("REJECT"):
                missed.append((name, want))
            if rule is None and got != "OK":
                blocked.append((name, got))
        elif got != want:
            wrong.append((name, got, want))
    assert not missed, f"hostile archives accepted: {missed}"
    assert not blocked, f"clean archives rejected: {blocked}"
    assert not wrong, f"wrong verdicts (archive, got, expected): {wrong}"
"""


# =====================================================================================
# file_operations.encoding_fix
# =====================================================================================

EF_WORDS = {
    "ascii": ["invoice", "total", "order", "shipped", "pending", "Berlin", "Oslo", "12.50"],
    "latin": ["café", "naïve", "Müller", "façade", "Ærø", "smörgåsbord", "jalapeño", "°C", "½"],
    "cp1252": ["€100", "“quoted”", "— dash", "…", "™", "‘tick’", "Œuvre", "šalt"],
    "wide": ["Łódź", "Ωmega", "日本", "Привет", "ﬁ ligature", "≤ 5", "🙂"],
}
EF_KINDS = ("utf-8", "utf-8-bom", "utf-16le", "utf-16be", "windows-1252", "latin-1")


def ef_text(rng, kind, level):
    pools = ["ascii", "latin"]
    if kind == "windows-1252":
        pools.append("cp1252")
    if kind.startswith("utf"):
        pools += ["cp1252", "wide"]
    lines = []
    for _ in range(rng.randint(2, 8)):
        words = [rng.choice(EF_WORDS[rng.choice(pools)]) for _ in range(rng.randint(2, 7))]
        lines.append(" ".join(words))
    if kind == "windows-1252":
        lines[rng.randrange(len(lines))] += " " + rng.choice(EF_WORDS["cp1252"])
    return "\n".join(lines) + "\n"


def ef_file(rng, level, kind=None):
    """(bytes, kind) of one vendor file."""
    kind = kind or rng.choice(EF_KINDS)
    text = ef_text(rng, kind, level)
    if level >= 2 and rng.random() < 0.4:
        text = text.replace("\n", "\r\n")
    if level >= 3 and rng.random() < 0.25:
        text += "\x1a"
    codec = {"utf-8-bom": "utf-8-sig", "utf-16le": "utf-16-le", "utf-16be": "utf-16-be"}
    data = text.encode(codec.get(kind, kind))
    if kind == "utf-16le":
        data = b"\xff\xfe" + data
    elif kind == "utf-16be":
        data = b"\xfe\xff" + data
    return data, kind


def ef_detect(data):
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8-bom"
    if data.startswith(b"\xff\xfe"):
        return "utf-16le"
    if data.startswith(b"\xfe\xff"):
        return "utf-16be"
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if any(0x80 <= b <= 0x9F for b in data):
        return "windows-1252"
    return "latin-1"


def ef_convert(data, level):
    kind = ef_detect(data)
    if kind == "utf-8-bom":
        text = data[3:].decode("utf-8")
    elif kind == "utf-16le":
        text = data[2:].decode("utf-16-le")
    elif kind == "utf-16be":
        text = data[2:].decode("utf-16-be")
    else:
        text = data.decode({"utf-8": "utf-8", "windows-1252": "cp1252"}.get(kind, "latin-1"))
    if level >= 2:
        text = text.replace("\r\n", "\n")
    if level >= 3 and text.endswith("\x1a"):
        text = text[:-1]
    return text.encode("utf-8")


_EF_PY = (
    """#!/usr/bin/env python3
\"\"\"Convert one vendor text file to clean UTF-8 on standard output.\"\"\"
import sys

LEVEL = @LEVEL@

"""
    + function_sources(ef_detect, ef_convert)
    + """


if __name__ == "__main__":
    if sys.argv[1] == "--detect":
        print(ef_detect(open(sys.argv[2], "rb").read()))
    else:
        sys.stdout.buffer.write(ef_convert(open(sys.argv[1], "rb").read(), LEVEL))
"""
)

_EF_SH = r"""#!/bin/bash
# Convert one vendor text file to clean UTF-8 on standard output (--detect FILE: its encoding).
export LC_ALL=C
LEVEL=@LEVEL@

detect() {
  local head
  head=$(head -c 3 "$1" | od -An -tx1 | tr -d ' \n')
  case $head in
    efbbbf) echo utf-8-bom ;;
    fffe*) echo utf-16le ;;
    feff*) echo utf-16be ;;
    *)
      if iconv -f UTF-8 -t UTF-8 "$1" > /dev/null 2>&1; then echo utf-8
      elif [[ $(tr -d '\000-\177\240-\377' < "$1" | head -c 1 | wc -c) -gt 0 ]]; then
        echo windows-1252
      else echo latin-1
      fi ;;
  esac
}

if [[ $1 == --detect ]]; then detect "$2"; exit 0; fi
kind=$(detect "$1")
case $kind in
  utf-8-bom) skip=3 from=UTF-8 ;;
  utf-16le) skip=2 from=UTF-16LE ;;
  utf-16be) skip=2 from=UTF-16BE ;;
  utf-8) skip=0 from=UTF-8 ;;
  windows-1252) skip=0 from=WINDOWS-1252 ;;
  *) skip=0 from=ISO-8859-1 ;;
esac
work=$(mktemp)
trap 'rm -f "$work"' EXIT
tail -c +$((skip + 1)) "$1" | iconv -f "$from" -t UTF-8 > "$work"
if ((LEVEL >= 2)); then sed -i 's/\r$//' "$work"; fi
if ((LEVEL >= 3)) && [[ $(tail -c 1 "$work" | od -An -tx1 | tr -d ' \n') == 1a ]]; then
  head -c -1 "$work"
else
  cat "$work"
fi
"""


# The names a user would pick for the folders, files and program, and how strict to be.
_EF_INBOXES = ("inbox", "incoming", "drops", "vendor_files", "landing")
_EF_DESTS = ("utf8", "clean", "converted", "normalized")
_EF_OUTS = ("out", "reports", "results")
_EF_REPORTS = ("encodings.txt", "detected.txt", "charsets.txt")
_EF_PROGRAMS = ("toutf8", "fixenc", "recode_utf8", "normalize_text")
_EF_SENDERS = ("northwind", "bluepeak", "kestrel", "lindqvist", "oakmont", "tamarind", "vega")
_EF_STEMS = (
    "orders",
    "stock",
    "prices",
    "customers",
    "notes",
    "returns",
    "catalogue",
    "availability",
    "products",
    "invoices",
    "rates",
    "contacts",
)
# Below 1 at every level: a metric task that needs every file is an exact task, and its
# instruction would ask for "at least 100%" (level 4's 18 files: one may be wrong).
_EF_THRESHOLDS = {1: (0.6, 0.65, 0.7), 2: (0.75, 0.8), 3: (0.85, 0.9), 4: (0.9,)}
_EF_LEADS = (
    "Tell the encodings apart like this:",
    "Decide each file's encoding by these checks, in this order:",
    "Work out the encoding of each file as follows:",
    "This is how to recognise which encoding a file uses:",
)
_EF_PROGRAM_INTROS = (
    "New drops arrive daily, so I also want a converter program",
    "More files come in every night, so I also need this as a program",
    "Our nightly import job should do the conversion itself, so please also write a program",
    "Since the senders will not change their systems, I also want a reusable converter",
)
_EF_OPENERS = (
    "The text files other organisations send us land in {tree}, each in whatever encoding "
    "the sender's system happens to use.",
    "Files from our partners arrive in {tree}, and half of them show garbled characters when "
    "we open them.",
    "Everything that lands in {tree} has to be readable as UTF-8 before our import jobs touch "
    "it, but the senders use all sorts of encodings.",
    "Our import scripts choke on the files in {tree}: every sender writes text in a different "
    "encoding.",
    "I keep finding mojibake in the files that arrive in {tree}, because every sender picks "
    "its own encoding.",
)


@register
class EncodingFix(Family):
    """Normalise vendor text files in mixed legacy encodings (BOMs, UTF-16, windows-1252,
    latin-1) to clean UTF-8; levels add CRLF endings and an encoding report, nested folders
    and DOS end-of-file markers, and a manifest with a JSON summary. metric_threshold scores
    the share of files converted exactly (a drawn bar, tightening with the level); code asks
    for a converter program run on fresh files. Folder, file and program names are drawn
    per task."""

    name = "file_operations.encoding_fix"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("convert", (r"Write each file, decoded accordingly, to the same relative path under "
                         r"`(?P<dest>/app/\w+)/` as UTF-8 without a BOM",),
             (r"def test_converted_files\(", r'out = Path\("{dest}", path\)')),
        Rule("detect_bom", (r"a file starting with the bytes EF BB BF is UTF-8 with a BOM",),
             (r'if data\.startswith\(b"\\xef\\xbb\\xbf"\)',)),
        Rule("detect_utf8", (r"otherwise, a file that is valid UTF-8 is UTF-8",),
             (r'data\.decode\("utf-8"\)\s+return "utf-8"',)),
        Rule("detect_legacy", (r"a file containing a byte from 0x80 to 0x9F is Windows-1252",),
             (r"if any\(0x80 <= b <= 0x9F for b in data\)",)),
        Rule("all_exact", (r"Every file must be converted exactly\.",),
             (r'need = CFG\["threshold"\] if CFG\["metric"\] else 1\.0',), when={"metric": False}),
        Rule("share_exact", (r"I need at least (?P<percent>\d+)% of the files converted exactly "
                             r"right",),
             (r'need = CFG\["threshold"\] if CFG\["metric"\] else 1\.0',), when={"metric": True}),
        Rule("inputs_untouched", (r"Leave the originals in `(?P<inbox>/app/\w+)/` as they are",),
             (r"def test_inputs_untouched\(", r'Path\("{inbox}", p\)\.read_bytes\(\)')),
        Rule("crlf", (r"CRLF line endings turned into LF",),
             (r'text = text\.replace\("\\r\\n", "\\n"\)',), levels=frozenset({2, 3, 4})),
        Rule("encodings_txt", (r"`(?P<report>/app/\w+/\w+\.txt)`: `PATH ENCODING`",),
             (r"assert paths == list\(SOURCES\)", r'read\("{report}"\)\.splitlines\(\)'),
             levels=frozenset({2, 3, 4})),
        Rule("eof_marker",
             (r"a final U\+001A character \(the old DOS end-of-file marker\) removed",),
             (r'if level >= 3 and text\.endswith\("\\x1a"\)',), levels=frozenset({3, 4})),
        Rule("manifest_tsv", (r"`(?P<out>/app/\w+)/manifest\.tsv`",),
             (r'read\("{out}/manifest\.tsv"\)',), levels=frozenset({4})),
        Rule("summary_json", (r"`(?P<out>/app/\w+)/summary\.json`",),
             (r'read\("{out}/summary\.json"\)',), levels=frozenset({4})),
        Rule("program",
             (r"given one file's path it writes the converted bytes to standard output\. Write it "
              r"in [^`]+ at `(?P<src>/app/\w+\.(?:py|sh))`",),
             (r"def test_converter_on_fresh_files\(", r"SRC = '{src}'"), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "detect legacy file encodings and convert them to UTF-8": "detect_legacy",
        "normalize Windows line endings to Unix style": "crlf",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        metric = ctx.verifier_kind == "metric_threshold"
        threshold = rng.choice(_EF_THRESHOLDS[level])
        count = {1: 6, 2: 10, 3: 14, 4: 18}[level]
        inbox = "/app/" + rng.choice(_EF_INBOXES)
        dest = "/app/" + rng.choice(_EF_DESTS)
        out = "/app/" + rng.choice(_EF_OUTS)
        report = f"{out}/{rng.choice(_EF_REPORTS)}"
        tool_name = rng.choice(_EF_PROGRAMS)
        opener = rng.choice(_EF_OPENERS)
        lead = rng.choice(_EF_LEADS)
        program_intro = rng.choice(_EF_PROGRAM_INTROS)
        stems = rng.sample(_EF_STEMS, 6)
        if level <= 2:
            folders = [""]
        else:
            senders = rng.sample(_EF_SENDERS, 3)
            year = rng.randint(2019, 2024)
            folders = [f"{senders[0]}/", f"{senders[1]}/", f"{senders[2]}/{year}/"]
        base = inbox.removeprefix("/app/")
        files: dict[str, str | bytes] = {}
        kinds = list(EF_KINDS) * 4
        rng.shuffle(kinds)
        for i in range(count):
            data, _kind = ef_file(rng, level, kinds[i])
            files[f"{base}/{rng.choice(folders)}{rng.choice(stems)}-{i:02d}.txt"] = data
        paths = sorted(rel.removeprefix(f"{base}/") for rel in files)
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        rules = [
            "a file starting with the bytes EF BB BF is UTF-8 with a BOM (`utf-8-bom`); FF FE "
            "is UTF-16 little-endian (`utf-16le`), FE FF UTF-16 big-endian (`utf-16be`), the BOM "
            "being part of neither the text nor the output",
            "otherwise, a file that is valid UTF-8 is UTF-8 (`utf-8`)",
            "otherwise, a file containing a byte from 0x80 to 0x9F is Windows-1252 "
            "(`windows-1252`), and anything else is ISO-8859-1 (`latin-1`)",
        ]
        cleanup = ["UTF-8 without a BOM"]
        if level >= 2:
            cleanup.append("CRLF line endings turned into LF")
        if level >= 3:
            cleanup.append(
                "a final U+001A character (the old DOS end-of-file marker) removed, if present"
            )
        tree = f"`{inbox}/` (with subfolders)" if level >= 3 else f"`{inbox}/`"
        goal = (
            f"I need at least {threshold:.0%} of the files converted exactly right."
            if metric
            else "Every file must be converted exactly."
        )
        body = [
            opener.format(tree=tree)
            + f" {lead}\n"
            + bullets(rules)
            + f"\n\nWrite each file, decoded accordingly, to the same relative path under "
            f"`{dest}/` as "
            + ", ".join(cleanup)
            + ". "
            + goal
            + f" Leave the originals in `{inbox}/` as they are."
        ]
        deliverables = []
        if level >= 2:
            deliverables.append(
                f"`{report}`: `PATH ENCODING` for every file (PATH relative to `{inbox}`, "
                "ENCODING one of the names above), sorted by path."
            )
        if level >= 4:
            deliverables.append(
                f"`{out}/manifest.tsv`: `PATH<TAB>ENCODING<TAB>LINES<TAB>SHA256` per file, "
                "sorted by path: LINES counts the newline characters of the converted file, "
                "SHA256 is the hex digest of the converted file."
            )
            deliverables.append(
                f"`{out}/summary.json`: `files`, `by_encoding` (encoding → number of files) "
                "and `bytes` (total size of the converted files)."
            )
        if deliverables:
            body.append("Also write:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, f"/app/{tool_name}")
            share = (
                f"at least {threshold:.0%} of them exactly right"
                if metric
                else "all of them exactly right"
            )
            body.append(
                f"{program_intro}: given one file's path it writes the converted bytes to "
                "standard output. "
                + program_sentence(language, program)
                + f" It will be tried on files you have not seen and must get {share}."
            )
        instruction = "\n\n".join(body)

        steps = [f"mkdir -p {dest} {out}"]
        if level >= 2:
            steps.append(f"find {inbox} -type f -exec file -b {{}} + | sort | uniq -c")
        if level >= 4:
            steps.append(f"find {inbox} -type f | wc -l")
        if language:
            source = {"python": _EF_PY, "bash": _EF_SH}[language]
            steps.append(program_step(language, program, source.replace("@LEVEL@", str(level))))
            tool = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/toutf8.sh", _EF_SH.replace("@LEVEL@", str(level))))
            tool = "bash /tmp/toutf8.sh"
        steps.append(
            f"cd {inbox} && find . -type f | sed 's|^\\./||' | LC_ALL=C sort > /tmp/files.txt"
        )
        steps.append(
            f'while IFS= read -r f; do mkdir -p "{dest}/$(dirname "$f")";'
            f' {tool} "{inbox}/$f" > "{dest}/$f"; done < /tmp/files.txt'
        )
        if level >= 2:
            steps.append(
                f'while IFS= read -r f; do echo "$f $({tool} --detect "{inbox}/$f")";'
                f" done < /tmp/files.txt > {report}"
            )
        if level >= 4:
            steps += [
                'while read -r f enc; do printf \'%s\\t%s\\t%s\\t%s\\n\' "$f" "$enc"'
                f' "$(tr -dc \'\\n\' < "{dest}/$f" | wc -c)"'
                f' "$(sha256sum < "{dest}/$f" | cut -d\' \' -f1)";'
                f" done < {report} > {out}/manifest.tsv",
                f"files=$(wc -l < {out}/manifest.tsv)",
                f"bytes=$(find {dest} -type f -exec cat {{}} + | wc -c)",
                'by=$(awk \'{n[$2]++} END {for (e in n) printf "%s\\"%s\\": %d",'
                f' (k++ ? ", " : ""), e, n[e]}}\' {report})',
                'printf \'{"files": %d, "by_encoding": {%s}, "bytes": %d}\\n\' "$files"'
                f' "$by" "$bytes" > {out}/summary.json',
                f"python3 -m json.tool {out}/summary.json",
            ]
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "hashes": hashes,
            "paths": paths,
            "code": language is not None,
            "metric": metric,
            "threshold": threshold,
            "fresh": {1: 8, 2: 12, 3: 16, 4: 20}[level],
        }
        # the tests are written for the default paths; the drawn ones replace them
        named = {
            "/app/inbox": inbox,
            "/app/utf8": dest,
            "/app/out/encodings.txt": report,
            "/app/out": out,
        }
        checks = _EF_TESTS
        for default, chosen in named.items():
            checks = checks.replace(default, chosen)
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + f"EF_WORDS = {EF_WORDS!r}\nEF_KINDS = {EF_KINDS!r}\n\n"
            + function_sources(ef_text, ef_file, ef_detect, ef_convert)
            + "\n\n"
            + settings_lines(params)
            + checks
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_EF_TESTS = '''
LEVEL = CFG["level"]
SOURCES = {p: Path("/app/inbox", p).read_bytes() for p in CFG["paths"]}


def score(pairs):
    """Share of (got, expected) pairs that are equal."""
    return sum(got == want for got, want in pairs) / len(pairs)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_converted_files():
    pairs = []
    for path, data in SOURCES.items():
        out = Path("/app/utf8", path)
        pairs.append((out.read_bytes() if out.is_file() else None, ef_convert(data, LEVEL)))
    share = score(pairs)
    print(f"metric: {share:.3f} of the files converted exactly")
    need = CFG["threshold"] if CFG["metric"] else 1.0
    wrong = [p for p, (g, w) in zip(SOURCES, pairs) if g != w]
    assert share >= need, f"converted exactly: {share:.2f} < {need:.2f}; wrong: {wrong[:6]}"


def test_encodings():
    if CFG["level"] >= 2:
        lines = read("/app/out/encodings.txt").splitlines()
        paths = [line.split(" ", 1)[0] for line in lines]
        assert paths == list(SOURCES), "encodings.txt must list every file once, sorted by path"
        pairs = [(line, f"{p} {ef_detect(d)}") for line, (p, d) in zip(lines, SOURCES.items())]
        share = score(pairs)
        print(f"metric: {share:.3f} of the encodings reported right")
        need = CFG["threshold"] if CFG["metric"] else 1.0
        assert share >= need, f"encodings right: {share:.2f} < {need:.2f}"


def test_manifest_and_summary():
    if CFG["level"] >= 4:
        reported = dict(line.split(" ", 1) for line in read("/app/out/encodings.txt").splitlines())
        rows, total, by = [], 0, {}
        for path in SOURCES:
            data = Path("/app/utf8", path).read_bytes()
            total += len(data)
            by[reported[path]] = by.get(reported[path], 0) + 1
            digest, lines = hashlib.sha256(data).hexdigest(), data.count(b"\\n")
            rows.append(f"{path}\\t{reported[path]}\\t{lines}\\t{digest}\\n")
        assert read("/app/out/manifest.tsv") == "".join(rows), "manifest.tsv is wrong"
        data = json.loads(read("/app/out/summary.json"))
        want = {"files": len(SOURCES), "by_encoding": by, "bytes": total}
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_converter_on_fresh_files(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(1252)
    pairs = []
    for i in range(CFG["fresh"]):
        data, _kind = ef_file(rng, LEVEL, EF_KINDS[i % len(EF_KINDS)])
        path = tmp_path / f"drop{i}.txt"
        path.write_bytes(data)
        done = subprocess.run(program() + [str(path)], capture_output=True, timeout=60)
        pairs.append((done.stdout if done.returncode == 0 else None, ef_convert(data, LEVEL)))
    share = score(pairs)
    print(f"metric: the converter got {share:.3f} of fresh files exactly right")
    need = CFG["threshold"] if CFG["metric"] else 1.0
    assert share >= need, f"fresh files converted exactly: {share:.2f} < {need:.2f}"
'''
