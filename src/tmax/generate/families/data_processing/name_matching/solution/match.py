{{ oracle }}
import sys

LIMIT = {{ limit }}

if __name__ == "__main__":
    with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
        for line in match_lines(a.read(), b.read(), LIMIT):
            print(line)
