import re


def parse_rules(text):
    rules = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and not fields[0].startswith("#"):
            rules[fields[0].lower()] = fields[1]
    return rules


def destination(name, rules):
    """category/year/name for a file called ``name``."""
    base = name[1:] if name.startswith(".") else name
    ext = base.rsplit(".", 1)[1].lower() if "." in base else ""
    category = rules.get(ext, "misc") if ext else "misc"
    found = re.search(r"([0-9]{4})-[0-9]{2}-[0-9]{2}", name)
    return f"{category}/{found.group(1) if found else 'undated'}/{name}"


def plan(rels, rules):
    """[(source relative path, destination relative path)] in byte order of the source."""
    return [(rel, destination(rel.rsplit("/", 1)[-1], rules))
            for rel in sorted(rels, key=lambda r: r.encode("utf-8"))]
