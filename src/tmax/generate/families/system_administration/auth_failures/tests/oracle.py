import re

_FAIL = re.compile(r"sshd\[\d+\]: Failed password for (invalid user )?(\S+) from (\S+) port \d+")
_OK = re.compile(r"sshd\[\d+\]: Accepted (password|publickey) for (\S+) from (\S+) port \d+")


def auth_scan(texts):
    """(failures per ip, accepted ips, failures per user)."""
    fails, users, accepted = {}, {}, set()
    for text in texts:
        for line in text.splitlines():
            m = _FAIL.search(line)
            if m:
                fails[m.group(3)] = fails.get(m.group(3), 0) + 1
                users[m.group(2)] = users.get(m.group(2), 0) + 1
                continue
            m = _OK.search(line)
            if m:
                accepted.add(m.group(3))
    return fails, accepted, users


def ranking(counts):
    return "".join(f"{n} {k}\n" for k, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
