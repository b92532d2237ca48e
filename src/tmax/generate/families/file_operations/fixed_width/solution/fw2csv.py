#!/usr/bin/env python3
"""Convert a fixed-width export to CSV: {{ tool_name }} LAYOUT FILE (CSV on stdout, UTF-8;
rejected records as `LINE REASON` on stderr)."""
import sys

LEVEL = {{ level }}

{{ functions }}


def main():
    layout = fw_parse_layout(open(sys.argv[1], encoding="utf-8").read())
    header, rows, rejects = fw_convert(open(sys.argv[2], "rb").read(), layout, LEVEL)
    sys.stdout.buffer.write(fw_csv_text(header, rows).encode("utf-8"))
    for number, reason in rejects:
        print(number, reason, file=sys.stderr)


if __name__ == "__main__":
    main()
