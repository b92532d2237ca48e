import re

_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_NAMES = [None, None, None,
          {m: i + 1 for i, m in enumerate(_MONTHS)},
          {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}]
_MACROS = {"@reboot", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually"}


def _value(token, index, level):
    if re.fullmatch(r"[0-9]+", token):
        number = int(token)
    elif level >= 2 and _NAMES[index] and token.lower() in _NAMES[index]:
        number = _NAMES[index][token.lower()]
    else:
        return None
    lo, hi = _RANGES[index]
    return number if lo <= number <= hi else None


def _field_ok(field, index, level):
    for item in field.split(","):
        base, slash, step = item.partition("/")
        if slash and not (re.fullmatch(r"[0-9]+", step) and int(step) >= 1):
            return False
        if base == "*":
            continue
        a, dash, b = base.partition("-")
        first = _value(a, index, level)
        if first is None:
            return False
        if dash:
            last = _value(b, index, level)
            if last is None or last < first:
                return False
        elif slash:
            return False
    return True


def cron_line_state(line, level):
    """'skip' for blank/comment lines, else 'ok' or 'bad'."""
    text = line.strip()
    if not text or text.startswith("#"):
        return "skip"
    if level >= 4 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", text):
        return "ok"
    parts = text.split(None, 5)
    if level >= 3 and parts[0].startswith("@"):
        return "ok" if parts[0] in _MACROS and len(parts) >= 2 else "bad"
    if len(parts) < 6:
        return "bad"
    return "ok" if all(_field_ok(parts[i], i, level) for i in range(5)) else "bad"


def invalid_lines(text, level):
    return [n for n, line in enumerate(text.split("\n"), 1)
            if cron_line_state(line, level) == "bad"]
