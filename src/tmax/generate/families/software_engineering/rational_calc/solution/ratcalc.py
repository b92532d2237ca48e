#!/usr/bin/env python3
"""Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR."""
import sys

{{ functions }}


def main():
    for line in sys.stdin.read().splitlines():
        print(rc_eval(line))


if __name__ == "__main__":
    main()
