#!/usr/bin/env python3
"""Print the build order of a manifest (`name: dep dep` lines), one package per line."""
import sys

{{ functions }}


def main():
    order, _blocked = bo_order(bo_parse(open(sys.argv[1], encoding="utf-8").read()))
    sys.stdout.write("".join(p + "\n" for p in order))


if __name__ == "__main__":
    main()
