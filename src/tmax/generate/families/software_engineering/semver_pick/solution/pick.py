#!/usr/bin/env python3
"""Pick versions: `pick INDEX` reads `package constraint` lines on stdin and prints
`package version` (or `package NONE`); `pick --sort INDEX` lists each package's versions."""
import re
import sys

LEVEL = {{ level }}

{{ functions }}


def main():
    if sys.argv[1] == "--sort":
        index = sv_index(open(sys.argv[2], encoding="utf-8").read())
        for package in sorted(index):
            print(package, " ".join(sv_sorted(index[package])))
        return
    index = sv_index(open(sys.argv[1], encoding="utf-8").read())
    for package, version in sv_resolve(index, sys.stdin.read(), LEVEL):
        print(package, version or "NONE")


if __name__ == "__main__":
    main()
