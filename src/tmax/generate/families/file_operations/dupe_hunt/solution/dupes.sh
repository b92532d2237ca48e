#!/bin/bash
# Usage: dupes.sh DIR -> one line per group of identical non-empty files (relative paths)
set -euo pipefail
cd -- "$1"
find . -type f -size +0c -printf '%P\n' | LC_ALL=C sort | while IFS= read -r f; do
  printf '%s %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"
done | LC_ALL=C sort -s -k1,1 \
  | awk '$1 == h {g = g " " $2; n++; next}
         {if (n > 1) print g; h = $1; g = $2; n = 1}
         END {if (n > 1) print g}' | LC_ALL=C sort
