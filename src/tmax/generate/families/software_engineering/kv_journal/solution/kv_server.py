import re

{{ functions }}

LEVEL = {{ level }}
FILES = {{ replay | py }}
PORTS = {{ ports | py }}
SNAPSHOT = None
if FILES[0].endswith(".kv"):
    SNAPSHOT = kv_load(open(FILES[0]).read())
    FILES = FILES[1:]
STATE, _ = kv_replay([open(p).read() for p in FILES], LEVEL, SNAPSHOT)


def answer_line(request):
    verb, _, arg = request.partition(" ")
    if verb == "GET":
        return STATE.get(arg, "(nil)")
    if verb == "EXISTS":
        return "1" if arg in STATE else "0"
    if verb == "COUNT":
        return str(len(STATE))
    if verb == "PREFIX":
        return str(sum(1 for k in STATE if k.startswith(arg)))
    return "ERR"


def answer_http(path):
    if path == "/stats":
        return 200, {"keys": len(STATE)}
    if path.startswith("/kv/") and path[4:] in STATE:
        return 200, {"key": path[4:], "value": STATE[path[4:]]}
    return 404, {"error": "not found"}
{{ frame }}

serve(*PORTS)
