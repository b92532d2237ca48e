#!/usr/bin/env python3
"""Print the groups of identical files under a directory: one line per group, its relative
paths sorted and separated by tabs, groups sorted."""
import sys

LEVEL = {{ level }}
DD_EXCLUDED = (".cache", "@eaDir")

{{ functions }}


if __name__ == "__main__":
    sys.stdout.write(dd_text(dd_groups(dd_scan(sys.argv[1]), LEVEL)))
