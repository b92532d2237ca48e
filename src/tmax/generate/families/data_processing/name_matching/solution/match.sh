#!/bin/bash
# Usage: match.sh CANONICAL NAMES -> "name<TAB>best canonical" per name
set -euo pipefail
LC_ALL=C awk -v limit={{ limit }} '
function norm(s) { s = tolower(s); gsub(/[^a-z0-9 ]/, "", s); gsub(/ +/, " ", s)
  sub(/^ /, "", s); sub(/ $/, "", s); return s }
function lev(a, b,   i, j, la, lb, d, x, y, z) {
  la = length(a); lb = length(b)
  for (j = 0; j <= lb; j++) d[0, j] = j
  for (i = 1; i <= la; i++) { d[i, 0] = i
    for (j = 1; j <= lb; j++) {
      x = d[i-1, j] + 1; y = d[i, j-1] + 1
      z = d[i-1, j-1] + (substr(a, i, 1) != substr(b, j, 1))
      d[i, j] = (x < y) ? ((x < z) ? x : z) : ((y < z) ? y : z) } }
  return d[la, lb] }
NR == FNR { if ($0 ~ /[^ ]/) { sub(/^ +/, ""); sub(/ +$/, ""); c[++nc] = $0
    k[nc] = norm($0) }; next }
$0 ~ /[^ ]/ { key = norm($0); best = ""; bd = -1
  for (i = 1; i <= nc; i++) { dd = lev(key, k[i])
    if (bd < 0 || dd < bd || (dd == bd && c[i] < best)) { bd = dd; best = c[i] } }
  if (limit != "None" && bd > limit + 0) best = "UNMATCHED"
  print $0 "\t" best }' "$1" "$2"
