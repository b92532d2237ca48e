#!/usr/bin/env python3
"""Failed SSH password attempts per source address, from auth logs (plain or .gz)."""
import gzip
import re
import sys

{{ core }}


def main():
    text = ""
    for path in sys.argv[1:]:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            text += handle.read()
    sys.stdout.write(auth_table(auth_events(text)))


if __name__ == "__main__":
    main()
