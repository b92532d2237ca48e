#!/bin/bash
# Usage: audit.sh MANIFEST ARCHIVE... -> "STATUS NAME" per member, sorted by name
set -euo pipefail
manifest=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/have"
i=0
for archive in "$@"; do
  i=$((i + 1))
  mkdir -p "$work/$i"
  case "$archive" in
    *.zip) unzip -q -o "$archive" -d "$work/$i" ;;
    *) tar -xf "$archive" -C "$work/$i" ;;
  esac
  (cd "$work/$i" && find . -type f -printf '%P\n' | while IFS= read -r f; do
    printf '%s %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"
  done) >> "$work/have"
done
sed 's/^\([0-9a-f]*\)  *\*\{0,1\}/\1 /' "$manifest" | grep . > "$work/want" || true
awk 'FILENAME == ARGV[1] {want[$2] = $1; next} {have[$2] = $1}
     END {
       for (n in want) print (n in have ? (have[n] == want[n] ? "OK" : "CORRUPT") : "MISSING"), n
       for (n in have) if (!(n in want)) print "EXTRA", n
     }' "$work/want" "$work/have" | LC_ALL=C sort -k2,2
