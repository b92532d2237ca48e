"""Task families of the system_administration domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    bullets,
    heredoc,
    language_or_bash,
    manifest_line,
    manifest_test_file,
    program_path,
)

# the families register in the order of their classes in the module they came from
# isort: off
from tmax.generate.families.system_administration.auth_failures import AuthFailures  # noqa: F401
from tmax.generate.families.system_administration.health_service import HealthService  # noqa: F401
from tmax.generate.families.system_administration.cron_lint import CronLint  # noqa: F401

# isort: on
from tmax.generate.family import Draft, Family, RenderContext, register

# --- backup_rotation ---------------------------------------------------------------------

_ROTATE_ORACLE = r'''
import re


def to_delete(names, keep, level):
    """Backups to delete from a directory listing, sorted by name."""
    backups = sorted((n for n in names if re.fullmatch(r"db-[0-9]{8}\.tar\.gz", n)),
                     reverse=True)
    kept = set(backups[:keep])
    if level >= 2:
        months = set()
        for name in backups:
            if name[3:9] not in months:
                months.add(name[3:9])
                kept.add(name)
    return sorted(n for n in backups if n not in kept)
'''

_ROTATE_PY = r"""
import os
import sys

KEEP, LEVEL = @KEEP@, @LEVEL@

if __name__ == "__main__":
    for name in to_delete(os.listdir(sys.argv[1]), KEEP, LEVEL):
        print(name)
"""

_ROTATE_BASH = r"""
#!/bin/bash
# Usage: rotate.sh DIR -> names of backups to delete (sorted), nothing is removed
set -euo pipefail
ls -A "$1" | LC_ALL=C grep -E '^db-[0-9]{8}\.tar\.gz$' | LC_ALL=C sort -r \
  | awk -v keep=@KEEP@ -v L=@LEVEL@ '{ m = substr($0, 4, 6); k = (NR <= keep)
      if (L >= 2 && !(m in seen)) { seen[m] = 1; k = 1 }
      if (!k) print }' | LC_ALL=C sort
"""

_ROTATE_TESTS = r"""

def test_rotation_applied():
    deleted_all, kept_all = [], []
    for host, files in sorted(CFG["dirs"].items()):
        names = sorted(files)
        gone = to_delete(names, CFG["keep"], CFG["level"])
        stay = sorted(set(names) - set(gone))
        path = "/app/backups/" + host
        assert os.path.isdir(path), f"{path} is gone"
        now = sorted(n for n in os.listdir(path) if n != "LATEST")
        assert now == stay, f"{path} should hold {stay}, holds {now}"
        deleted_all += [f"{host}/{n}" for n in gone]
        kept_all += [f"{host}/{n}" for n in stay if n.startswith("db-")]
        if CFG["level"] >= 4:
            newest = max(n for n in stay if n.startswith("db-"))
            assert read(path + "/LATEST").strip() == newest, f"{path}/LATEST should be {newest}"
    got = [l for l in read("/app/out/deleted.txt").split("\n") if l]
    assert got == sorted(deleted_all), f"deleted.txt should be {sorted(deleted_all)}, got {got}"
    if CFG["level"] >= 3:
        got = [l for l in read("/app/out/kept.txt").split("\n") if l]
        assert got == sorted(kept_all), f"kept.txt should be {sorted(kept_all)}, got {got}"
    if CFG["level"] >= 4:
        freed = sum(CFG["dirs"][d.split("/")[0]][d.split("/")[1]] for d in deleted_all)
        summary = json.loads(read("/app/out/summary.json"))
        want = {"deleted": len(deleted_all), "kept": len(kept_all), "freed_bytes": freed}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", ["/app/out/deleted.txt", "/app/out/kept.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(99)
    for i in range(CFG["fresh"]):
        folder = workdir()
        names = set()
        for _ in range(rng.randint(0, 30)):
            names.add("db-%04d%02d%02d.tar.gz" % (rng.choice([2023, 2024]), rng.randint(1, 12),
                                                   rng.randint(1, 28)))
        names |= set(rng.sample(["notes.txt", "db-latest.tar.gz", "db-2024.tar.gz",
                                 "db-20240101.tar.gz.part", "xdb-20240101.tar.gz"], 2))
        for name in names:
            open(os.path.join(folder, name), "w").close()
        want = to_delete(sorted(names), CFG["keep"], CFG["level"])
        got = [l for l in run_program([folder]).stdout.split("\n") if l]
        assert got == want, f"fresh dir {sorted(names)}: expected {want}, got {got}"
        assert sorted(os.listdir(folder)) == sorted(names), "the program must not delete files"
"""


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
        files: dict[str, str | bytes] = {}
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
                files[f"backups/{host}/{name}"] = content
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
        policy = [
            f"backups are the files named `db-YYYYMMDD.tar.gz`; keep the newest {keep} "
            "(by the date in the name)"
        ]
        if level >= 2:
            policy.append("also keep the newest backup of every calendar month present")
        if level >= 3:
            policy.append(
                "each host directory under /app/backups is rotated on its own; files "
                "that are not backups are never touched"
            )
        policy.append("delete every other backup")
        asks = [
            "apply the policy (really delete the files)",
            "`/app/out/deleted.txt`: `HOST/FILE` for each deleted backup, sorted",
        ]
        if level >= 3:
            asks.append("`/app/out/kept.txt`: `HOST/FILE` for each remaining backup, sorted")
        if level >= 4:
            asks.append("`/app/backups/HOST/LATEST`: the file name of that host's newest backup")
            asks.append(
                '`/app/out/summary.json`: `{"deleted": D, "kept": K, "freed_bytes": B}` '
                "(B = total size of what you deleted)"
            )
            asks.append("`/app/out/checksums.sha256`: sha256sum lines for deleted.txt and kept.txt")
        where = "/app/backups/db01" if level < 3 else "/app/backups/*/"
        body = (
            f"The backup disk is filling up. Nightly dumps live in {where}. Retention "
            "policy:\n\n" + bullets(policy) + "\n\nPlease:\n\n" + bullets(asks)
        )
        if code:
            body += (
                f"\n\nPut the policy in a reusable {LANGUAGE_NAMES[lang]} program at "
                f"`{prog}`: given one directory it prints the names of the backups the "
                "policy deletes, sorted, one per line, and deletes nothing itself."
            )
        source = {"python": _ROTATE_ORACLE + _ROTATE_PY, "bash": _ROTATE_BASH}[lang]
        source = source.replace("@KEEP@", str(keep)).replace("@LEVEL@", str(level))
        tool = prog if code else "/tmp/rotate.sh"
        run = f"python3 {tool}" if lang == "python" else f"bash {tool}"
        lines = ["mkdir -p /app/out", heredoc(tool, source), ": > /app/out/deleted.txt"]
        if level >= 4:
            lines.append("freed=0")
        for host in hosts:
            lines.append(f"{run} /app/backups/{host} > /tmp/{host}.del")
            lines.append(f"sed 's|^|{host}/|' /tmp/{host}.del >> /app/out/deleted.txt")
            if level >= 4:
                lines.append(
                    f"freed=$((freed + $(cd /app/backups/{host} && cat /tmp/{host}.del "
                    "| xargs -r stat -c %s | awk '{s += $1} END {print s + 0}')))"
                )
            lines.append(f"(cd /app/backups/{host} && xargs -r rm -f -- < /tmp/{host}.del)")
        lines.append("LC_ALL=C sort -o /app/out/deleted.txt /app/out/deleted.txt")
        if level >= 3:
            lines.append(
                "(cd /app/backups && ls -1 */db-*.tar.gz | LC_ALL=C grep -E "
                "'/db-[0-9]{8}\\.tar\\.gz$' | LC_ALL=C sort) > /app/out/kept.txt"
            )
        if level >= 4:
            for host in hosts:
                lines.append(
                    f"ls /app/backups/{host} | grep -E '^db-[0-9]{{8}}\\.tar\\.gz$' | "
                    f"sort | tail -n 1 > /app/backups/{host}/LATEST"
                )
            lines.append("deleted=$(grep -c . /app/out/deleted.txt || true)")
            lines.append("kept=$(grep -c . /app/out/kept.txt || true)")
            lines.append(
                'printf \'{"deleted": %d, "kept": %d, "freed_bytes": %d}\\n\' '
                '"$deleted" "$kept" "$freed" > /app/out/summary.json'
            )
            lines.append(manifest_line(["deleted.txt", "kept.txt"]))
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": manifest_test_file(cfg, "", _ROTATE_ORACLE + _ROTATE_TESTS)},
            files=files,
        )
