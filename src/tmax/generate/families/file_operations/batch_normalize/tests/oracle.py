import csv


def normalize(data):
    """(UTF-8 LF text, encoding, line endings) of one legacy text file."""
    try:
        text, enc = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, enc = data.decode("latin-1"), "latin-1"
    if text.startswith("\ufeff"):
        text = text[1:]
    eol = "crlf" if "\r\n" in text else "lf"
    return text.replace("\r\n", "\n"), enc, eol


def as_records(text):
    rows = list(csv.reader(io.StringIO(text)))
    header, out = rows[0], []
    for row in rows[1:]:
        rec = {}
        for key, value in zip(header, row):
            rec[key] = int(value) if re.fullmatch(r"-?[0-9]+", value) else value
        out.append(rec)
    return out
