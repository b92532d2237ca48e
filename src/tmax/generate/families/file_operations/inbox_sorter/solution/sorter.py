{{ oracle }}
import os
import shutil
import sys

if __name__ == "__main__":
    rules_path, src, dest = sys.argv[1:4]
    with open(rules_path, encoding="utf-8") as handle:
        rules = parse_rules(handle.read())
    rels = []
    for folder, _, names in os.walk(src):
        rels += [os.path.relpath(os.path.join(folder, n), src) for n in names]
    for rel, target in plan(rels, rules):
        os.makedirs(os.path.dirname(os.path.join(dest, target)), exist_ok=True)
        shutil.move(os.path.join(src, rel), os.path.join(dest, target))
        sys.stdout.write(f"{rel}\t{target}\n")
