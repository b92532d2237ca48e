#!/usr/bin/env python3
"""Upload-name gate: one verdict line (ACCEPT / REJECT RULE) per name read on stdin."""
import re
import sys

{{ consts }}

{{ core }}


def main():
    for raw in sys.stdin.buffer.read().decode("latin-1").splitlines():
        print(upload_line(raw, LEVEL, ALLOWED, MAXLEN))


if __name__ == "__main__":
    main()
