{{ oracle }}
import sys

LEVEL = {{ level }}

if __name__ == "__main__":
    with open(sys.argv[1], newline="") as handle:
        keep, _ = filter_signups(handle.read(), LEVEL)
    sys.stdout.write("".join(line + "\n" for _, line in keep))
