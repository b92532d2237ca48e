#!/bin/bash
# Usage: rotate.sh DIR -> names of backups to delete (sorted), nothing is removed
set -euo pipefail
ls -A "$1" | LC_ALL=C grep -E '^db-[0-9]{8}\.tar\.gz$' | LC_ALL=C sort -r \
  | awk -v keep={{ keep }} -v L={{ level }} '{ m = substr($0, 4, 6); k = (NR <= keep)
      if (L >= 2 && !(m in seen)) { seen[m] = 1; k = 1 }
      if (!k) print }' | LC_ALL=C sort
