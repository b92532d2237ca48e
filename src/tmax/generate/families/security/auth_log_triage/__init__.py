"""The security.auth_log_triage family: failed SSH logins from auth logs (counts,
invalid users, a blocklist, compromised accounts, a service answering them). The task's files are
the templates beside this module (``instruction.md``, ``solution/solve.sh``,
``tests/test_task.py``); the reference program is ``solution/failed_by_ip.{py,sh}`` and
the service ``solution/ssh_triage_server.py``, and the functions below are pasted into
them and into the tests."""

from __future__ import annotations

import gzip
import re
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    ANSWER_SERVER_FRAME,
    asked_program_language,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    program_path,
    program_sentence,
    program_step,
    service_ports,
    settings_lines,
    sha256_hex,
    start_python_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode(), compresslevel=6, mtime=0)


def auth_pool(rng, attackers, internal):
    """Source addresses and account names for a set of auth logs."""
    firsts = [45, 61, 89, 103, 185, 193, 203, 218]
    hostile = set()
    while len(hostile) < attackers:
        a, b = rng.choice(firsts), rng.randint(1, 254)
        hostile.add(f"{a}.{b}.{rng.randint(0, 255)}.{rng.randint(1, 254)}")
    friendly = set()
    while len(friendly) < internal:
        if rng.random() < 0.6:
            friendly.add(f"10.{rng.randint(0, 3)}.{rng.randint(0, 9)}.{rng.randint(2, 250)}")
        else:
            friendly.add(f"192.168.{rng.choice([1, 10, 50])}.{rng.randint(2, 250)}")
    return {
        "host": rng.choice(["web01", "bastion", "db-02", "vpn-gw", "build7"]),
        "hostile": sorted(hostile),
        "friendly": sorted(friendly),
        "valid": ["root", "alice", "bob", "deploy", "ubuntu", "carol", "backup"],
        "invalid": ["admin", "test", "oracle", "guest", "pi", "user1", "ftpuser", "postgres"],
    }


def auth_log(rng, pool, lines, day, repeats):
    """One syslog auth.log: sshd failures, successes and unrelated noise."""
    host, hostile, friendly = pool["host"], pool["hostile"], pool["friendly"]
    weights = [max(1, 12 - 2 * i) for i in range(len(hostile))]
    kinds = ["fail", "invalid", "repeat", "ok", "ok_hostile", "closed", "cron", "sudo", "pam"]
    kind_weights = [30, 18, 8 if repeats else 0, 12, 2, 8, 8, 2, 5]
    seconds = rng.randint(0, 3600)
    out = []
    while len(out) < lines:
        seconds += rng.randint(1, 97)
        h, m, s = (seconds // 3600) % 24, (seconds // 60) % 60, seconds % 60
        stamp = f"Mar {day:2d} {h:02d}:{m:02d}:{s:02d} {host}"
        pid = rng.randint(900, 65000)
        port = rng.randint(1024, 65535)
        attacker = rng.choices(hostile, weights)[0]
        kind = rng.choices(kinds, kind_weights)[0]
        sshd = f"{stamp} sshd[{pid}]:"
        if kind == "fail":
            user = rng.choice(pool["valid"])
            out.append(f"{sshd} Failed password for {user} from {attacker} port {port} ssh2")
        elif kind == "invalid":
            user = rng.choice(pool["invalid"])
            out.append(f"{sshd} Invalid user {user} from {attacker} port {port}")
            out.append(
                f"{sshd} Failed password for invalid user {user} from {attacker} port {port} ssh2"
            )
        elif kind == "repeat":
            user = rng.choice(pool["valid"][:3])
            count = rng.randint(2, 6)
            out.append(
                f"{sshd} message repeated {count} times: [ Failed password for {user} "
                f"from {attacker} port {port} ssh2]"
            )
        elif kind in ("ok", "ok_hostile"):
            source = attacker if kind == "ok_hostile" else rng.choice(friendly)
            user = rng.choice(pool["valid"])
            method = rng.choice(["password", "publickey"])
            tail = (
                " ssh2"
                if method == "password"
                else " ssh2: ED25519 SHA256:"
                + "".join(
                    rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij0123456789") for _ in range(16)
                )
            )
            out.append(f"{sshd} Accepted {method} for {user} from {source} port {port}{tail}")
        elif kind == "closed":
            out.append(f"{sshd} Connection closed by {attacker} port {port} [preauth]")
        elif kind == "cron":
            out.append(
                f"{stamp} CRON[{pid}]: pam_unix(cron:session): session opened for user root"
                " by (uid=0)"
            )
        elif kind == "sudo":
            out.append(
                f"{stamp} sudo: alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND="
                f"/usr/bin/grep Failed password for root from {attacker} /var/log/auth.log"
            )
        else:
            out.append(
                f"{sshd} pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0"
                f" tty=ssh ruser= rhost={attacker}  user=root"
            )
    return "\n".join(out) + "\n"


def auth_events(text):
    """(kind, user, ip, count) for every sshd event that matters, in log order."""
    events = []
    line_re = re.compile(r"^\w{3} +\d+ \d\d:\d\d:\d\d \S+ sshd\[\d+\]: (.*)$")
    for line in text.splitlines():
        match = line_re.match(line)
        if not match:
            continue
        message, count = match.group(1), 1
        repeated = re.match(r"message repeated (\d+) times: \[ (.*)\]$", message)
        if repeated:
            count, message = int(repeated.group(1)), repeated.group(2)
        failed = re.match(r"Failed password for (invalid user )?(\S+) from (\S+) port ", message)
        if failed:
            kind = "invalid" if failed.group(1) else "failed"
            events.append((kind, failed.group(2), failed.group(3), count))
            continue
        invalid = re.match(r"Invalid user (\S+) from (\S+) port ", message)
        if invalid:
            events.append(("probe", invalid.group(1), invalid.group(2), 0))
            continue
        accepted = re.match(r"Accepted (password|publickey) for (\S+) from (\S+) port ", message)
        if accepted:
            events.append(("accepted", accepted.group(2), accepted.group(3), 0))
    return events


def auth_failed(events):
    counts = {}
    for kind, _user, ip, count in events:
        if kind in ("failed", "invalid"):
            counts[ip] = counts.get(ip, 0) + count
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def auth_table(events):
    return "".join(f"{ip} {count}\n" for ip, count in auth_failed(events))


def auth_invalid_users(events):
    return sorted({user for kind, user, _ip, _n in events if kind in ("invalid", "probe")})


def auth_allowed(ip, networks):
    for network in networks:
        base, bits = network.split("/")
        keep = int(bits) // 8
        if ip.split(".")[:keep] == base.split(".")[:keep]:
            return True
    return False


def auth_blocklist(events, threshold, networks):
    return sorted(
        ip
        for ip, count in auth_failed(events)
        if count >= threshold and not auth_allowed(ip, networks)
    )


def auth_compromised(events, threshold):
    seen, found = {}, set()
    for kind, user, ip, count in events:
        if kind in ("failed", "invalid"):
            seen[ip] = seen.get(ip, 0) + count
        elif kind == "accepted" and seen.get(ip, 0) >= threshold:
            found.add(f"{user} {ip}")
    return sorted(found)


_AUTH_ALL = function_sources(
    auth_pool,
    auth_log,
    auth_events,
    auth_failed,
    auth_table,
    auth_invalid_users,
    auth_allowed,
    auth_blocklist,
    auth_compromised,
)


def _program(tpl, language: str) -> str:
    """The reference failed_by_ip program ``solution/failed_by_ip.<extension>``."""
    if language == "python":
        core = function_sources(auth_events, auth_failed, auth_table)
        return tpl.render("solution/failed_by_ip.py", core=core)
    return tpl.render("solution/failed_by_ip.sh")


@register
class AuthLogTriage(Family):
    """Triage SSH brute force in auth logs: failed attempts per source address; levels add
    syslog repeat lines, rotated/gzipped logs, invalid users, a blocklist with an allowlist,
    compromise detection and a JSON summary. Code asks for a reusable triage program run on
    fresh logs; services serve per-address verdicts over TCP (plus HTTP for multi_protocol)."""

    name = "security.auth_log_triage"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence", "multi_protocol"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("inputs_untouched", (r"Leave the input files unchanged\.",),
             (r"def test_inputs_untouched\(",)),
        Rule("failed_attempts", (r"A failed attempt is an sshd `Failed password for \.\.\.` line",),
             (r'failed = re\.match\(r"Failed password for \(invalid user \)\?',
              r"def test_failed_by_ip\(")),
        Rule("failed_by_ip", (r"`/app/report/failed_by_ip\.txt`: one line `IP COUNT`",),
             (r'read\("/app/report/failed_by_ip\.txt"\) == auth_table\(EVENTS\)',)),
        Rule("repeated_lines", (r"such a line counts as N attempts",),
             (r'repeated = re\.match\(r"message repeated',), levels=frozenset({2, 3, 4})),
        Rule("rotated_logs", (r"`auth\.log\.2\.gz` \(oldest, gzipped\)",),
             (r'text \+= gzip\.decompress\(',), levels=frozenset({3, 4})),
        Rule("invalid_users", (r"`/app/report/invalid_users\.txt`",),
             (r'read\("/app/report/invalid_users\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("blocklist", (r"`/app/report/blocklist\.txt`: the addresses with at least \d+",),
             (r'read\("/app/report/blocklist\.txt"\)',), levels=frozenset({2, 3, 4})),
        Rule("allowlist", (r"trusted networks in `/app/config/allowlist\.txt`",),
             (r"if count >= threshold and not auth_allowed\(ip, networks\)",),
             levels=frozenset({4})),
        Rule("compromised", (r"`/app/report/compromised\.txt`",),
             (r'read\("/app/report/compromised\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/report/summary\.json`",),
             (r'read\("/app/report/summary\.json"\)',), levels=frozenset({4})),
        Rule("program", (r"a program that takes log file paths as arguments",),
             (r"def test_program_on_fresh_logs\(",), when={"code": True}),
        Rule("program_gz", (r"\(a name ending in `\.gz` is gzip-compressed\)",),
             (r'path = tmp_path / f"c\{{case\}}_\{{i\}}\.log\.gz"',), levels=frozenset({3, 4}),
             when={"code": True}),
        Rule("service", (r"listens on 127\.0\.0\.1 port \d+ and answers",),
             (r"def test_service\(",), when={"serve": True}),
        Rule("service_blocked", (r"`BLOCKED <ip>`",), (r'requests \+= \[f"BLOCKED \{{ip\}}"',),
             levels=frozenset({2, 3, 4}), when={"serve": True}),
        Rule("service_http", (r"served over HTTP on 127\.0\.0\.1 port \d+: `GET /ip/<ip>`",),
             (r'http_get\(CFG\["ports"\]\[1\], "/ip/" \+ ip\)', r'assert data\.get\("ip"\) == ip'),
             when={"http": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "extract failed login attempts from auth.log files": "failed_attempts"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        serve = ctx.needs_service or ctx.verifier_kind == "multi_protocol"
        use_http = ctx.verifier_kind == "multi_protocol"
        threshold = rng.choice([5, 6, 8, 10])
        pool = auth_pool(rng, 4 + 2 * level, 3 + level)
        networks: list[str] = []
        if level >= 4:
            partner = pool["hostile"][rng.randrange(2)]
            networks = [
                "10.0.0.0/8",
                "192.168.10.0/24",
                ".".join(partner.split(".")[:2]) + ".0.0/16",
            ]
        lines = {1: 70, 2: 120, 3: 110, 4: 150}[level]
        day = rng.randint(3, 20)
        names = ["auth.log.2.gz", "auth.log.1", "auth.log"] if level >= 3 else ["auth.log"]
        texts = [auth_log(rng, pool, lines, day + i, level >= 2) for i in range(len(names))]
        files: dict[str, str | bytes] = {}
        for name, text in zip(names, texts, strict=True):
            files[f"logs/{name}"] = _gz(text) if name.endswith(".gz") else text
        if networks:
            files["config/allowlist.txt"] = (
                "# trusted networks (CIDR); never block these\n" + "\n".join(networks) + "\n"
            )
        paths = [f"/app/logs/{name}" for name in names]
        hashes = {f"/app/{rel}": sha256_hex(data) for rel, data in files.items()}

        program = None
        if language:
            program = program_path(language, "/app/triage")
        ports = service_ports(ctx)
        values = {"level": level, "threshold": threshold}
        tpl = templates(__name__)
        instruction = tpl.render(
            "instruction.md",
            code=language is not None,
            serve=serve,
            http=use_http,
            ports=ports,
            program_sentence=program_sentence(language, program) if language else "",
            **values,
        )

        # ---- reference solution ------------------------------------------------------
        if language:
            program_step_ = program_step(language, program, _program(tpl, language))
            tool = invoke(language, program)
        else:
            program_step_ = heredoc("/tmp/failed_by_ip.sh", _program(tpl, "bash"))
            tool = "bash /tmp/failed_by_ip.sh"
        server_step = start = ""
        if serve:
            server = tpl.render(
                "solution/ssh_triage_server.py",
                sources=_AUTH_ALL,
                threshold=threshold if level >= 2 else 0,
                level=level,
                networks=networks,
                logs=paths,
                ports=ports if use_http else (ports[0], None),
                frame=ANSWER_SERVER_FRAME,
            )
            server_step = heredoc("/app/ssh_triage_server.py", server)
            start = start_python_service("/app/ssh_triage_server.py", ports[: 1 + use_http])
        solution = tpl.render(
            "solution/solve.sh",
            program_step=program_step_,
            tool=tool,
            logs=" ".join(paths),
            serve=serve,
            server_step=server_step,
            start=start,
            **values,
        )

        # ---- tests ----------------------------------------------------------------------
        params = {
            "level": level,
            "threshold": threshold,
            "networks": networks,
            "paths": paths,
            "hashes": hashes,
            "ports": list(ports),
            "code": language is not None,
            "serve": serve,
            "http": use_http,
            "fuzz_cases": {1: 4, 2: 6, 3: 8, 4: 10}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = tpl.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            sources=_AUTH_ALL,
            settings=settings_lines(params),
        )
        return Draft(
            instruction=instruction,
            solution=solution,
            tests={"test_task.py": tests},
            files=files,
            keep_agent_processes=serve,
        )
