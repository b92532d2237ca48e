def fasta_records(text):
    """[(id, sequence)] from FASTA text (id = header up to the first whitespace)."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(">"):
            records.append([line[1:].split()[0] if line[1:].split() else "", ""])
        elif line and records:
            records[-1][1] += line
    return [(rid, seq) for rid, seq in records]


def record_row(rid, seq, level):
    seq = seq.upper()
    row = [rid, str(len(seq)), str(seq.count("G") + seq.count("C"))]
    if level >= 2:
        row.append(str(seq.count("N")))
    return "\t".join(row)


def fasta_problem(text, level):
    """None when ``text`` is valid FASTA under the task's rules, else a reason."""
    if not text:
        return "empty file"
    if not text.endswith("\n"):
        return "no final newline"
    lines = text[:-1].split("\n")
    seen, current, count = set(), None, 0
    for line in lines:
        if line.startswith(">"):
            if current is not None and count == 0:
                return "record without sequence"
            rid = line[1:]
            if not rid or rid[0] in " \t" or any(c.isspace() and c != " " for c in rid):
                return "bad header"
            rid = rid.split()[0]
            if level >= 2 and rid in seen:
                return "duplicate id"
            seen.add(rid)
            current, count = rid, 0
        else:
            if current is None:
                return "sequence before header"
            if line == "":
                return "blank line"
            if any(c not in "ACGTN" for c in line):
                return "bad residue"
            if level >= 3 and len(line) > 60:
                return "line longer than 60"
            count += len(line)
    if current is None or count == 0:
        return "record without sequence"
    return None
