import os

LEVEL = {{ level }}
DD_EXCLUDED = {{ excluded | py }}
PORT = {{ port }}
{{ considered }}

GROUPS = {}
for _line in open("/app/report/duplicates.txt"):
    _paths = _line.rstrip("\n").split("\t")
    for _p in _paths:
        GROUPS[_p] = len(_paths)
WASTED = 0
for _line in open("/app/report/duplicates.txt"):
    _paths = _line.rstrip("\n").split("\t")
    WASTED += (len(_paths) - 1) * os.path.getsize("/app/photos/" + _paths[0])
STARTED = set()
for _folder, _dirs, _names in os.walk("/app/photos"):
    for _name in _names:
        _full = os.path.join(_folder, _name)
        if os.path.isfile(_full) and not os.path.islink(_full):
            _rel = os.path.relpath(_full, "/app/photos")
            if dd_considered(_rel, b"x", LEVEL):
                STARTED.add(_rel)


def answer_line(request):
    verb, _, arg = request.partition(" ")
    if verb == "WASTED":
        return str(WASTED)
    if verb == "GROUP":
        if arg in GROUPS:
            return str(GROUPS[arg])
        return "1" if arg in STARTED else "0"
    return "ERR"


def answer_http(path):
    return 404, {}
{{ frame }}

serve(PORT)
