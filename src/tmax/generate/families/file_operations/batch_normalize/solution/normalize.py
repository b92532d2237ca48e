import io
import re

{{ oracle }}
import sys

if __name__ == "__main__":
    with open(sys.argv[1], "rb") as handle:
        data = handle.read()
    sys.stdout.buffer.write(normalize(data)[0].encode("utf-8"))
