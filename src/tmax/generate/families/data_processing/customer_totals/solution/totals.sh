#!/bin/bash
# Usage: totals.sh FILE... -> customer totals CSV on stdout
set -euo pipefail
awk -F, -v L={{ level }} '
FNR == 1 || NF < 5 { next }
{ if (L >= 2) { if ($1 in seen) next; seen[$1] = 1 }
  split($4, p, "."); c = p[1] * 100 + substr(p[2] "00", 1, 2)
  if ($5 == "settled") v = c; else if ($5 == "refund" && L >= 3) v = -c; else next
  tot[$3] += v; cnt[$3]++ }
END { for (k in tot) {
    t = tot[k]; s = (t < 0) ? "-" : ""; a = (t < 0) ? -t : t
    line = sprintf("%s,%s%d.%02d", k, s, int(a / 100), a % 100)
    if (L >= 4) line = line "," cnt[k]
    print line } }' "$@" | LC_ALL=C sort > /tmp/totals.$$
if [ {{ level }} -ge 4 ]; then echo "customer,total,count"; else echo "customer,total"; fi
cat /tmp/totals.$$
rm -f /tmp/totals.$$
