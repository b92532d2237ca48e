"""Rank SSH brute-force sources from auth logs (the task's files are the templates beside
this module; the reference ranking in Python, Bash or C is ``solution/failures.*``, the
oracle the tests and the Python program share is ``tests/oracle.py``)."""

from __future__ import annotations

import gzip

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    language_or_bash,
    manifest_test_file,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference ranking of each language: ``solution/failures.<extension>``."""


def _auth_log(rng, lines: int, ips: list[str], users: list[str]) -> str:
    out = []
    minute = rng.randint(0, 50)
    for i in range(lines):
        ip, user, pid = rng.choice(ips), rng.choice(users), rng.randint(1000, 65000)
        kind = rng.random()
        if kind < 0.55:
            inv = "invalid user " if user in ("admin", "test", "oracle") else ""
            msg = (
                f"sshd[{pid}]: Failed password for {inv}{user} from {ip} port "
                f"{rng.randint(1024, 65535)} ssh2"
            )
        elif kind < 0.7:
            msg = f"sshd[{pid}]: Accepted publickey for {user} from {ip} port 22 ssh2"
        elif kind < 0.85:
            msg = f"sshd[{pid}]: Disconnected from authenticating user {user} {ip} port 22"
        else:
            msg = f"CRON[{pid}]: pam_unix(cron:session): session closed for user root"
        stamp = (
            f"Jun {10 + i // 40:2d} {8 + (minute + i) // 60 % 12:02d}:{(minute + i) % 60:02d}:07"
        )
        out.append(f"{stamp} bastion {msg}")
    return "\n".join(out) + "\n"


@register
class AuthFailures(Family):
    """Rank SSH brute-force sources from auth logs (users, blocklists, rotated/gzipped logs by
    level); code asks for a reusable ranking program checked on random logs."""

    name = "system_administration.auth_failures"
    domain = "system_administration"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("failures_by_ip", (r"`/app/out/failures\.txt`: for .+ lines `COUNT IP`",),
             (r'read\("/app/out/failures\.txt"\)',)),
        Rule("gzipped_logs", (r"\(current, rotated and gzipped\)",), (r"gzip\.open\(path",),
             levels=frozenset({4})),
        Rule("users", (r"`/app/out/users\.txt`: the same `COUNT USER` ranking",),
             (r'read\("/app/out/users\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("blocklist", (r"`/app/out/blocklist\.txt`: IPs with at least \d+ failures",),
             (r'read\("/app/out/blocklist\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/failures",),
             (r"def test_program_fresh\(",), when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        ips = [
            f"{rng.choice([45, 103, 185, 10])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}."
            f"{rng.randint(1, 254)}"
            for _ in range(3 + 2 * level)
        ]
        users = rng.sample(["root", "admin", "deploy", "alice", "test", "oracle", "backup"], 4)
        app_files: dict[str, str | bytes] = {}
        logs = ["/app/logs/auth.log"]
        app_files["logs/auth.log"] = _auth_log(rng, 15 + 10 * level, ips, users)
        if level >= 2:
            app_files["logs/auth.log.1"] = _auth_log(rng, 20 + 5 * level, ips, users)
            logs.append("/app/logs/auth.log.1")
        if level >= 4:
            text = _auth_log(rng, 30, ips, users)
            app_files["logs/auth.log.2.gz"] = gzip.compress(text.encode(), mtime=0)
            logs.append("/app/logs/auth.log.2.gz")
        limit = rng.choice([3, 4, 5])
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/failures")
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "logs": logs,
            "limit": limit,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": 3 if ctx.verifier_kind == "exact_text" else 5 * level + 5,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/failures.sh"
        values = {
            "level": level,
            "limit": limit,
            "code": code,
            "lang": lang,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "logs": logs,
            "plain": " ".join(
                "/tmp/logs/auth.log.2" if log.endswith(".gz") else log for log in logs
            ),
            "tool": tool,
            "run": {"python": f"python3 {tool}", "bash": f"bash {tool}"}.get(lang, "/tmp/failures"),
            "source": files.render(f"solution/failures.{_EXTENSIONS[lang]}", oracle=oracle).strip(),
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
