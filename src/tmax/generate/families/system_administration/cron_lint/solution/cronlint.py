{{ oracle }}
import sys

LEVEL = {{ level }}

if __name__ == "__main__":
    with open(sys.argv[1]) as handle:
        for number in invalid_lines(handle.read(), LEVEL):
            print(number)
