#!/usr/bin/env python3
"""Decode sealer tokens read on stdin (one per line) back to their plaintexts."""
import re
import sys

{{ consts }}

{{ unseal }}


def main():
    for line in sys.stdin.read().splitlines():
        text = unseal(line.strip(), KEY, STEP, LEVEL)
        print("INVALID" if text is None else text)


if __name__ == "__main__":
    main()
