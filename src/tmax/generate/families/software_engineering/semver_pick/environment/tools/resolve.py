#!/usr/bin/env python3
"""Release tooling: resolve /app/{{ req_file }} against the registry index."""
import json
import os
import sys

sys.path.insert(0, "/app/vendor")
from semverlite import compare, max_satisfying, sort_versions  # noqa: E402

LEVEL = {{ level }}
index = {}
for line in open("/app/{{ index_file }}"):
    parts = line.split()
    if len(parts) >= 2 and not parts[0].startswith("#"):
        index.setdefault(parts[0], []).append(parts[1])
wanted = {}
for line in open("/app/{{ req_file }}"):
    line = line.strip()
    if line and not line.startswith("#"):
        package, _, constraint = line.partition(" ")
        wanted.setdefault(package, []).append(constraint.strip())
resolved = {p: max_satisfying(index.get(p, []), cs) for p, cs in wanted.items()}
os.makedirs("{{ out }}", exist_ok=True)
with open("{{ out }}/{{ res_file }}", "w") as out:
    for package, version in resolved.items():
        out.write(f"{package} {version or 'NONE'}\n")
if LEVEL >= 2:
    with open("{{ out }}/{{ ver_file }}", "w") as out:
        for package in sorted(index):
            out.write(package + " " + " ".join(sort_versions(index[package])) + "\n")
if LEVEL >= 3:
    with open("{{ out }}/{{ old_file }}", "w") as out:
        for package, version in resolved.items():
            stable = [v for v in index.get(package, []) if "-" not in v]
            if version and stable:
                latest = sort_versions(stable)[-1]
                if compare(version, latest) < 0:
                    out.write(f"{package} {version} {latest}\n")
if LEVEL >= 4:
    with open("{{ out }}/{{ lock_file }}", "w") as out:
        json.dump(resolved, out, indent=2)
