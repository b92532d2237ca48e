#!/usr/bin/env python3
"""Crack a credential dump with a wordlist: prints user:password lines, sorted by user."""
import hashlib
import sys

LEVEL = {{ level }}

{{ sources }}


def main():
    dump = open(sys.argv[1], encoding="utf-8").read()
    words = [w.strip() for w in open(sys.argv[2], encoding="utf-8") if w.strip()]
    for user, password in sorted(pw_crack(dump, words, LEVEL).items()):
        print(f"{user}:{password}")


if __name__ == "__main__":
    main()
