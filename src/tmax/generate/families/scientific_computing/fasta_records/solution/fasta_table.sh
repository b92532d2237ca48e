#!/bin/bash
# Usage: fasta.sh FILE -> id, length, G+C count (and N count) per record, tab separated
set -euo pipefail
awk -v L={{ level }} '
function flush() { if (have) { s = toupper(seq); gc = gsub(/[GC]/, "", s); s2 = toupper(seq)
  nn = gsub(/N/, "", s2); line = id "\t" length(seq) "\t" gc; if (L >= 2) line = line "\t" nn
  print line } }
/^>/ { flush(); id = substr($1, 2); seq = ""; have = 1; next }
{ gsub(/[ \t\r]/, ""); if (have) seq = seq $0 }
END { flush() }' "$1"
