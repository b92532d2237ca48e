{{ oracle }}
import sys

LEVEL = {{ level }}

if __name__ == "__main__":
    texts = []
    for path in sys.argv[1:]:
        with open(path) as handle:
            texts.append(handle.read())
    sys.stdout.write(status_lines(texts, LEVEL))
