{{ oracle }}
import os
import sys

KEEP, LEVEL = {{ keep }}, {{ level }}

if __name__ == "__main__":
    for name in to_delete(os.listdir(sys.argv[1]), KEEP, LEVEL):
        print(name)
