#!/usr/bin/env python3
"""Screen a tar archive before extraction: prints OK or REJECT RULE."""
import sys

LEVEL = {{ level }}
LIMITS = {{ limits | py }}
AG_RULES = ("absolute", "traversal", "link", "special", "duplicate", "count", "size")

{{ functions }}


if __name__ == "__main__":
    rule = ag_verdict(ag_members(open(sys.argv[1], "rb").read()), LEVEL, LIMITS)
    print("OK" if rule is None else "REJECT " + rule)
