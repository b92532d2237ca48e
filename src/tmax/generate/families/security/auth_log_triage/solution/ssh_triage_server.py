import gzip
import re

{{ sources }}

THRESHOLD = {{ threshold }}
LEVEL = {{ level }}
NETWORKS = {{ networks | py }}
LOGS = {{ logs | py }}
PORTS = {{ ports | py }}
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
{{ frame }}

serve(*PORTS)
