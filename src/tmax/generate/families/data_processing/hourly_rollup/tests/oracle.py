import datetime
import re

_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                    r"(Z|[+-][0-9]{2}:[0-9]{2})")
_VALUE = re.compile(r"[0-9]+(\.[0-9])?")


def parse_stamp(text):
    """UTC hour 'YYYY-MM-DDTHH' of an ISO timestamp ending in Z or +HH:MM / -HH:MM."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z")
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H")


def tenths(text):
    whole, _, frac = text.partition(".")
    return int(whole) * 10 + int((frac + "0")[:1])


def rollup(texts):
    groups = {}
    for text in texts:
        for line in text.splitlines()[1:]:
            parts = line.strip().split(",")
            if len(parts) != 3:
                continue
            stamp, sensor, value = parts
            if not _STAMP.fullmatch(stamp) or not _VALUE.fullmatch(value):
                continue
            try:
                key, v = (parse_stamp(stamp), sensor), tenths(value)
            except ValueError:
                continue
            groups.setdefault(key, []).append(v)
    rows = ["hour,sensor,count,min,max,mean"]
    for (hour, sensor) in sorted(groups):
        vals = groups[(hour, sensor)]
        n, s = len(vals), sum(vals)
        mean = (20 * s + n) // (2 * n)
        rows.append("%s,%s,%d,%d.%d,%d.%d,%d.%02d" % (hour, sensor, n, min(vals) // 10,
                    min(vals) % 10, max(vals) // 10, max(vals) % 10, mean // 100, mean % 100))
    return "\n".join(rows) + "\n"
