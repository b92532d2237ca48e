"""Task families of the security domain.

Each family renders a realistic security chore (log triage, upload-name filtering,
probing an obfuscating binary, auditing password hashes) whose checks are recomputed by
the tests. Shared pieces: reference code is written once as plain functions here and
pasted (:func:`tmax.generate.builders.function_sources`) into the tests and the Python
reference programs, so the generator, the oracle and the checks cannot drift apart.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import ALL_LEVELS, Rule
from tmax.generate.builders import (
    ANSWER_SERVER_FRAME,
    asked_program_language,
    build_step,
    bullets,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    service_ports,
    settings_lines,
    sha256_hex,
    start_python_service,
)
from tmax.generate.family import Draft, Family, RenderContext, register


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode(), compresslevel=6, mtime=0)


# =====================================================================================
# security.auth_log_triage
# =====================================================================================


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


_AUTH_CORE = function_sources(auth_events, auth_failed, auth_table)
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

_AUTH_PY = (
    """#!/usr/bin/env python3
\"\"\"Failed SSH password attempts per source address, from auth logs (plain or .gz).\"\"\"
import gzip
import re
import sys

"""
    + _AUTH_CORE
    + """


def main():
    text = ""
    for path in sys.argv[1:]:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            text += handle.read()
    sys.stdout.write(auth_table(auth_events(text)))


if __name__ == "__main__":
    main()
"""
)

_AUTH_AWK_PREFIX = r"""$5 ~ /^sshd\[[0-9]+\]:$/ {
  b = 6; n = 1
  if ($6 == "message" && $7 == "repeated" && $9 == "times:" && $10 == "[") { n = $8; b = 11 }"""

_AUTH_SH = (
    r"""#!/bin/bash
# Failed SSH password attempts per source address, from auth logs (plain or .gz).
set -euo pipefail
for log in "$@"; do
  case "$log" in
    *.gz) gzip -dc -- "$log" ;;
    *) cat -- "$log" ;;
  esac
done | awk '"""
    + _AUTH_AWK_PREFIX
    + r"""
  if ($b == "Failed" && $(b + 1) == "password" && $(b + 2) == "for") {
    u = b + 3
    if ($u == "invalid" && $(u + 1) == "user") u += 2
    if ($(u + 1) == "from") count[$(u + 2)] += n
  }
}
END { for (ip in count) print ip, count[ip] }' | LC_ALL=C sort -k2,2nr -k1,1
"""
)


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

        # ---- the request -------------------------------------------------------------
        if len(names) == 1:
            where = "The SSH server's log is `/app/logs/auth.log`."
        else:
            where = (
                "The SSH server's logs are in `/app/logs/`: `auth.log.2.gz` (oldest, gzipped), "
                "`auth.log.1`, then `auth.log` (newest)."
            )
        rules = [
            "A failed attempt is an sshd `Failed password for ...` line (for valid or invalid "
            "users); nothing else counts, not even lines from other programs that merely "
            "mention those words.",
        ]
        if level >= 2:
            rules.append(
                "syslog folds repeats into `message repeated N times: [ ... ]`; such a line "
                "counts as N attempts."
            )
        deliverables = [
            "`/app/report/failed_by_ip.txt`: one line `IP COUNT` per source address with at "
            "least one failed attempt, sorted by COUNT descending, ties by IP in plain byte "
            "order.",
        ]
        if level >= 2:
            deliverables.append(
                "`/app/report/invalid_users.txt`: every distinct account name tried that does "
                "not exist on the box (sshd reports them as `Invalid user NAME` or `... for "
                "invalid user NAME ...`), one per line, byte-order sorted."
            )
            allow = ""
            if networks:
                allow = (
                    " Never list an address inside one of the trusted networks in "
                    "`/app/config/allowlist.txt` (CIDR, `#` starts a comment)."
                )
            deliverables.append(
                f"`/app/report/blocklist.txt`: the addresses with at least {threshold} failed "
                f"attempts, one per line, byte-order sorted.{allow}"
            )
        if level >= 3:
            deliverables.append(
                "`/app/report/compromised.txt`: one line `USER IP` (unique, byte-order sorted) "
                "for every accepted login (password or publickey) from an address that already "
                f"had at least {threshold} failed attempts earlier in the logs, reading them in "
                "chronological order."
            )
        if level >= 4:
            deliverables.append(
                "`/app/report/summary.json`: an object with `total_failed` (all failed attempts), "
                "`unique_ips` (lines in failed_by_ip.txt), `blocked` (lines in blocklist.txt), "
                "`top_ip` (the first address of failed_by_ip.txt) and `compromised_users` (the "
                "sorted distinct users of compromised.txt)."
            )
        body = [
            "We think someone has been brute-forcing SSH on one of our servers. "
            + where
            + " Leave the input files unchanged.",
            "Rules:\n" + bullets(rules),
            "Please produce:\n" + numbered(deliverables),
        ]
        program = None
        if language:
            program = program_path(language, "/app/triage")
            gz = " (a name ending in `.gz` is gzip-compressed)" if level >= 3 else ""
            body.append(
                "I also want a reusable tool for the next incident: a program that takes log "
                f"file paths as arguments{gz}, oldest first, and prints the failed_by_ip table "
                "(exactly the format above) to standard output. "
                + program_sentence(language, program)
                + " I'll run it on other servers' logs, so don't hard-code anything."
            )
        ports = service_ports(ctx)
        if serve:
            requests = [
                "`FAILED <ip>` → the number of failed attempts from that address (0 if none)"
            ]
            if level >= 2:
                requests.append(
                    "`BLOCKED <ip>` → `yes` if the address is in the blocklist, else `no`"
                )
            text = (
                "Finally, the firewall team wants to query the results live: leave a service "
                f"running that listens on 127.0.0.1 port {ports[0]} and answers newline-terminated "
                "request lines (several per connection) with one reply line each:\n"
                + bullets(requests)
            )
            if use_http:
                blocked = ', "blocked": true|false' if level >= 2 else ""
                text += (
                    f"\n\nThe same data must be served over HTTP on 127.0.0.1 port {ports[1]}: "
                    f'`GET /ip/<ip>` returns JSON `{{"ip": "<ip>", "failed": N{blocked}}}`.'
                )
            body.append(text)
        instruction = "\n\n".join(body)

        # ---- reference solution ------------------------------------------------------
        steps = ["mkdir -p /app/report"]
        if language:
            source = _AUTH_PY if language == "python" else _AUTH_SH
            steps.append(program_step(language, program, source))
            tool = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/failed_by_ip.sh", _AUTH_SH))
            tool = "bash /tmp/failed_by_ip.sh"
        joined = " ".join(paths)
        steps.append(f"{tool} {joined} > /app/report/failed_by_ip.txt")
        if level >= 3:
            steps.append("gzip -dc /app/logs/auth.log.2.gz > /tmp/all.log")
            steps.append("cat /app/logs/auth.log.1 /app/logs/auth.log >> /tmp/all.log")
        else:
            steps.append("cp /app/logs/auth.log /tmp/all.log")
        if level >= 2:
            steps.append(
                "awk '"
                + _AUTH_AWK_PREFIX
                + r"""
  if ($b == "Invalid" && $(b + 1) == "user") print $(b + 2)
  if ($b == "Failed" && $(b + 3) == "invalid" && $(b + 4) == "user") print $(b + 5)
}' /tmp/all.log | LC_ALL=C sort -u > /app/report/invalid_users.txt"""
            )
            if networks:
                steps.append(
                    "grep -v '^#' /app/config/allowlist.txt | grep . > /tmp/allow.txt || true"
                )
            else:
                steps.append(": > /tmp/allow.txt")
            steps.append(
                "awk -v t="
                + str(threshold)
                + r""" 'FILENAME == ARGV[1] {
  split($1, net, "/"); split(net[1], o, "."); k = net[2] / 8; p = ""
  for (i = 1; i <= k; i++) p = p o[i] "."
  pre[++np] = p; next
}
{ if ($2 < t) next; for (i = 1; i <= np; i++) if (index($1 ".", pre[i]) == 1) next; print $1 }
' /tmp/allow.txt /app/report/failed_by_ip.txt | LC_ALL=C sort > /app/report/blocklist.txt"""
            )
        if level >= 3:
            steps.append(
                "awk -v t="
                + str(threshold)
                + " '"
                + _AUTH_AWK_PREFIX
                + r"""
  if ($b == "Failed" && $(b + 1) == "password" && $(b + 2) == "for") {
    u = b + 3; if ($u == "invalid" && $(u + 1) == "user") u += 2
    if ($(u + 1) == "from") seen[$(u + 2)] += n
  }
  if ($b == "Accepted" && $(b + 2) == "for" && $(b + 4) == "from" && seen[$(b + 5)] >= t)
    print $(b + 3), $(b + 5)
}' /tmp/all.log | LC_ALL=C sort -u > /app/report/compromised.txt"""
            )
        if level >= 4:
            steps += [
                "total=$(awk '{s += $2} END {print s + 0}' /app/report/failed_by_ip.txt)",
                "ips=$(wc -l < /app/report/failed_by_ip.txt)",
                "blocked=$(wc -l < /app/report/blocklist.txt)",
                "top=$(head -n 1 /app/report/failed_by_ip.txt | cut -d' ' -f1)",
                "users=$(cut -d' ' -f1 /app/report/compromised.txt | LC_ALL=C sort -u"
                ' | awk \'{printf "%s\\"%s\\"", (NR > 1 ? ", " : ""), $0}\')',
                'printf \'{"total_failed": %d, "unique_ips": %d, "blocked": %d, '
                '"top_ip": "%s", "compromised_users": [%s]}\\n\' '
                '"$total" "$ips" "$blocked" "$top" "$users" > /app/report/summary.json',
                "python3 -m json.tool /app/report/summary.json > /dev/null",
            ]
        if serve:
            server = (
                "import gzip\nimport re\n\n"
                + _AUTH_ALL
                + "\n\nTHRESHOLD = "
                + str(threshold if level >= 2 else 0)
                + "\nLEVEL = "
                + str(level)
                + "\nNETWORKS = "
                + repr(networks)
                + "\nLOGS = "
                + repr(paths)
                + "\nPORTS = "
                + repr(ports if use_http else (ports[0], None))
                + """
TEXT = ""
for _path in LOGS:
    _open = gzip.open if _path.endswith(".gz") else open
    with _open(_path, "rt") as _handle:
        TEXT += _handle.read()
EVENTS = auth_events(TEXT)
FAILED = dict(auth_failed(EVENTS))
BLOCKED = set(auth_blocklist(EVENTS, THRESHOLD, NETWORKS)) if LEVEL >= 2 else set()


def answer_line(request):
    parts = request.split()
    if len(parts) == 2 and parts[0] == "FAILED":
        return str(FAILED.get(parts[1], 0))
    if len(parts) == 2 and parts[0] == "BLOCKED":
        return "yes" if parts[1] in BLOCKED else "no"
    return "ERR"


def answer_http(path):
    if not path.startswith("/ip/"):
        return 404, {"error": "not found"}
    ip = path[4:]
    payload = {"ip": ip, "failed": FAILED.get(ip, 0)}
    if LEVEL >= 2:
        payload["blocked"] = ip in BLOCKED
    return 200, payload
"""
                + ANSWER_SERVER_FRAME
                + "\n\nserve(*PORTS)\n"
            )
            steps.append(heredoc("/app/ssh_triage_server.py", server))
            steps.append(start_python_service("/app/ssh_triage_server.py", ports[: 1 + use_http]))
        solution = "\n".join(s for s in steps if s)

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
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + _AUTH_ALL
            + "\n\n"
            + settings_lines(params)
            + _AUTH_TESTS
        )
        return Draft(
            instruction=instruction,
            solution=solution,
            tests={"test_task.py": tests},
            files=files,
            keep_agent_processes=serve,
        )


_AUTH_TESTS = """

def load_logs(paths):
    text = ""
    for path in paths:
        assert os.path.isfile(path), f"input {path} is missing"
        if path.endswith(".gz"):
            text += gzip.decompress(Path(path).read_bytes()).decode()
        else:
            text += Path(path).read_text()
    return text


EVENTS = auth_events(load_logs(CFG["paths"]))


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_failed_by_ip():
    assert read("/app/report/failed_by_ip.txt") == auth_table(EVENTS), (
        "failed_by_ip.txt does not match the failed attempts in the logs"
    )


def test_invalid_users_and_blocklist():
    if CFG["level"] >= 2:
        expected = "".join(u + "\\n" for u in auth_invalid_users(EVENTS))
        assert read("/app/report/invalid_users.txt") == expected, "invalid_users.txt is wrong"
        block = auth_blocklist(EVENTS, CFG["threshold"], CFG["networks"])
        assert read("/app/report/blocklist.txt") == "".join(ip + "\\n" for ip in block), (
            "blocklist.txt is wrong"
        )


def test_compromised():
    if CFG["level"] >= 3:
        expected = "".join(line + "\\n" for line in auth_compromised(EVENTS, CFG["threshold"]))
        assert read("/app/report/compromised.txt") == expected, "compromised.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        summary = json.loads(read("/app/report/summary.json"))
        failed = auth_failed(EVENTS)
        block = auth_blocklist(EVENTS, CFG["threshold"], CFG["networks"])
        users = sorted({line.split()[0] for line in auth_compromised(EVENTS, CFG["threshold"])})
        expected = {
            "total_failed": sum(n for _ip, n in failed),
            "unique_ips": len(failed),
            "blocked": len(block),
            "top_ip": failed[0][0],
            "compromised_users": users,
        }
        for key, value in expected.items():
            got = summary.get(key)
            assert got == value, f"summary.json {key}: {got!r} != {value!r}"


def test_program_on_fresh_logs(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(4242)
    for case in range(CFG["fuzz_cases"]):
        pool = auth_pool(rng, rng.randint(3, 9), rng.randint(2, 5))
        count = rng.randint(1, 3) if CFG["level"] >= 3 else 1
        texts = [
            auth_log(rng, pool, rng.randint(20, 90), 5 + i, CFG["level"] >= 2) for i in range(count)
        ]
        paths = []
        for i, text in enumerate(texts):
            path = tmp_path / f"c{case}_{i}.log"
            if CFG["level"] >= 3 and i == 0 and count > 1:
                path = tmp_path / f"c{case}_{i}.log.gz"
                path.write_bytes(gzip.compress(text.encode()))
            else:
                path.write_text(text)
            paths.append(str(path))
        done = run(paths)
        assert done.returncode == 0, f"the program failed on case {case}: {done.stderr[-1500:]}"
        expected = auth_table(auth_events("".join(texts)))
        assert done.stdout == expected, (
            f"case {case}: wrong table for {paths}\\n--- got\\n{done.stdout[:800]}"
            f"\\n--- expected\\n{expected[:800]}"
        )


def test_service():
    if not CFG["serve"]:
        return
    failed = dict(auth_failed(EVENTS))
    block = set(auth_blocklist(EVENTS, CFG["threshold"], CFG["networks"]))
    rng = random.Random(7)
    ips = sorted(failed)
    probe = rng.sample(ips, min(6, len(ips))) + ["10.255.255.254", "198.18.0.9"]
    requests = [f"FAILED {ip}" for ip in probe]
    if CFG["level"] >= 2:
        requests += [f"BLOCKED {ip}" for ip in probe]
    replies = ask_lines(CFG["ports"][0], requests)
    for request, reply in zip(requests, replies):
        verb, ip = request.split()
        want = str(failed.get(ip, 0)) if verb == "FAILED" else ("yes" if ip in block else "no")
        assert reply.strip() == want, f"{request!r} answered {reply!r}, expected {want!r}"
    if CFG["http"]:
        for ip in probe:
            status, body = http_get(CFG["ports"][1], "/ip/" + ip)
            assert status == 200, f"GET /ip/{ip} returned HTTP {status}"
            data = json.loads(body)
            assert data.get("ip") == ip, f"HTTP answer for {ip} names another address: {data}"
            assert data.get("failed") == failed.get(ip, 0), f"HTTP failed count for {ip}: {data}"
            if CFG["level"] >= 2:
                assert data.get("blocked") is (ip in block), f"HTTP blocked flag for {ip}: {data}"
"""


# =====================================================================================
# security.upload_name_filter
# =====================================================================================

UPLOAD_RULES = (
    "badbyte",
    "length",
    "absolute",
    "drive",
    "traversal",
    "empty",
    "hidden",
    "trailing",
    "reserved",
    "extension",
)


def upload_decode(raw, repeat):
    """Percent-decode a name (bytes); once, or until it stops changing."""
    data = raw.encode("latin-1")
    pattern = re.compile(rb"%([0-9A-Fa-f]{2})")
    while True:
        new = pattern.sub(lambda m: bytes([int(m.group(1), 16)]), data)
        if not repeat or new == data:
            return new
        data = new


def upload_verdict(raw, level, allowed, maxlen):
    """The first rule an uploaded file name breaks, or None when it is acceptable."""
    data = upload_decode(raw, level >= 3) if level >= 2 else raw.encode("latin-1")
    if level >= 2 and any(b < 0x20 or b > 0x7E for b in data):
        return "badbyte"
    text = data.decode("latin-1")
    if level >= 3 and len(data) > maxlen:
        return "length"
    if level >= 2:
        text = text.replace("\\", "/")
    if text.startswith("/"):
        return "absolute"
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if level >= 3 and len(text) >= 2 and text[0] in letters and text[1] == ":":
        return "drive"
    segments = text.split("/")
    if ".." in segments:
        return "traversal"
    if level >= 4:
        reserved = {"CON", "PRN", "AUX", "NUL"}
        reserved |= {f"{p}{i}" for p in ("COM", "LPT") for i in range(1, 10)}
        if "" in segments:
            return "empty"
        if any(s.startswith(".") for s in segments):
            return "hidden"
        if any(s.endswith((".", " ")) for s in segments):
            return "trailing"
        if any(s.split(".")[0].upper() in reserved for s in segments):
            return "reserved"
    if level >= 3:
        last = segments[-1]
        if "." not in last or last.rsplit(".", 1)[1].lower() not in allowed:
            return "extension"
    return None


def upload_line(raw, level, allowed, maxlen):
    rule = upload_verdict(raw, level, allowed, maxlen)
    return "ACCEPT" if rule is None else "REJECT " + rule


def upload_names(rng, count, allowed, level):
    """Uploaded file names: ordinary ones, look-alikes and hostile ones."""
    words = ["report", "invoice", "photo", "scan", "backup", "notes", "draft", "IMG_0042"]
    words += ["q3 summary", "data.2024", "x..y", "contract-final", "CONSOLE", "icon", "COM10"]
    dirs = ["docs", "2024", "team a", "img", "uploads", "a.b"]
    bad_ext = ["php", "exe", "sh", "js", "phtml", "bat"]
    seps = ["../", "..\\", "%2e%2e%2f", "..%2f", "%2E%2E/", "..%5c", "%252e%252e%252f", "%2e%2e/"]
    seps += ["%25252e%25252e%25252f", "..%255c"]
    out = []
    while len(out) < count:
        word, folder = rng.choice(words), rng.choice(dirs)
        ext = rng.choice(allowed) if rng.random() < 0.8 else rng.choice(bad_ext)
        if rng.random() < 0.15:
            ext = ext.upper()
        base = f"{word}.{ext}"
        kind = rng.randint(0, 17)
        if rng.random() < (0.45, 0.3, 0.1, 0.0)[level - 1]:
            up = rng.choice(seps[:2] if level >= 2 else seps[:1]) * rng.randint(1, 3)
            name = rng.choice(
                [up + base, f"{folder}/{up}{base}", f"/{folder}/{base}", "/etc/passwd", up[:-1]]
            )
        elif kind <= 3:
            name = base if kind < 2 else f"{folder}/{base}"
        elif kind == 4:
            name = base.replace(" ", "%20").replace("_", "%5f")
        elif kind == 5:
            name = rng.choice(seps) * rng.randint(1, 3) + rng.choice(["etc/passwd", base])
        elif kind == 6:
            name = f"{folder}/" + rng.choice(seps) + base
        elif kind == 7:
            name = rng.choice(["/", "\\", "%2f", "%5c", "%252f"]) + rng.choice(
                ["etc/shadow", base, "srv\\" + base]
            )
        elif kind == 8:
            name = rng.choice(["C:\\", "d:/", "c:", "Z:%5c"]) + base
        elif kind == 9:
            bad = rng.choice(["%00", "%0a", "%0d", "%7f", "%c3%a9", "%09", "%2500", "%1b"])
            name = word + bad + "." + ext if rng.random() < 0.5 else base + bad + ".jpg"
        elif kind == 10:
            name = "-".join([word] * rng.randint(4, 9)) + "." + ext
        elif kind == 11:
            name = rng.choice(["CON", "aux", "Lpt3", "com1", "nul", "PRN", "COM0", "LPT10"]) + (
                "." + ext if rng.random() < 0.7 else ""
            )
            if rng.random() < 0.3:
                name = f"{folder}/{name}"
        elif kind == 12:
            name = rng.choice([".htaccess", ".env", f"{folder}/.{base}", f".cache/{base}", base])
        elif kind == 13:
            name = rng.choice([base + ".", f"{folder} /{base}", base + "%20", f"{folder}./{base}"])
        elif kind == 14:
            name = rng.choice([f"{folder}//{base}", f"{folder}/", f"{folder}/./{base}"])
        elif kind == 15:
            name = rng.choice([f"100%.{ext}", f"{word}%zz.{ext}", f"50%25 off.{ext}", f"%.{ext}"])
        elif kind == 16:
            name = word if rng.random() < 0.5 else f"{folder}/{word}"
        else:
            name = f"{folder}/{word}..{ext}" if rng.random() < 0.5 else f"{word}.tar.{ext}"
        out.append(name)
    return out


_UPLOAD_CORE = function_sources(upload_decode, upload_verdict, upload_line)

_UPLOAD_PY = (
    """#!/usr/bin/env python3
\"\"\"Upload-name gate: one verdict line (ACCEPT / REJECT RULE) per name read on stdin.\"\"\"
import re
import sys

@CONSTS@

"""
    + _UPLOAD_CORE
    + """


def main():
    for raw in sys.stdin.buffer.read().decode("latin-1").splitlines():
        print(upload_line(raw, LEVEL, ALLOWED, MAXLEN))


if __name__ == "__main__":
    main()
"""
)

_UPLOAD_SH = r"""#!/bin/bash
# Upload-name gate: one verdict line (ACCEPT / REJECT RULE) per name read on stdin.
export LC_ALL=C
@CONSTS@

decode_once() {  # percent-decode $1 once into OUT; return 1 on a non-printable byte
  local s=$1 i=0 n=${#1} hex v ch
  OUT=""
  while ((i < n)); do
    ch=${s:i:1}
    hex=${s:i+1:2}
    if [[ $ch == % && $hex =~ ^[0-9A-Fa-f][0-9A-Fa-f]$ ]]; then
      v=$((16#$hex))
      if ((v < 32 || v > 126)); then return 1; fi
      printf -v ch "\\x$hex"
      OUT+=$ch
      i=$((i + 3))
    else
      OUT+=$ch
      i=$((i + 1))
    fi
  done
  return 0
}

verdict() {
  local name=$1 prev seg last ext stem rest
  local -a segs=()
  if ((LEVEL >= 2)); then
    while :; do
      decode_once "$name" || { echo badbyte; return; }
      prev=$name
      name=$OUT
      if ((LEVEL < 3)) || [[ $name == "$prev" ]]; then break; fi
    done
  fi
  if ((LEVEL >= 3 && ${#name} > MAXLEN)); then echo length; return; fi
  if ((LEVEL >= 2)); then name=${name//\\//}; fi
  if [[ $name == /* ]]; then echo absolute; return; fi
  if ((LEVEL >= 3)) && [[ $name =~ ^[A-Za-z]: ]]; then echo drive; return; fi
  rest="$name/"
  while [[ -n $rest ]]; do
    segs+=("${rest%%/*}")
    rest=${rest#*/}
  done
  for seg in "${segs[@]}"; do
    if [[ $seg == .. ]]; then echo traversal; return; fi
  done
  if ((LEVEL >= 4)); then
    for seg in "${segs[@]}"; do [[ -z $seg ]] && { echo empty; return; }; done
    for seg in "${segs[@]}"; do [[ $seg == .* ]] && { echo hidden; return; }; done
    for seg in "${segs[@]}"; do
      [[ $seg == *. || $seg == *" " ]] && { echo trailing; return; }
    done
    for seg in "${segs[@]}"; do
      stem=${seg%%.*}
      case ${stem^^} in
        CON | PRN | AUX | NUL | COM[1-9] | LPT[1-9]) echo reserved; return ;;
      esac
    done
  fi
  if ((LEVEL >= 3)); then
    last=${segs[-1]}
    if [[ $last != *.* ]]; then echo extension; return; fi
    ext=${last##*.}
    if [[ " $ALLOWED " != *" ${ext,,} "* ]]; then echo extension; return; fi
  fi
  echo ok
}

while IFS= read -r line || [[ -n $line ]]; do
  rule=$(verdict "$line")
  if [[ $rule == ok ]]; then echo ACCEPT; else echo "REJECT $rule"; fi
done
"""

_UPLOAD_C = r"""/* Upload-name gate: one verdict (ACCEPT / REJECT RULE) per name read on stdin. */
#include <stdio.h>
#include <string.h>

@CONSTS@

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t decode_once(unsigned char *s, size_t n) {
    size_t r = 0, w = 0;
    while (r < n) {
        if (s[r] == '%' && r + 2 < n && hexval(s[r + 1]) >= 0 && hexval(s[r + 2]) >= 0) {
            s[w++] = (unsigned char)(hexval(s[r + 1]) * 16 + hexval(s[r + 2]));
            r += 3;
        } else {
            s[w++] = s[r++];
        }
    }
    return w;
}

static int is_reserved(const unsigned char *seg, size_t len) {
    char stem[8];
    size_t k = 0;
    while (k < len && seg[k] != '.') k++;
    if (k < 3 || k > 4) return 0;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = seg[i];
        stem[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    stem[k] = 0;
    if (k == 3)
        return !strcmp(stem, "CON") || !strcmp(stem, "PRN") || !strcmp(stem, "AUX") ||
               !strcmp(stem, "NUL");
    return (!strncmp(stem, "COM", 3) || !strncmp(stem, "LPT", 3)) && stem[3] >= '1' &&
           stem[3] <= '9';
}

static const char *verdict(unsigned char *s, size_t n) {
    if (LEVEL >= 2) {
        for (;;) {
            size_t m = decode_once(s, n);
            int changed = m != n;
            n = m;
            if (LEVEL < 3 || !changed) break;
        }
        for (size_t i = 0; i < n; i++)
            if (s[i] < 0x20 || s[i] > 0x7e) return "badbyte";
    }
    if (LEVEL >= 3 && n > MAXLEN) return "length";
    if (LEVEL >= 2)
        for (size_t i = 0; i < n; i++)
            if (s[i] == '\\') s[i] = '/';
    if (n > 0 && s[0] == '/') return "absolute";
    if (LEVEL >= 3 && n >= 2 && s[1] == ':' &&
        ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return "drive";
    size_t starts[4096], lens[4096], count = 0, begin = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            starts[count] = begin;
            lens[count++] = i - begin;
            begin = i + 1;
        }
    }
    for (size_t k = 0; k < count; k++)
        if (lens[k] == 2 && s[starts[k]] == '.' && s[starts[k] + 1] == '.') return "traversal";
    if (LEVEL >= 4) {
        for (size_t k = 0; k < count; k++)
            if (lens[k] == 0) return "empty";
        for (size_t k = 0; k < count; k++)
            if (s[starts[k]] == '.') return "hidden";
        for (size_t k = 0; k < count; k++) {
            unsigned char c = s[starts[k] + lens[k] - 1];
            if (c == '.' || c == ' ') return "trailing";
        }
        for (size_t k = 0; k < count; k++)
            if (is_reserved(s + starts[k], lens[k])) return "reserved";
    }
    if (LEVEL >= 3) {
        const unsigned char *last = s + starts[count - 1];
        size_t len = lens[count - 1], dot = len;
        for (size_t i = 0; i < len; i++)
            if (last[i] == '.') dot = i;
        if (dot == len) return "extension";
        char ext[64];
        size_t el = len - dot - 1;
        if (el >= sizeof ext) return "extension";
        for (size_t i = 0; i < el; i++) {
            unsigned char c = last[dot + 1 + i];
            ext[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        ext[el] = 0;
        for (size_t i = 0; i < sizeof ALLOWED / sizeof ALLOWED[0]; i++)
            if (!strcmp(ext, ALLOWED[i])) return NULL;
        return "extension";
    }
    return NULL;
}

int main(void) {
    static unsigned char line[8192];
    while (fgets((char *)line, sizeof line, stdin)) {
        size_t n = strlen((char *)line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        const char *rule = verdict(line, n);
        if (rule) printf("REJECT %s\n", rule);
        else printf("ACCEPT\n");
    }
    return 0;
}
"""


def _upload_consts(language: str, level: int, allowed: list[str], maxlen: int) -> str:
    if language == "python":
        return f"LEVEL = {level}\nMAXLEN = {maxlen}\nALLOWED = {allowed!r}"
    if language == "bash":
        return f'LEVEL={level}\nMAXLEN={maxlen}\nALLOWED="{" ".join(allowed)}"'
    quoted = ", ".join(f'"{ext}"' for ext in allowed)
    return (
        f"#define LEVEL {level}\n#define MAXLEN {maxlen}\n"
        f"static const char *ALLOWED[] = {{{quoted}}};"
    )


@register
class UploadNameFilter(Family):
    """Gate uploaded file names against path traversal: classify a queue of names under a
    stated policy whose rules grow with the level (percent-decoding, double encoding, drive
    letters, device names, extensions); code asks for a reusable gate program that the tests
    run on hidden hostile and legitimate names."""

    name = "security.upload_name_filter"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"Leave the input files unchanged\.",),
             (r"def test_inputs_untouched\(",)),
        Rule("first_rule_broken",
             (r"rejected for the first of these rules \(checked in this order\)",),
             (r"def upload_verdict\(", r"def test_rejected\(")),
        *(
            Rule(f"policy_{rule}", (rf"`{rule}`: ",), (rf'return "{rule}"',), levels=levels)
            for rule, levels in (
                ("badbyte", frozenset({2, 3, 4})), ("length", frozenset({3, 4})),
                ("absolute", ALL_LEVELS), ("drive", frozenset({3, 4})),
                ("traversal", ALL_LEVELS), ("empty", frozenset({4})), ("hidden", frozenset({4})),
                ("trailing", frozenset({4})), ("reserved", frozenset({4})),
                ("extension", frozenset({3, 4})),
            )
        ),
        Rule("backslash_separator", (r"Both `/` and `\\` are separators",),
             (r'text = text\.replace\("\\\\", "/"\)',), levels=frozenset({2, 3, 4})),
        Rule("percent_decode", (r"Check the percent-decoded name",),
             (r'pattern = re\.compile\(rb"%\(\[0-9A-Fa-f\]\{{2\}}\)"\)',),
             levels=frozenset({2, 3, 4})),
        Rule("decode_once", (r"Decode exactly once\.",),
             (r"data = upload_decode\(raw, level >= 3\) if level >= 2",), levels=frozenset({2})),
        Rule("decode_repeat", (r"Repeat the decoding until the name no longer changes",),
             (r"data = upload_decode\(raw, level >= 3\) if level >= 2",),
             levels=frozenset({3, 4})),
        Rule("queues_in_order", (r"treat them as one list in that order",),
             (r'for _q in CFG\["queues"\]:',), levels=frozenset({4})),
        Rule("accepted", (r"`/app/out/accepted\.txt`: the accepted names",),
             (r"def test_accepted\(",)),
        Rule("rejected", (r"`/app/out/rejected\.txt`: the rejected names",),
             (r"def test_rejected\(",)),
        Rule("rejected_rule", (r"each as `RULE<TAB>NAME`",),
             (r'expected = "".join\(f"\{{r\}}\\t\{{n\}}\\n"',),
             levels=frozenset({2, 3, 4})),
        Rule("rule_counts", (r"`/app/out/rule_counts\.txt`",),
             (r'read\("/app/out/rule_counts\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("gate_program", (r"The endpoint itself will call a gate program",),
             (r"def test_gate_on_unseen_names\(",), when={"code": True}),
        Rule("gate_adversarial", (r"every hostile name must be rejected and every legitimate",),
             (r"assert not missed, ", r"assert not blocked, "),
             when={"code": True, "adversarial": True}),
        Rule("gate_line_by_line", (r"compared line by line with our policy",),
             (r"assert not wrong, ",), when={"code": True, "adversarial": False}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "detect path traversal sequences in uploaded file names": "policy_traversal"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        pool = ["jpg", "jpeg", "png", "gif", "pdf", "txt", "csv", "docx", "xlsx", "webp", "odt"]
        allowed = sorted(rng.sample(pool, 6))
        maxlen = rng.choice([40, 48, 56])
        if level >= 4:
            queues = [f"uploads/queue-{i}.txt" for i in (1, 2, 3)]
            sizes = [30, 30, 30]
        else:
            queues = ["uploads/queue.txt"]
            sizes = [{1: 25, 2: 40, 3: 60}[level]]
        files: dict[str, str | bytes] = {}
        for rel, size in zip(queues, sizes, strict=True):
            files[rel] = "\n".join(upload_names(rng, size, allowed, level)) + "\n"
        if level >= 3:
            files["policy/allowed_extensions.txt"] = "\n".join(allowed) + "\n"
        hashes = {f"/app/{rel}": sha256_hex(data) for rel, data in files.items()}

        rules = {
            "badbyte": "after decoding, the name contains a byte outside printable ASCII "
            "(0x20-0x7E)",
            "length": f"the decoded name is longer than {maxlen} bytes",
            "absolute": "the name starts with a separator",
            "drive": "the name starts with a drive letter and a colon (like `C:`)",
            "traversal": "a segment is exactly `..`",
            "empty": "a segment is empty (`a//b`, or a separator at the end)",
            "hidden": "a segment starts with `.`",
            "trailing": "a segment ends with `.` or a space",
            "reserved": "a segment's text before its first `.` is a Windows device name (CON, "
            "PRN, AUX, NUL, COM1-COM9, LPT1-LPT9) in any letter case",
            "extension": "the last segment has no `.`, or its extension (the text after the "
            "last `.`, compared in lowercase) is not listed in "
            "`/app/policy/allowed_extensions.txt`",
        }
        active = [
            r
            for r in UPLOAD_RULES
            if level >= {"badbyte": 2, "length": 3, "drive": 3, "extension": 3}.get(r, 1)
            and (level >= 4 or r not in ("empty", "hidden", "trailing", "reserved"))
        ]
        prep = []
        if level == 1:
            prep.append("Segments are the parts of the name between `/` separators.")
        else:
            prep.append("Both `/` and `\\` are separators; segments are the parts between them.")
            again = (
                " Repeat the decoding until the name no longer changes (attackers double-encode)."
                if level >= 3
                else " Decode exactly once."
            )
            prep.append(
                "Check the percent-decoded name: each `%` followed by two hex digits stands for "
                "the byte they spell; any other `%` is a literal character." + again
            )
        if len(queues) == 1:
            where = "`/app/uploads/queue.txt` holds the file names users submitted, one per line."
        else:
            where = (
                "The names users submitted are in `/app/uploads/queue-1.txt`, `queue-2.txt` and "
                "`queue-3.txt` (one per line); treat them as one list in that order."
            )
        body = [
            "Our upload endpoint stores files under the name the client sends, and a bug bounty "
            "report showed it can be tricked into writing outside the upload folder. "
            + where
            + " Leave the input files unchanged.",
            " ".join(prep)
            + " A name is rejected for the first of these rules (checked in this order) that "
            "it breaks, identified by the word in front:\n"
            + bullets(f"`{r}`: {rules[r]}" for r in active)
            + "\nAnything else is accepted.",
        ]
        deliverables = [
            "`/app/out/accepted.txt`: the accepted names exactly as submitted, in input order.",
            "`/app/out/rejected.txt`: the rejected names exactly as submitted, in input order"
            + (", each as `RULE<TAB>NAME`." if level >= 2 else "."),
        ]
        if level >= 3:
            deliverables.append(
                "`/app/out/rule_counts.txt`: `RULE COUNT` for every rule that rejected at least "
                "one name, by COUNT descending, ties by RULE in byte order."
            )
        if level >= 4:
            deliverables.append(
                "`/app/out/summary.json`: `total`, `accepted`, `rejected` (numbers of names) and "
                "`rules` (an object mapping each rule of rule_counts.txt to its count)."
            )
        body.append("Please write:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, "/app/namegate")
            hostile = (
                " It will be tested against hostile and legitimate names you have not seen: "
                "every hostile name must be rejected and every legitimate one accepted."
                if ctx.verifier_kind == "adversarial_corpus"
                else " It will be compared line by line with our policy on names you have not seen."
            )
            body.append(
                "The endpoint itself will call a gate program: it reads names from standard "
                "input, one per line, and prints one line per name, `ACCEPT` or `REJECT RULE`. "
                + program_sentence(language, program)
                + hostile
            )
        instruction = "\n\n".join(body)

        steps = ["mkdir -p /app/out"]
        if language:
            source = {"python": _UPLOAD_PY, "bash": _UPLOAD_SH, "c": _UPLOAD_C}[language]
            source = source.replace("@CONSTS@", _upload_consts(language, level, allowed, maxlen))
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            gate = invoke(language, program)
        else:
            source = _UPLOAD_SH.replace("@CONSTS@", _upload_consts("bash", level, allowed, maxlen))
            steps.append(heredoc("/tmp/gate.sh", source))
            gate = "bash /tmp/gate.sh"
        if len(queues) > 1:
            steps.append("cat " + " ".join(f"/app/{q}" for q in queues) + " > /tmp/names.txt")
            names = "/tmp/names.txt"
        else:
            names = f"/app/{queues[0]}"
        steps.append(f"paste -d '\\t' <({gate} < {names}) {names} > /tmp/joined.txt")
        steps.append(
            "awk -F'\\t' '$1 == \"ACCEPT\" {print $2}' /tmp/joined.txt > /app/out/accepted.txt"
        )
        if level >= 2:
            steps.append(
                'awk -F\'\\t\' \'$1 != "ACCEPT" {sub(/^REJECT /, "", $1); print $1 "\\t" $2}\' '
                "/tmp/joined.txt > /app/out/rejected.txt"
            )
        else:
            steps.append(
                "awk -F'\\t' '$1 != \"ACCEPT\" {print $2}' /tmp/joined.txt > /app/out/rejected.txt"
            )
        if level >= 3:
            steps.append(
                "cut -f1 /app/out/rejected.txt | LC_ALL=C sort | uniq -c | awk '{print $2, $1}'"
                " | LC_ALL=C sort -k2,2nr -k1,1 > /app/out/rule_counts.txt"
            )
        if level >= 4:
            steps += [
                "total=$(wc -l < /tmp/joined.txt)",
                "acc=$(wc -l < /app/out/accepted.txt)",
                "rej=$(wc -l < /app/out/rejected.txt)",
                'rules=$(awk \'{printf "%s\\"%s\\": %d", (NR > 1 ? ", " : ""), $1, $2}\''
                " /app/out/rule_counts.txt)",
                'printf \'{"total": %d, "accepted": %d, "rejected": %d, "rules": {%s}}\\n\''
                ' "$total" "$acc" "$rej" "$rules" > /app/out/summary.json',
            ]
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "allowed": allowed,
            "maxlen": maxlen,
            "queues": [f"/app/{q}" for q in queues],
            "hashes": hashes,
            "adversarial": ctx.verifier_kind == "adversarial_corpus",
            "code": language is not None,
            "hidden": {1: 80, 2: 120, 3: 160, 4: 200}[level],
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(upload_decode, upload_verdict, upload_line, upload_names)
            + "\n\n"
            + settings_lines(params)
            + _UPLOAD_TESTS
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_UPLOAD_TESTS = """
NAMES = []
for _q in CFG["queues"]:
    NAMES += Path(_q).read_text().splitlines() if os.path.isfile(_q) else []
RULES = [upload_verdict(n, CFG["level"], CFG["allowed"], CFG["maxlen"]) for n in NAMES]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_accepted():
    expected = "".join(n + "\\n" for n, r in zip(NAMES, RULES) if r is None)
    assert read("/app/out/accepted.txt") == expected, "accepted.txt does not match the policy"


def test_rejected():
    if CFG["level"] >= 2:
        expected = "".join(f"{r}\\t{n}\\n" for n, r in zip(NAMES, RULES) if r is not None)
    else:
        expected = "".join(n + "\\n" for n, r in zip(NAMES, RULES) if r is not None)
    got = read("/app/out/rejected.txt")
    assert got == expected, "rejected.txt does not match the policy"


def counts():
    tally = {}
    for r in RULES:
        if r is not None:
            tally[r] = tally.get(r, 0) + 1
    return sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))


def test_rule_counts():
    if CFG["level"] >= 3:
        expected = "".join(f"{r} {c}\\n" for r, c in counts())
        assert read("/app/out/rule_counts.txt") == expected, "rule_counts.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        data = json.loads(read("/app/out/summary.json"))
        rejected = sum(r is not None for r in RULES)
        assert data.get("total") == len(NAMES), f"total: {data.get('total')}"
        assert data.get("accepted") == len(NAMES) - rejected, f"accepted: {data.get('accepted')}"
        assert data.get("rejected") == rejected, f"rejected: {data.get('rejected')}"
        assert data.get("rules") == dict(counts()), f"rules: {data.get('rules')}"


def test_gate_on_unseen_names():
    if not CFG["code"]:
        return
    rng = random.Random(90210)
    names = upload_names(rng, CFG["hidden"], CFG["allowed"], CFG["level"])
    want = [upload_line(n, CFG["level"], CFG["allowed"], CFG["maxlen"]) for n in names]
    done = run([], stdin="".join(n + "\\n" for n in names))
    assert done.returncode == 0, f"the gate failed: {done.stderr[-1500:]}"
    got = done.stdout.splitlines()
    assert len(got) == len(names), f"{len(got)} verdict lines for {len(names)} names"
    if CFG["adversarial"]:
        clean = sum(w == "ACCEPT" for w in want)
        assert 0 < clean < len(names)
        rows = list(zip(names, got, want))
        missed = [n for n, g, w in rows if w != "ACCEPT" and g.split()[:1] != ["REJECT"]]
        blocked = [n for n, g, w in rows if w == "ACCEPT" and g.strip() != "ACCEPT"]
        assert not missed, f"{len(missed)} hostile names were not rejected, e.g. {missed[:5]}"
        assert not blocked, f"{len(blocked)} legitimate names were rejected, e.g. {blocked[:5]}"
    else:
        wrong = [(n, g, w) for n, g, w in zip(names, got, want) if g.strip() != w]
        assert not wrong, f"{len(wrong)} verdicts differ (name, got, expected): {wrong[:5]}"
"""


# =====================================================================================
# security.sealed_tokens (stripped binary)
# =====================================================================================


def seal(text, key, step, level):
    """What the shipped binary prints for ``text``."""
    data = text.encode("latin-1")
    out = bytearray()
    for i, byte in enumerate(data):
        value = byte ^ key[i % len(key)]
        if level >= 3:
            value = (value + step * i) & 0xFF
        out.append(value)
    token = out.hex()
    if level >= 4:
        check = ((sum(data) + len(data)) & 0xFF) ^ key[0]
        token = f"v2:{token}:{check:02x}"
    return token


def unseal(token, key, step, level):
    """The plaintext of a token, or None when it is not a valid token."""
    if level >= 4:
        match = re.fullmatch(r"v2:((?:[0-9a-f]{2})+):([0-9a-f]{2})", token)
        if not match:
            return None
        body, check = match.group(1), int(match.group(2), 16)
    else:
        body, check = token, None
    raw = bytes.fromhex(body)
    out = bytearray()
    for i, value in enumerate(raw):
        if level >= 3:
            value = (value - step * i) & 0xFF
        out.append(value ^ key[i % len(key)])
    if level >= 4:
        if any(c < 0x20 or c > 0x7E for c in out):
            return None
        if ((sum(out) + len(out)) & 0xFF) ^ key[0] != check:
            return None
    return out.decode("latin-1")


def seal_texts(rng, count):
    """Plaintexts like the ones the implant sends: commands and random printable strings."""
    users = ["alice", "bob", "svc_backup", "root", "deploy"]
    words = ["GET /etc/shadow", "GET /var/backups/db.sql", "PUT loot.tar", "PING", "LIST /home"]
    out = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.3:
            out.append(rng.choice(words))
        elif roll < 0.5:
            out.append("USER " + rng.choice(users))
        elif roll < 0.7:
            out.append(
                "PASS " + "".join(rng.choice("abcdefXYZ0123456789!#$%&*+-=?@^_") for _ in range(10))
            )
        else:
            size = rng.randint(1, 48)
            out.append("".join(chr(rng.randint(32, 126)) for _ in range(size)))
    return out


def seal_tamper(rng, token):
    """A corrupted copy of a level-4 token."""
    how = rng.randrange(3)
    if how == 0:
        pos = rng.randrange(3, len(token))
        while token[pos] == ":":
            pos = rng.randrange(3, len(token))
        digit = rng.choice([d for d in "0123456789abcdef" if d != token[pos]])
        return token[:pos] + digit + token[pos + 1 :]
    if how == 1:
        return token[:-1]
    return "v1:" + token[3:]


def seal_session(rng, count, level):
    """Capture-log lines (timestamp, source, destination, token plaintext) of an implant."""
    sources = [f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{rng.randint(30000, 60000)}"]
    while len(sources) < 4:
        candidate = f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{rng.randint(30000, 60000)}"
        if candidate not in sources:
            sources.append(candidate)
    users = ["alice", "bob", "svc_backup", "deploy"]
    paths = ["/etc/shadow", "/var/backups/db.sql", "/home/alice/.ssh/id_rsa", "/srv/app/.env"]
    rows, clock = [], rng.randint(0, 30000)
    while len(rows) < count:
        source = rng.choice(sources)
        roll = rng.random()
        if roll < 0.2:
            text = "USER " + rng.choice(users)
        elif roll < 0.4:
            text = "PASS " + "".join(rng.choice("abcdefXYZ0123456789!#$%&*") for _ in range(9))
        elif roll < 0.7:
            text = "GET " + rng.choice(paths)
        else:
            text = rng.choice(["PING", "HELLO implant-7", "LIST /home", "PUT stage2.bin", "BYE"])
        clock += rng.randint(1, 40)
        stamp = f"2024-03-05T{clock // 3600 % 24:02d}:{clock // 60 % 60:02d}:{clock % 60:02d}Z"
        rows.append((stamp, source, text))
    return rows


_SEAL_C_BINARY = r"""#include <stdio.h>
#include <string.h>

static const unsigned char K[] = {@KEY@};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: sealer TEXT\n");
        return 2;
    }
    const unsigned char *s = (const unsigned char *)argv[1];
    size_t n = strlen(argv[1]);
    unsigned sum = 0;
    if (@LEVEL@ >= 4) fputs("v2:", stdout);
    for (size_t i = 0; i < n; i++) {
        unsigned v = s[i] ^ K[i % sizeof K];
        if (@LEVEL@ >= 3) v = (v + @STEP@u * (unsigned)i) & 0xffu;
        sum += s[i];
        printf("%02x", v);
    }
    if (@LEVEL@ >= 4) printf(":%02x", ((sum + (unsigned)n) & 0xffu) ^ K[0]);
    putchar('\n');
    return 0;
}
"""

_UNSEAL_PY = (
    """#!/usr/bin/env python3
\"\"\"Decode sealer tokens read on stdin (one per line) back to their plaintexts.\"\"\"
import re
import sys

@CONSTS@

"""
    + function_sources(unseal)
    + """


def main():
    for line in sys.stdin.read().splitlines():
        text = unseal(line.strip(), KEY, STEP, LEVEL)
        print("INVALID" if text is None else text)


if __name__ == "__main__":
    main()
"""
)

_UNSEAL_SH = r"""#!/bin/bash
# Decode sealer tokens read on stdin (one per line) back to their plaintexts.
export LC_ALL=C
@CONSTS@
nkey=${#KEY[@]}
while IFS= read -r token || [[ -n $token ]]; do
  token=${token%$'\r'}
  body=$token
  if ((LEVEL >= 4)); then
    if [[ ! $token =~ ^v2:(([0-9a-f][0-9a-f])+):([0-9a-f][0-9a-f])$ ]]; then
      echo INVALID
      continue
    fi
    body=${BASH_REMATCH[1]}
    check=$((16#${BASH_REMATCH[3]}))
  fi
  text="" sum=0 bad=0
  for ((i = 0; i < ${#body} / 2; i++)); do
    v=$((16#${body:2*i:2}))
    if ((LEVEL >= 3)); then v=$(((v - STEP * i) & 255)); fi
    v=$((v ^ KEY[i % nkey]))
    if ((v < 32 || v > 126)); then bad=1; fi
    sum=$((sum + v))
    printf -v hx '%02x' "$v"
    printf -v ch "\\x$hx"
    text+=$ch
  done
  if ((LEVEL >= 4)); then
    n=$((${#body} / 2))
    if ((bad || (((sum + n) & 255) ^ KEY[0]) != check)); then
      echo INVALID
      continue
    fi
  fi
  printf '%s\n' "$text"
done
"""

_UNSEAL_C = r"""/* Decode sealer tokens read on stdin (one per line) back to their plaintexts. */
#include <stdio.h>
#include <string.h>

@CONSTS@

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int main(void) {
    static char line[65536];
    static unsigned char out[32768];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        const char *body = line;
        size_t len = n;
        int check = -1, ok = 1;
        if (LEVEL >= 4) {
            ok = n >= 8 && !strncmp(line, "v2:", 3) && line[n - 3] == ':';
            if (ok) {
                body = line + 3;
                len = n - 6;
                int hi = hexval(line[n - 2]), lo = hexval(line[n - 1]);
                ok = hi >= 0 && lo >= 0 && len > 0 && len % 2 == 0;
                check = hi * 16 + lo;
            }
        }
        size_t count = len / 2;
        unsigned sum = 0;
        for (size_t i = 0; ok && i < count; i++) {
            int hi = hexval(body[2 * i]), lo = hexval(body[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                ok = 0;
                break;
            }
            unsigned v = (unsigned)(hi * 16 + lo);
            if (LEVEL >= 3) v = (v - STEP * (unsigned)i) & 0xffu;
            v ^= KEY[i % (sizeof KEY / sizeof KEY[0])];
            if (LEVEL >= 4 && (v < 32 || v > 126)) ok = 0;
            sum += v;
            out[i] = (unsigned char)v;
        }
        if (LEVEL >= 4 && ok && (int)(((sum + count) & 0xffu) ^ KEY[0]) != check) ok = 0;
        if (!ok) {
            puts("INVALID");
            continue;
        }
        fwrite(out, 1, count, stdout);
        putchar('\n');
    }
    return 0;
}
"""


def _seal_consts(language: str, key: list[int], step: int, level: int) -> str:
    if language == "python":
        return f"KEY = {key!r}\nSTEP = {step}\nLEVEL = {level}"
    if language == "bash":
        return f"KEY=({' '.join(str(k) for k in key)})\nSTEP={step}\nLEVEL={level}"
    return (
        f"static const unsigned KEY[] = {{{', '.join(str(k) for k in key)}}};\n"
        f"#define STEP {step}u\n#define LEVEL {level}"
    )


_SEAL_DIRS = ["bin", "evidence", "samples", "quarantine"]
_SEAL_NAMES = ["sealer", "tokgen", "wrapd", "encsvc", "update-helper"]
_SEAL_CAPTURE_DIRS = ["capture", "pcap", "netcap", "wire"]
_SEAL_CAPTURE_FILES = {
    "tokens": ["captured.txt", "tokens.txt", "wire_tokens.txt", "intercepted.txt"],
    "session": ["session.log", "traffic.log", "egress.log", "c2_traffic.log"],
}
_SEAL_OUT_DIRS = ["out", "findings", "results", "analysis", "ir_report"]
_SEAL_OUT_FILES = {
    "decoded_txt": ["decoded.txt", "plaintext.txt", "tokens_decoded.txt"],
    "decoded_tsv": ["decoded.tsv", "plaintext.tsv", "session_decoded.tsv"],
    "key": ["key.txt", "secret.txt", "recovered_key.txt"],
    "tampered": ["tampered.txt", "forged_lines.txt", "bad_tokens.txt"],
    "credentials": ["credentials.txt", "logins.txt", "stolen_logins.txt"],
    "exfil": ["exfil.txt", "fetched_paths.txt", "stolen_files.txt"],
}
_SEAL_OPENERS = [
    "During an incident we found an implant's helper program on a host; a copy is at "
    "`{sealer}` (stripped, no source).",
    "While chasing odd outbound traffic we pulled a small helper binary off the affected "
    "machine; it is now at `{sealer}`, stripped and without source.",
    "The intruder left a stripped helper program behind on the compromised host, and we "
    "copied it to `{sealer}` (no symbols, no source).",
    "Among the files planted on the breached server was a little stripped binary, saved "
    "for you at `{sealer}`; we have no source for it.",
    "Triage of the compromised machine turned up the helper an implant calls before it "
    "talks to its server; the copy at `{sealer}` is stripped and came without source.",
]
_SEAL_PROGRAMS = ["unseal", "decode_tokens", "untoken", "desealer"]


@register
class SealedTokens(Family):
    """Reverse a stripped 'sealer' binary by probing it: recover its key and decode captured
    tokens; higher levels add a position-dependent step, an integrity trailer with tampered
    tokens and a capture log to mine for credentials and exfiltrated paths. Code asks for a
    decoder program, fuzzed against the sealing scheme on fresh plaintexts."""

    name = "security.sealed_tokens"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"stripped_binary"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"Leave the binary and the capture unchanged\.",),
             (r"def test_inputs_untouched\(", r"def test_sealer_matches_the_scheme\(")),
        Rule("decoded",
             (r"`(?P<path>/app/\w+/\w+\.(?:txt|tsv))`: (?:the plaintext of each captured token"
              r"|one line `LINE<TAB>SOURCE<TAB>PLAINTEXT` per token)",),
             (r'"decoded": "{path}"', r'read\(OUT\["decoded"\]\)')),
        Rule("key", (r"`(?P<path>/app/\w+/\w+\.txt)`: the secret key as lowercase hex bytes",),
             (r'"key": "{path}"', r'read\(OUT\["key"\]\)\.strip\(\) == bytes\(KEY\)\.hex\(\)'),
             levels=frozenset({1, 2})),
        Rule("integrity_trailer", (r"a token whose trailer does not match its content",),
             (r"if \(\(sum\(out\) \+ len\(out\)\) & 0xFF\) \^ key\[0\] != check:",),
             levels=frozenset({4})),
        Rule("skip_tampered", (r"\(leave out tampered tokens\)",),
             (r"good = \[r for r in rows if r\[2\] is not None\]",), levels=frozenset({4})),
        Rule("tampered",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: the line numbers of the tampered tokens",),
             (r'"tampered": "{path}"', r'read\(OUT\["tampered"\]\)'), levels=frozenset({4})),
        Rule("credentials",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: the implant relays logins as a `USER name`",),
             (r'"credentials": "{path}"', r'read\(OUT\["credentials"\]\)'),
             levels=frozenset({3, 4})),
        Rule("exfil",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: every distinct path the implant fetched",),
             (r'"exfil": "{path}"', r'read\(OUT\["exfil"\]\)'), levels=frozenset({4})),
        Rule("decoder", (r"I also need a decoder",), (r"def test_decoder_on_fresh_tokens\(",),
             when={"code": True}),
        Rule("decoder_invalid", (r"For a tampered or malformed token print `INVALID`",),
             (r'expected\.append\("INVALID" if text is None else text\)',),
             levels=frozenset({4}), when={"code": True}),
        Rule("decoder_without_sealer", (r"It must work without `(?P<sealer>/app/\w+/[\w-]+)`",),
             (r'"sealer": "{sealer}"', r"os\.chmod\(SEALER, 0o600\)"), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "recover XOR-obfuscated strings from a binary blob": "decoded"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        key_len = 1 if level == 1 else rng.randint(3, 5)
        key = [rng.randint(1, 255) for _ in range(key_len)]
        while key_len > 1 and len(set(key)) == 1:
            key = [rng.randint(1, 255) for _ in range(key_len)]
        step = rng.choice([3, 5, 7, 11, 13, 17, 19, 23, 29]) if level >= 3 else 0
        # Where the sample, the capture and the findings live varies from task to task.
        sealer = f"/app/{rng.choice(_SEAL_DIRS)}/{rng.choice(_SEAL_NAMES)}"
        capture_files = _SEAL_CAPTURE_FILES["tokens" if level <= 2 else "session"]
        capture = f"{rng.choice(_SEAL_CAPTURE_DIRS)}/{rng.choice(capture_files)}"
        out_dir = "/app/" + rng.choice(_SEAL_OUT_DIRS)
        if level <= 2:
            wanted = {"decoded": "decoded_txt", "key": "key"}
        else:
            wanted = {"decoded": "decoded_tsv", "credentials": "credentials"}
        if level >= 4:
            wanted |= {"tampered": "tampered", "exfil": "exfil"}
        outputs = {k: f"{out_dir}/{rng.choice(_SEAL_OUT_FILES[v])}" for k, v in wanted.items()}
        opener = rng.choice(_SEAL_OPENERS).format(sealer=sealer)
        binary_source = (
            _SEAL_C_BINARY.replace("@KEY@", ", ".join(str(k) for k in key))
            .replace("@LEVEL@", str(level))
            .replace("@STEP@", str(step))
        )
        files: dict[str, str | bytes] = {"src/sealer.c": binary_source}
        rows: list[tuple[str, str, str]] = []
        tampered: set[int] = set()
        if level <= 2:
            texts = seal_texts(rng, 1 if level == 1 else 4)
            captured = "".join(seal(t, key, step, level) + "\n" for t in texts)
            files[capture] = captured
        else:
            rows = seal_session(rng, 30 if level == 3 else 50, level)
            if level >= 4:
                tampered = set(rng.sample(range(len(rows)), 6))
            dst = f"203.0.113.{rng.randint(2, 250)}:{rng.choice([443, 4444, 8443, 1337])}"
            lines = []
            for i, (stamp, source, text) in enumerate(rows):
                token = seal(text, key, step, level)
                if i in tampered:
                    token = seal_tamper(rng, token)
                lines.append(f"{stamp} {source} -> {dst} {token}\n")
            files[capture] = "".join(lines)
        hashes = {
            f"/app/{rel}": sha256_hex(d) for rel, d in files.items() if not rel.startswith("src/")
        }

        intro = (
            f"{opener} Run as `{sealer} TEXT`, it prints the token the attacker's implant sends "
            "over the wire for TEXT. It obviously obfuscates the text with a secret, but we "
            "don't know how. Leave the binary and the capture unchanged."
        )
        if level >= 4:
            intro += (
                " This version adds an integrity trailer to every token; a token whose trailer "
                "does not match its content, or that is malformed, or that decodes to anything "
                "but printable ASCII, has been tampered with."
            )
        deliverables = []
        if level <= 2:
            where = (
                f"`/app/{capture}` holds a token we captured."
                if level == 1
                else f"`/app/{capture}` holds tokens we captured, one per line."
            )
            deliverables.append(
                f"`{outputs['decoded']}`: the plaintext of each captured token, one per line, "
                "in the same order."
            )
            deliverables.append(
                f"`{outputs['key']}`: the secret key as lowercase hex bytes on one line"
                + (" (just the repeating key, once)." if level == 2 else ".")
            )
        else:
            where = (
                f"`/app/{capture}` is a capture of its traffic: each line is "
                "`TIMESTAMP SOURCE -> DESTINATION TOKEN`."
            )
            skip = " (leave out tampered tokens)" if level >= 4 else ""
            deliverables.append(
                f"`{outputs['decoded']}`: one line `LINE<TAB>SOURCE<TAB>PLAINTEXT` per token"
                f"{skip}, "
                "where LINE is the 1-based line number in the log, in log order."
            )
            if level >= 4:
                deliverables.append(
                    f"`{outputs['tampered']}`: the line numbers of the tampered tokens, "
                    "ascending, one per line."
                )
            deliverables.append(
                f"`{outputs['credentials']}`: the implant relays logins as a `USER name` "
                "message and later a `PASS secret` message from the same SOURCE. For every "
                "PASS that follows a USER from its SOURCE, write `SOURCE USER SECRET` (the "
                "most recent USER of that source), in log order."
            )
            if level >= 4:
                deliverables.append(
                    f"`{outputs['exfil']}`: every distinct path the implant fetched with "
                    "`GET <path>`, byte-order sorted, one per line."
                )
        body = [
            intro + " " + where,
            "Please produce:\n" + numbered(deliverables),
        ]
        program = None
        if language:
            program = program_path(language, "/app/" + rng.choice(_SEAL_PROGRAMS))
            invalid = (
                " For a tampered or malformed token print `INVALID` instead." if level >= 4 else ""
            )
            body.append(
                "We will see more of these tokens, so I also need a decoder: a program that "
                "reads tokens from standard input, one per line, and prints the plaintext of "
                f"each on its own line.{invalid} "
                + program_sentence(language, program)
                + f" It must work without `{sealer}` (we will test it on tokens you have "
                "not seen, with the binary unavailable)."
            )
        instruction = "\n\n".join(body)

        probe_text = "HELLO probe 42"
        steps = [f"mkdir -p {out_dir}"]
        if language:
            source = {"python": _UNSEAL_PY, "bash": _UNSEAL_SH, "c": _UNSEAL_C}[language]
            source = source.replace("@CONSTS@", _seal_consts(language, key, step, level))
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            decoder = invoke(language, program)
        else:
            source = _UNSEAL_SH.replace("@CONSTS@", _seal_consts("bash", key, step, level))
            steps.append(heredoc("/tmp/unseal.sh", source))
            decoder = "bash /tmp/unseal.sh"
        steps.append(
            f"test \"$({sealer} '{probe_text}')\" = '{seal(probe_text, key, step, level)}'"
        )
        if level >= 2:
            steps.append(f"test \"$({sealer} '{probe_text}' | {decoder})\" = '{probe_text}'")
        log = f"/app/{capture}"
        if level <= 2:
            steps.append(f"{decoder} < {log} > {outputs['decoded']}")
            if level == 1:
                steps.append(f"printf '%02x\\n' $(( 0x$({sealer} A) ^ 0x41 )) > {outputs['key']}")
            else:
                steps.append(f"echo {bytes(key).hex()} > {outputs['key']}")
        else:
            steps += [
                f"awk '{{print $5}}' {log} > /tmp/tokens.txt",
                f"{decoder} < /tmp/tokens.txt > /tmp/plain.txt",
                f'test "$(wc -l < /tmp/plain.txt)" -eq "$(wc -l < {log})"',
                f"awk '{{print NR \"\\t\" $2}}' {log} > /tmp/meta.txt",
                "paste -d '\\t' /tmp/meta.txt /tmp/plain.txt > /tmp/all.tsv",
            ]
            if level >= 4:
                steps.append(
                    "awk -F'\\t' '$3 == \"INVALID\" {print $1}' /tmp/all.tsv"
                    f" > {outputs['tampered']}"
                )
                steps.append(f"awk -F'\\t' '$3 != \"INVALID\"' /tmp/all.tsv > {outputs['decoded']}")
            else:
                steps.append(f"cp /tmp/all.tsv {outputs['decoded']}")
            steps.append(
                "awk -F'\\t' '$3 ~ /^USER / {u[$2] = substr($3, 6); next}"
                " $3 ~ /^PASS / && ($2 in u) {print $2, u[$2], substr($3, 6)}'"
                f" {outputs['decoded']} > {outputs['credentials']}"
            )
            if level >= 4:
                steps.append(
                    "awk -F'\\t' '$3 ~ /^GET / {print substr($3, 5)}'"
                    f" {outputs['decoded']} | LC_ALL=C sort -u > {outputs['exfil']}"
                )
        solution = "\n".join(s for s in steps if s)

        params = {
            "level": level,
            "key": key,
            "step": step,
            "sealer": sealer,
            "capture": f"/app/{capture}",
            "outputs": outputs,
            "hashes": hashes,
            "captured": level <= 2,
            "session": level >= 3,
            "code": language is not None,
            "fuzz": {1: 30, 2: 60, 3: 100, 4: 150}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(seal, unseal, seal_texts, seal_tamper)
            + "\n\n"
            + settings_lines(params)
            + _SEAL_TESTS
        )
        return Draft(
            instruction=instruction,
            solution=solution,
            tests={"test_task.py": tests},
            files=files,
            dockerfile_steps=(
                f"RUN mkdir -p {sealer.rsplit('/', 1)[0]} && gcc -O2 -s -o {sealer}"
                " /app/src/sealer.c && rm -rf /app/src",
            ),
        )


_SEAL_TESTS = """
KEY, STEP, LEVEL = CFG["key"], CFG["step"], CFG["level"]
SEALER = CFG["sealer"]
OUT = CFG["outputs"]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_sealer_matches_the_scheme():
    assert os.access(SEALER, os.X_OK), "the sealer binary is gone or not executable"
    for text in ["a", "HELLO probe", "x y z 123 ~!"]:
        done = subprocess.run([SEALER, text], capture_output=True, text=True, timeout=10)
        assert done.stdout.strip() == seal(text, KEY, STEP, LEVEL), "the sealer binary was altered"


def test_decoded_and_key():
    if not CFG["captured"]:
        return
    tokens = Path(CFG["capture"]).read_text().split()
    expected = "".join(unseal(t, KEY, STEP, LEVEL) + "\\n" for t in tokens)
    assert read(OUT["decoded"]) == expected, f"{OUT['decoded']} is wrong"
    assert read(OUT["key"]).strip() == bytes(KEY).hex(), f"{OUT['key']} is wrong"


def session():
    rows = []
    for number, line in enumerate(Path(CFG["capture"]).read_text().splitlines(), 1):
        stamp, source, _arrow, _dst, token = line.split(" ")
        rows.append((number, source, unseal(token, KEY, STEP, LEVEL)))
    return rows


def test_capture_reports():
    if not CFG["session"]:
        return
    rows = session()
    good = [r for r in rows if r[2] is not None]
    expected = "".join(f"{n}\\t{s}\\t{t}\\n" for n, s, t in good)
    assert read(OUT["decoded"]) == expected, f"{OUT['decoded']} is wrong"
    users, creds = {}, []
    for _n, source, text in good:
        if text.startswith("USER "):
            users[source] = text[5:]
        elif text.startswith("PASS ") and source in users:
            creds.append(f"{source} {users[source]} {text[5:]}\\n")
    assert read(OUT["credentials"]) == "".join(creds), f"{OUT['credentials']} is wrong"
    if CFG["level"] >= 4:
        bad = "".join(f"{n}\\n" for n, _s, t in rows if t is None)
        assert read(OUT["tampered"]) == bad, f"{OUT['tampered']} is wrong"
        paths = sorted({t[4:] for _n, _s, t in good if t.startswith("GET ")})
        want = "".join(p + "\\n" for p in paths)
        assert read(OUT["exfil"]) == want, f"{OUT['exfil']} is wrong"


def test_decoder_on_fresh_tokens():
    if not CFG["code"]:
        return
    rng = random.Random(31337)
    texts = seal_texts(rng, CFG["fuzz"])
    tokens = [seal(t, KEY, STEP, LEVEL) for t in texts]
    if LEVEL >= 4:
        tokens = [seal_tamper(rng, t) if rng.random() < 0.3 else t for t in tokens]
    expected = []
    for token in tokens:
        text = unseal(token, KEY, STEP, LEVEL)
        expected.append("INVALID" if text is None else text)
    mode = os.stat(SEALER).st_mode if os.path.exists(SEALER) else None
    if mode is not None:
        os.chmod(SEALER, 0o600)
    try:
        done = run([], stdin="".join(t + "\\n" for t in tokens))
    finally:
        if mode is not None:
            os.chmod(SEALER, mode)
    assert done.returncode == 0, f"the decoder failed: {done.stderr[-1500:]}"
    got = done.stdout.split("\\n")
    assert len(got) >= len(tokens), f"{len(got)} output lines for {len(tokens)} tokens"
    wrong = [(t, g, w) for t, g, w in zip(tokens, got, expected) if g != w]
    assert not wrong, (
        f"{len(wrong)} of {len(tokens)} tokens decoded wrongly (token, got, expected): {wrong[:4]}"
    )
"""


# =====================================================================================
# security.password_audit
# =====================================================================================

_PW_TEXT = (
    "sunshine dragon monkey letmein football shadow master summer winter autumn spring "
    "princess welcome freedom whatever trustno hunter ranger soccer hockey killer george "
    "charlie andrew michelle jessica pepper ginger banana orange purple silver golden "
    "matrix secret tigger thunder cookie coffee pirate rocket falcon diamond bailey "
    "maggie buster jordan harley ashley yankees dallas austin boston chelsea arsenal "
    "liverpool london berlin paris madrid toronto denver phoenix samsung computer internet "
    "office company finance payroll welcome backup server admin access garden flower "
    "butterfly chocolate cheese pizza burger castle kingdom wizard legend forest river "
    "ocean mountain rainbow sparkle starlight midnight blue green yellow marble canyon"
)
PW_WORDS = tuple(sorted(set(_PW_TEXT.split())))


def pw_forms(word, level):
    forms = [word]
    if level >= 2:
        forms.append(word[:1].upper() + word[1:])
    if level >= 3:
        leet = word
        for a, b in (("a", "4"), ("e", "3"), ("i", "1"), ("o", "0"), ("s", "5")):
            leet = leet.replace(a, b)
        forms += [leet, leet[:1].upper() + leet[1:]]
    if level >= 4:
        back = word[::-1]
        forms += [back, back[:1].upper() + back[1:]]
    return forms


def pw_suffixes(level):
    out = [""]
    if level >= 2:
        out += [str(n) for n in range(10)]
    if level >= 3:
        out += [s + "!" for s in out]
    return out


def pw_candidates(words, level):
    seen, out = set(), []
    suffixes = pw_suffixes(level)
    for word in words:
        for form in pw_forms(word, level):
            for suffix in suffixes:
                candidate = form + suffix
                if candidate not in seen:
                    seen.add(candidate)
                    out.append(candidate)
    return out


def pw_hash(alg, password, salt=""):
    name = "sha256" if alg == "sha256s" else alg
    return hashlib.new(name, (salt + password).encode()).hexdigest()


def pw_accounts(rng, words, level, count):
    """(user, password, alg, salt, crackable) rows of a leaked credential dump."""
    firsts = "abcdefghjklmnprstw"
    lasts = ["smith", "jones", "brown", "lee", "garcia", "miller", "davis", "wilson", "moore"]
    lasts += ["taylor", "clark", "lewis", "walker", "young", "king", "wright", "hill", "green"]
    users = set()
    while len(users) < count:
        users.add(rng.choice(firsts) + rng.choice(lasts) + rng.choice(["", "", "2", "7"]))
    algs = ["sha256"] if level <= 2 else ["md5", "sha1", "sha256"]
    rows = []
    for user in sorted(users):
        if rng.random() < 0.75:
            form = rng.choice(pw_forms(rng.choice(words), level))
            password, crackable = form + rng.choice(pw_suffixes(level)), True
        else:
            alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789#%&*+=?@"
            password = "".join(rng.choice(alphabet) for _ in range(rng.randint(12, 16)))
            crackable = False
        rows.append([user, password, rng.choice(algs), "", crackable])
    if level >= 3:
        cracked = [r for r in rows if r[4]]
        for row in rng.sample(rows, 3):
            source = rng.choice(cracked)
            row[1], row[4] = source[1], True
    if level >= 4:
        for row in rng.sample(rows, 2):
            row[2], row[3] = "sha256s", "".join(rng.choice("0123456789abcdef") for _ in range(8))
    return [tuple(r) for r in rows]


def pw_dump(rows):
    lines = []
    for user, password, alg, salt, _crackable in rows:
        if alg == "sha256s":
            lines.append(f"{user}:$sha256s${salt}${pw_hash(alg, password, salt)}")
        else:
            lines.append(f"{user}:${alg}${pw_hash(alg, password)}")
    return "\n".join(lines) + "\n"


def pw_parse(text):
    """[(user, alg, salt, digest)] from a dump."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        user, rest = line.split(":", 1)
        parts = rest.split("$")
        if parts[1] == "sha256s":
            out.append((user, "sha256s", parts[2], parts[3]))
        else:
            out.append((user, parts[1], "", parts[2]))
    return out


def pw_crack(dump_text, words, level):
    """{user: password} for every account whose password follows the stated habits."""
    entries = pw_parse(dump_text)
    candidates = pw_candidates(words, level)
    tables = {}
    found = {}
    for user, alg, salt, digest in entries:
        if alg == "sha256s":
            for candidate in candidates:
                if pw_hash(alg, candidate, salt) == digest:
                    found[user] = candidate
                    break
            continue
        if alg not in tables:
            tables[alg] = {pw_hash(alg, c): c for c in candidates}
        if digest in tables[alg]:
            found[user] = tables[alg][digest]
    return found


_PW_PY = (
    """#!/usr/bin/env python3
\"\"\"Crack a credential dump with a wordlist: prints user:password lines, sorted by user.\"\"\"
import hashlib
import sys

LEVEL = @LEVEL@

"""
    + function_sources(pw_forms, pw_suffixes, pw_candidates, pw_hash, pw_parse, pw_crack)
    + """


def main():
    dump = open(sys.argv[1], encoding="utf-8").read()
    words = [w.strip() for w in open(sys.argv[2], encoding="utf-8") if w.strip()]
    for user, password in sorted(pw_crack(dump, words, LEVEL).items()):
        print(f"{user}:{password}")


if __name__ == "__main__":
    main()
"""
)

_PW_SH = r"""#!/bin/bash
# Crack a credential dump with a wordlist: prints user:password lines, sorted by user.
# usage: crack.sh DUMP WORDLIST
set -euo pipefail
export LC_ALL=C
LEVEL=@LEVEL@
dump=$1
wordlist=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

leet() {
  local s=$1
  s=${s//a/4}; s=${s//e/3}; s=${s//i/1}; s=${s//o/0}; s=${s//s/5}
  REPLY=$s
}
reverse() {
  local s=$1 out="" i
  for ((i = ${#s} - 1; i >= 0; i--)); do out+=${s:i:1}; done
  REPLY=$out
}

suffixes=("")
if ((LEVEL >= 2)); then suffixes+=(0 1 2 3 4 5 6 7 8 9); fi
if ((LEVEL >= 3)); then
  count=${#suffixes[@]}
  for ((k = 0; k < count; k++)); do suffixes+=("${suffixes[k]}!"); done
fi

declare -A seen=()
candidates=()
while IFS= read -r word || [[ -n $word ]]; do
  word=${word%$'\r'}
  [[ -z $word ]] && continue
  forms=("$word")
  if ((LEVEL >= 2)); then forms+=("${word^}"); fi
  if ((LEVEL >= 3)); then leet "$word"; forms+=("$REPLY" "${REPLY^}"); fi
  if ((LEVEL >= 4)); then reverse "$word"; forms+=("$REPLY" "${REPLY^}"); fi
  for form in "${forms[@]}"; do
    for suffix in "${suffixes[@]}"; do
      candidate=$form$suffix
      [[ -n ${seen[$candidate]+x} ]] && continue
      seen[$candidate]=1
      candidates+=("$candidate")
    done
  done
done < "$wordlist"
printf '%s\n' "${candidates[@]}" > "$work/candidates"

# one file per candidate (its name is the candidate's index), hashed by one process per tool
write_all() {  # $1 directory, $2 prefix (salt)
  local i
  mkdir -p "$1"
  for i in "${!candidates[@]}"; do printf '%s%s' "$2" "${candidates[i]}" > "$1/$i"; done
}
hash_dir() {  # $1 directory, $2 tool; prints "digest index"
  (cd "$1" && find . -type f -printf '%P\0' | xargs -0 "$2") | awk '{print $1, $2}'
}

: > "$work/found"
written=0
for alg in md5 sha1 sha256; do
  if grep -q ":\\\$$alg\\\$" "$dump"; then
    if ((!written)); then write_all "$work/plain" ""; written=1; fi
    hash_dir "$work/plain" "${alg}sum" > "$work/table.$alg"
    awk -F'$' -v alg="$alg" 'NR == FNR { split($0, p, " "); idx[p[1]] = p[2]; next }
      $2 == alg && ($3 in idx) { sub(/:$/, "", $1); print $1, idx[$3] }' \
      "$work/table.$alg" "$dump" >> "$work/found"
  fi
done
n=0
while IFS='$' read -r user alg salt digest; do
  [[ $alg == sha256s ]] || continue
  user=${user%:}
  n=$((n + 1))
  write_all "$work/salted$n" "$salt"
  hash_dir "$work/salted$n" sha256sum | awk -v d="$digest" -v u="$user" '$1 == d {print u, $2}' \
    >> "$work/found"
  rm -rf "$work/salted$n"
done < "$dump"
awk 'NR == FNR { c[NR - 1] = $0; next } { print $1 ":" c[$2] }' "$work/candidates" "$work/found" \
  | sort -t: -k1,1
"""


_PW_DIRS = ["audit", "leak", "breach", "pwaudit", "incident"]
_PW_FILES = {
    "dump": ["dump.txt", "hashes.txt", "portal_users.txt", "leaked.txt"],
    "wordlist": ["wordlist.txt", "words.txt", "common_words.txt", "dictionary.txt"],
    "cracked": ["cracked.txt", "recovered.txt", "weak_accounts.txt"],
    "uncracked": ["uncracked.txt", "not_recovered.txt", "strong_accounts.txt"],
    "shared": ["shared.txt", "reused.txt", "shared_passwords.txt"],
    "report": ["report.json", "summary.json", "stats.json"],
}
_PW_PROGRAMS = ["crack", "pwcheck", "audit_dump", "weakpw"]
_PW_OPENERS = [
    "A credential dump from the legacy customer portal leaked, and I need to know how weak "
    "those passwords are before we force resets.",
    "The old customer portal's password hashes turned up on a forum; before anyone decides "
    "on resets I need to see how many of them fall to a simple wordlist.",
    "After the breach of the old customer login database, I have to report how many of the "
    "leaked passwords are trivially weak.",
    "Someone posted the password table of the retired customer portal online, and I want to "
    "know which customers must change their passwords first.",
    "We have a copy of the customer portal's leaked password hashes and need a quick audit "
    "of how guessable they are.",
]
_PW_SOURCES = [
    "From the old helpdesk tickets",
    "From the password-reset requests we used to handle",
    "From what customers told the support desk over the years",
    "From interviews with the support team",
]


@register
class PasswordAudit(Family):
    """Audit a leaked credential dump by cracking unsalted hashes with a wordlist and the
    users' known password habits (more habits, mixed algorithms and salted entries with each
    level), then report uncracked accounts, shared passwords and per-algorithm statistics.
    metric_threshold scores the share of accounts recovered; code asks for a cracker
    program that the tests run on a fresh dump."""

    name = "security.password_audit"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("inputs_untouched", (r"Leave the input files unchanged\.",),
             (r"def test_inputs_untouched\(",)),
        Rule("dump_format", (r"one account per line as `user:\$ALG\$HEX`",),
             (r"def pw_parse\(",)),
        Rule("salted", (r"Some entries are salted: `user:\$sha256s\$SALT\$HEX`",),
             (r"pw_hash\(alg, candidate, salt\) == digest",), levels=frozenset({4})),
        Rule("wordlist", (r"a word from `(?P<path>/app/\w+/\w+\.txt)`",),
             (r'"wordlist": "{path}"', r'WORDS = Path\(CFG\["wordlist"\]\)')),
        Rule("capitalized", (r"sometimes with its first letter capitalized",),
             (r"forms\.append\(word\[:1\]\.upper\(\) \+ word\[1:\]\)",),
             levels=frozenset({2, 3, 4})),
        Rule("digit", (r"sometimes followed by a single digit",),
             (r"out \+= \[str\(n\) for n in range\(10\)\]",), levels=frozenset({2, 3, 4})),
        Rule("leetspeak", (r"sometimes in leetspeak",),
             (r'\("a", "4"\), \("e", "3"\), \("i", "1"\), \("o", "0"\), \("s", "5"\)',),
             levels=frozenset({3, 4})),
        Rule("bang", (r"sometimes ending in a single `!`",),
             (r'out \+= \[s \+ "!" for s in out\]',), levels=frozenset({3, 4})),
        Rule("backwards", (r"sometimes with the word spelled backwards",),
             (r"back = word\[::-1\]",), levels=frozenset({4})),
        Rule("cracked",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: one `user:password` line per account",
              r"sorted by user \(every line must be right\)"),
             (r"def test_cracked\(", r'"cracked": "{path}"', r'read\(CFG\["cracked"\]\)',
              r'wrong password for \{{user\}}', r"lines are not sorted")),
        Rule("crack_at_least", (r"I need at least \d+ of the \d+ accounts recovered",),
             (r'assert len\(found\) >= CFG\["required"\]',), when={"metric": True}),
        Rule("crack_every", (r"Recover every account whose password follows those habits",),
             (r"expected = pw_crack\(DUMP, WORDS, LEVEL\)",), when={"metric": False}),
        Rule("uncracked", (r"`(?P<path>/app/\w+/\w+\.txt)`: the users not in",),
             (r'"uncracked": "{path}"', r'read\(CFG\["uncracked"\]\)'),
             levels=frozenset({2, 3, 4})),
        Rule("shared", (r"`(?P<path>/app/\w+/\w+\.txt)`: for every recovered password used",),
             (r'"shared": "{path}"', r'read\(CFG\["shared"\]\)'), levels=frozenset({3, 4})),
        Rule("report", (r"`(?P<path>/app/\w+/\w+\.json)`: `total` \(accounts\)",),
             (r'"report": "{path}"', r'read\(CFG\["report"\]\)'), levels=frozenset({4})),
        Rule("program", (r"so I also want a program: given a dump and a wordlist",),
             (r"def test_program_on_a_fresh_dump\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "crack weak unsalted password hashes with a small wordlist": "cracked"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        metric = ctx.verifier_kind == "metric_threshold"
        vocabulary = list(PW_WORDS)
        words = rng.sample(vocabulary, {1: 40, 2: 50, 3: 50, 4: 50}[level])
        rows = pw_accounts(rng, words, level, {1: 12, 2: 20, 3: 28, 4: 36}[level])
        crackable = sum(1 for r in rows if r[4])
        share = {1: 0.5, 2: 0.7, 3: 0.85, 4: 1.0}[level]
        required = -(-int(share * crackable * 100) // 100)
        # Where the dump lives and what the findings are called varies from task to task.
        folder = rng.choice(_PW_DIRS)
        paths = {k: f"/app/{folder}/{rng.choice(names)}" for k, names in _PW_FILES.items()}
        dump, wordlist, cracked = paths["dump"], paths["wordlist"], paths["cracked"]
        files: dict[str, str | bytes] = {
            dump.removeprefix("/app/"): pw_dump(rows),
            wordlist.removeprefix("/app/"): "\n".join(words) + "\n",
        }
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        algs = "`sha256`" if level <= 2 else "`md5`, `sha1` or `sha256`"
        salted = (
            " Some entries are salted: `user:$sha256s$SALT$HEX` is the SHA-256 of SALT "
            "immediately followed by the password."
            if level >= 4
            else ""
        )
        habits = [f"a word from `{wordlist}`"]
        if level >= 2:
            habits.append("sometimes with its first letter capitalized")
            habits.append("sometimes followed by a single digit")
        if level >= 3:
            habits.append(
                "sometimes in leetspeak: every a, e, i, o, s of the word replaced by 4, 3, 1, "
                "0, 5 (capitalization, if any, is applied after that)"
            )
            habits.append("sometimes ending in a single `!` (after the digit, if there is one)")
        if level >= 4:
            habits.append("sometimes with the word spelled backwards (then possibly capitalized)")
        body = [
            f"{rng.choice(_PW_OPENERS)} `{dump}` has one "
            f"account per line as `user:$ALG$HEX`, where ALG is {algs} and HEX the hex digest "
            f"of the UTF-8 password.{salted} Leave the input files unchanged.",
            f"{rng.choice(_PW_SOURCES)} we know the users' habits: a password is\n"
            + bullets(habits)
            + "\nSome users picked strong random passwords; don't waste time on those.",
        ]
        deliverables = [
            f"`{cracked}`: one `user:password` line per account you recovered, "
            "sorted by user (every line must be right)."
            + (
                f" I need at least {required} of the {len(rows)} accounts recovered."
                if metric
                else " Recover every account whose password follows those habits."
            )
        ]
        if level >= 2:
            deliverables.append(
                f"`{paths['uncracked']}`: the users not in {cracked.rsplit('/', 1)[1]}, "
                "sorted, one per line."
            )
        if level >= 3:
            deliverables.append(
                f"`{paths['shared']}`: for every recovered password used by two or more "
                "accounts, a line `PASSWORD user1,user2,...` (users sorted), lines sorted by "
                "password."
            )
        if level >= 4:
            deliverables.append(
                f"`{paths['report']}`: `total` (accounts), `cracked`, `percent` (100 * "
                "cracked / total, rounded to one decimal) and `by_algorithm`, mapping each ALG "
                'to `{"total": N, "cracked": K}`.'
            )
        body.append("Please write:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, "/app/" + rng.choice(_PW_PROGRAMS))
            goal = (
                f"recover at least {share:.0%} of the accounts that follow those habits"
                if metric
                else "recover every account that follows those habits"
            )
            body.append(
                "We have more dumps like this, so I also want a program: given a dump and a "
                "wordlist as its two arguments, it prints the `user:password` lines (sorted by "
                f"user) for the accounts it recovers; it must {goal} and never print a wrong "
                "password. " + program_sentence(language, program)
            )
        instruction = "\n\n".join(body)

        steps = []
        if level >= 3:
            steps.append(f"wc -l {dump} {wordlist}")
            steps.append(f"head -n 3 {dump}")
        if level >= 4:
            steps.append(f"cut -d'$' -f2 {dump} | sort | uniq -c")
        if language:
            source = {"python": _PW_PY, "bash": _PW_SH}[language].replace("@LEVEL@", str(level))
            steps.append(program_step(language, program, source))
            crack = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/crack.sh", _PW_SH.replace("@LEVEL@", str(level))))
            crack = "bash /tmp/crack.sh"
        steps.append(f"{crack} {dump} {wordlist} > /tmp/cracked.txt")
        steps.append(f"mv /tmp/cracked.txt {cracked}")
        if level >= 2:
            steps += [
                f"cut -d: -f1 {dump} | LC_ALL=C sort > /tmp/users.txt",
                f"cut -d: -f1 {cracked} | LC_ALL=C sort > /tmp/cracked_users.txt",
                f"LC_ALL=C comm -23 /tmp/users.txt /tmp/cracked_users.txt > {paths['uncracked']}",
            ]
        if level >= 3:
            steps += [
                f"awk -F: '{{print $2 \"\\t\" $1}}' {cracked} | LC_ALL=C sort > /tmp/pw_users.txt",
                "awk -F'\\t' '{u[$1] = n[$1]++ ? u[$1] \",\" $2 : $2}"
                " END {for (p in n) if (n[p] > 1) print p, u[p]}' /tmp/pw_users.txt"
                f" | LC_ALL=C sort > {paths['shared']}",
            ]
        if level >= 4:
            steps.append(
                "awk -F: 'NR == FNR {ok[$1] = 1; next}"
                ' {split($2, p, "$"); t[p[2]]++; n++; if ($1 in ok) {c[p[2]]++; k++}}'
                ' END {printf "{\\"total\\": %d, \\"cracked\\": %d, \\"percent\\": %.1f,'
                ' \\"by_algorithm\\": {", n, k, 100 * k / n; s = "";'
                ' for (a in t) {printf "%s\\"%s\\": {\\"total\\": %d, \\"cracked\\": %d}",'
                ' s, a, t[a], c[a] + 0; s = ", "} print "}}"}\''
                f" {cracked} {dump} > {paths['report']}"
            )
            steps.append(f"python3 -m json.tool {paths['report']}")
        solution = "\n".join(steps)

        params = {
            "level": level,
            "hashes": hashes,
            **paths,
            "metric": metric,
            "code": language is not None,
            "required": required,
            "share": share,
            "fresh_words": {1: 30, 2: 20, 3: 8, 4: 5}[level],
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(
                pw_forms,
                pw_suffixes,
                pw_candidates,
                pw_hash,
                pw_accounts,
                pw_dump,
                pw_parse,
                pw_crack,
            )
            + f"\n\nPW_WORDS = {PW_WORDS!r}\n"
            + "\n"
            + settings_lines(params)
            + _PW_TESTS
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_PW_TESTS = '''
LEVEL = CFG["level"]
DUMP = Path(CFG["dump"]).read_text() if os.path.isfile(CFG["dump"]) else ""
WORDS = Path(CFG["wordlist"]).read_text().split() if DUMP else []
ENTRIES = {user: (alg, salt, digest) for user, alg, salt, digest in pw_parse(DUMP)}


def check_lines(text, entries):
    """{user: password} from cracked lines; every line must be a right password."""
    found = {}
    lines = text.splitlines()
    for line in lines:
        user, sep, password = line.partition(":")
        assert sep and user in entries, f"bad line {line!r}"
        assert user not in found, f"{user} is listed twice"
        alg, salt, digest = entries[user]
        assert pw_hash(alg, password, salt) == digest, f"wrong password for {user}: {password!r}"
        found[user] = password
    assert lines == sorted(lines, key=lambda l: l.split(":", 1)[0]), "lines are not sorted by user"
    return found


def cracked():
    return check_lines(read(CFG["cracked"]), ENTRIES)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_cracked():
    found = cracked()
    if CFG["metric"]:
        print(f"metric: recovered {len(found)} of {len(ENTRIES)} accounts")
        assert len(found) >= CFG["required"], (
            f"recovered {len(found)} accounts, need at least {CFG['required']}"
        )
    else:
        expected = pw_crack(DUMP, WORDS, LEVEL)
        missing = sorted(set(expected) - set(found))
        assert not missing, f"these accounts follow the habits but were not recovered: {missing}"


def test_uncracked():
    if CFG["level"] >= 2:
        found = cracked()
        expected = "".join(u + "\\n" for u in sorted(set(ENTRIES) - set(found)))
        assert read(CFG["uncracked"]) == expected, f"{CFG['uncracked']} is wrong"


def test_shared():
    if CFG["level"] >= 3:
        groups = {}
        for user, password in cracked().items():
            groups.setdefault(password, []).append(user)
        expected = "".join(
            f"{pw} {','.join(sorted(us))}\\n" for pw, us in sorted(groups.items()) if len(us) > 1
        )
        assert read(CFG["shared"]) == expected, f"{CFG['shared']} is wrong"


def test_report():
    if CFG["level"] >= 4:
        found = cracked()
        data = json.loads(read(CFG["report"]))
        assert data.get("total") == len(ENTRIES), f"total: {data.get('total')}"
        assert data.get("cracked") == len(found), f"cracked: {data.get('cracked')}"
        assert abs(float(data.get("percent", -1)) - 100 * len(found) / len(ENTRIES)) < 0.051, (
            f"percent: {data.get('percent')}"
        )
        by = {}
        for user, (alg, _salt, _digest) in ENTRIES.items():
            slot = by.setdefault(alg, {"total": 0, "cracked": 0})
            slot["total"] += 1
            slot["cracked"] += user in found
        assert data.get("by_algorithm") == by, f"by_algorithm: {data.get('by_algorithm')} != {by}"


def test_program_on_a_fresh_dump(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(2718)
    words = rng.sample(list(PW_WORDS), CFG["fresh_words"])
    rows = pw_accounts(rng, words, LEVEL, 10)
    dump = tmp_path / "dump.txt"
    dump.write_text(pw_dump(rows))
    wordlist = tmp_path / "words.txt"
    wordlist.write_text("\\n".join(words) + "\\n")
    done = run([dump, wordlist], timeout=120)
    assert done.returncode == 0, f"the program failed: {done.stderr[-1500:]}"
    entries = {u: (a, s, d) for u, a, s, d in pw_parse(dump.read_text())}
    found = check_lines(done.stdout, entries)
    expected = pw_crack(dump.read_text(), words, LEVEL)
    if CFG["metric"]:
        need = -(-int(CFG["share"] * len(expected) * 100) // 100)
        print(f"metric: program recovered {len(found)} of {len(expected)} crackable accounts")
        assert len(found) >= need, f"the program recovered {len(found)}, need {need}"
    else:
        assert set(found) == set(expected), (
            f"the program missed {sorted(set(expected) - set(found))}"
        )
'''
