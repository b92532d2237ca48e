import re

ID_PREFIX = "{{ prefix }}"
AMOUNT_CAP = {{ cap }}

_EMAIL = re.compile(r"[a-z0-9+_-]+(\.[a-z0-9+_-]+)*@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,10}")


def valid_date(text):
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return False
    y, m, d = int(text[:4]), int(text[5:7]), int(text[8:])
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return 1 <= m <= 12 and 1 <= d <= days[m - 1]


def signup_ok(line, level, seen):
    fields = line.split(",")
    if len(fields) != 4:
        return False
    rid, email, day, amount = fields
    if not re.fullmatch(ID_PREFIX + r"[0-9]{6}", rid) or not _EMAIL.fullmatch(email):
        return False
    if level >= 2:
        if not valid_date(day):
            return False
    elif not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", day):
        return False
    if not re.fullmatch(r"-?[0-9]+\.[0-9]{2}", amount):
        return False
    if level >= 3 and (amount.startswith("-") or float(amount) > AMOUNT_CAP):
        return False
    if level >= 4:
        if rid in seen:
            return False
        seen.add(rid)
    return True


def filter_signups(text, level):
    seen, keep, bad = set(), [], []
    for number, line in enumerate(text.split("\n")[:-1] if text.endswith("\n")
                                  else text.split("\n"), 1):
        (keep if signup_ok(line, level, seen) else bad).append((number, line))
    return keep, bad
