{{ oracle }}
import os
import sys

if __name__ == "__main__":
    root, files = sys.argv[1], {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    files[os.path.relpath(path, root)] = handle.read()
    sys.stdout.write(dupe_text(files))
