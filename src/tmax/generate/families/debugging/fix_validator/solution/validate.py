import re
import sys

LEVEL = {{ level }}
SHELLS = {"/bin/bash", "/bin/sh", "/usr/sbin/nologin"}
RESERVED = {"root", "admin", "daemon", "nobody"}


def valid(line):
    fields = line.split(":")
    if len(fields) != 4:
        return False
    name, uid, email, shell = fields
    if not re.fullmatch(r"[a-z][a-z0-9_]{2,15}", name):
        return False
    if not re.fullmatch(r"[1-9][0-9]*", uid) or not 1000 <= int(uid) <= 60000:
        return False
    if LEVEL >= 2:
        local, at, domain = email.partition("@")
        if not at or not local or "@" in domain or "." not in domain:
            return False
        if any(part == "" for part in domain.split(".")):
            return False
        if not re.fullmatch(r"[A-Za-z0-9._+-]+", local + domain):
            return False
    if LEVEL >= 3 and shell not in SHELLS:
        return False
    if LEVEL >= 4 and (name in RESERVED or len(line) > 80):
        return False
    return True


bad = 0
for raw in sys.stdin:
    record = raw.rstrip("\n")
    result = valid(record)
    bad += not result
    print("VALID" if result else "INVALID", flush=True)
sys.exit(1 if bad else 0)
