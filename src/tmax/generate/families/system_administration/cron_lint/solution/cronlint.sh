#!/bin/bash
# Usage: cronlint.sh CRONTAB -> line numbers of invalid entries, one per line
set -euo pipefail
LC_ALL=C awk -v L={{ level }} '
BEGIN { lo[1] = 0; hi[1] = 59; lo[2] = 0; hi[2] = 23; lo[3] = 1; hi[3] = 31
  lo[4] = 1; hi[4] = 12; lo[5] = 0; hi[5] = 7
  split("jan feb mar apr may jun jul aug sep oct nov dec", m, " ")
  for (i = 1; i <= 12; i++) name[4, m[i]] = i
  split("sun mon tue wed thu fri sat", d, " ")
  for (i = 1; i <= 7; i++) name[5, d[i]] = i - 1
  split("@reboot @hourly @daily @weekly @monthly @yearly @annually", mm, " ")
  for (i in mm) macro[mm[i]] = 1 }
function val(t, k,   v) {
  if (t ~ /^[0-9]+$/) v = t + 0
  else if (L >= 2 && ((k, tolower(t)) in name)) v = name[k, tolower(t)]
  else return -1
  return (v >= lo[k] && v <= hi[k]) ? v : -1 }
function field_ok(f, k,   items, n, i, it, base, step, s, a, b, p, q) {
  n = split(f, items, ",")
  if (n == 0) return 0
  for (i = 1; i <= n; i++) {
    it = items[i]; s = index(it, "/"); base = it; step = ""
    if (s) { base = substr(it, 1, s - 1); step = substr(it, s + 1)
      if (step !~ /^[0-9]+$/ || step + 0 < 1) return 0 }
    if (base == "*") continue
    p = index(base, "-")
    if (p) { a = val(substr(base, 1, p - 1), k); b = val(substr(base, p + 1), k)
      if (a < 0 || b < 0 || b < a) return 0 }
    else { if (val(base, k) < 0 || s) return 0 } }
  return 1 }
{ line = $0; sub(/^[ \t]+/, "", line); sub(/[ \t\r\n\f\v]+$/, "", line)
  if (line == "" || line ~ /^#/) next
  if (L >= 4 && line ~ /^[A-Za-z_][A-Za-z0-9_]*=/) next
  if (L >= 3 && $1 ~ /^@/) { if (!($1 in macro) || NF < 2) print NR; next }
  if (NF < 6) { print NR; next }
  for (k = 1; k <= 5; k++) if (!field_ok($k, k)) { print NR; next } }' "$1"
