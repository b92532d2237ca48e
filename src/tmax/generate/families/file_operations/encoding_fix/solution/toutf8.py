#!/usr/bin/env python3
"""Convert one vendor text file to clean UTF-8 on standard output."""
import sys

LEVEL = {{ level }}

{{ functions }}


if __name__ == "__main__":
    if sys.argv[1] == "--detect":
        print(ef_detect(open(sys.argv[2], "rb").read()))
    else:
        sys.stdout.buffer.write(ef_convert(open(sys.argv[1], "rb").read(), LEVEL))
