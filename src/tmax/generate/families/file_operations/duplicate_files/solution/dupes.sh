#!/bin/bash
# Print the groups of identical files under a directory: one line per group, its relative
# paths sorted and separated by tabs, groups sorted.
export LC_ALL=C
LEVEL={{ level }}
cd "$1" || exit 1
test=(-type f)
if ((LEVEL >= 2)); then test+=(-size +0); fi
if ((LEVEL >= 3)); then
  find . -type d \( -name .cache -o -name @eaDir \) -prune -o "${test[@]}" -print0
else
  find . "${test[@]}" -print0
fi | xargs -0 -r sha256sum | sort | awk '
  { h = substr($0, 1, 64); p = substr($0, 67); sub(/^\.\//, "", p)
    if (h == prev) { group = group "\t" p; n++ }
    else { if (n > 1) print group; group = p; n = 1; prev = h } }
  END { if (n > 1) print group }' | sort
