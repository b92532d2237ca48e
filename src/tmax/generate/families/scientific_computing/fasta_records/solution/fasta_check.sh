#!/bin/bash
# Usage: fasta_check.sh FILE -> exit 0 when the file is valid FASTA, 1 otherwise
set -uo pipefail
f="$1"
[ -s "$f" ] || { echo "empty file" >&2; exit 1; }
[ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || { echo "no final newline" >&2; exit 1; }
LC_ALL=C awk -v L={{ level }} '
function bad(why) { print why > "/dev/stderr"; failed = 1; exit 1 }
/^>/ { if (cur != "" && count == 0) bad("record without sequence")
  rid = substr($0, 2)
  if (rid == "" || rid ~ /^[ \t]/ || rid ~ /[\t\r\v\f]/) bad("bad header")
  split(rid, w, " "); rid = w[1]
  if (L >= 2 && (rid in seen)) bad("duplicate id")
  seen[rid] = 1; cur = rid; count = 0; next }
{ if (cur == "") bad("sequence before header")
  if ($0 == "") bad("blank line")
  if ($0 ~ /[^ACGTN]/) bad("bad residue")
  if (L >= 3 && length($0) > 60) bad("line longer than 60")
  count += length($0) }
END { if (failed) exit 1
  if (cur == "" || count == 0) { print "record without sequence" > "/dev/stderr"; exit 1 } }' "$f"
