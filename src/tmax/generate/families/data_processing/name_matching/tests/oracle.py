import re


def normalise(name):
    return " ".join(re.sub(r"[^a-z0-9 ]", "", name.lower()).split())


def distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def best_match(name, canon, limit):
    key = normalise(name)
    scored = sorted((distance(key, normalise(c)), c) for c in canon)
    if limit is not None and scored[0][0] > limit:
        return "UNMATCHED"
    return scored[0][1]


def match_lines(canon_text, names_text, limit):
    canon = [l.strip() for l in canon_text.splitlines() if l.strip()]
    names = [l.rstrip("\n") for l in names_text.splitlines() if l.strip()]
    return [f"{n}\t{best_match(n, canon, limit)}" for n in names]
