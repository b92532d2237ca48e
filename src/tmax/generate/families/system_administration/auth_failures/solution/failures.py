{{ oracle }}
import sys

if __name__ == "__main__":
    texts = []
    for path in sys.argv[1:]:
        with open(path, errors="replace") as handle:
            texts.append(handle.read())
    sys.stdout.write(ranking(auth_scan(texts)[0]))
