#!/usr/bin/env python3
"""Replay key-value journals given as arguments; print the final state (key=value, by key).

Counters go to standard error. At level 4 a first argument ending in .kv is a snapshot."""
import re
import sys

LEVEL = {{ level }}

{{ functions }}


def main():
    paths = sys.argv[1:]
    snapshot = None
    if LEVEL >= 4 and paths and paths[0].endswith(".kv"):
        snapshot = kv_load(open(paths.pop(0), encoding="utf-8").read())
    texts = [open(p, encoding="utf-8").read() for p in paths]
    state, counters = kv_replay(texts, LEVEL, snapshot)
    sys.stdout.write(kv_dump(state))
    sys.stderr.write(kv_stats(state, counters, LEVEL))


if __name__ == "__main__":
    main()
