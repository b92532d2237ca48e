"""Command line: python3 -m semverlite pick INDEX < requirements, or sort INDEX."""

import sys

from . import max_satisfying, sort_versions


def _index(path):
    index = {}
    for line in open(path, encoding="utf-8"):
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#"):
            index.setdefault(parts[0], []).append(parts[1])
    return index


def main(argv):
    command, path = argv[1], argv[2]
    index = _index(path)
    if command == "sort":
        for package in sorted(index):
            print(package, " ".join(sort_versions(index[package])))
        return 0
    wanted = {}
    for line in sys.stdin:
        line = line.strip()
        if line and not line.startswith("#"):
            package, _, constraint = line.partition(" ")
            wanted.setdefault(package, []).append(constraint.strip())
    for package, constraints in wanted.items():
        print(package, max_satisfying(index.get(package, []), constraints) or "NONE")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
