import sys

LEVEL = {{ level }}

{{ oracle }}

def main():
    report, train_path = sys.argv[1], sys.argv[2]
    with open(train_path) as handle:
        train = handle.read()
    other = None
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as handle:
            other = handle.read()
    sys.stdout.write(prep(report, train, LEVEL, other))


main()
