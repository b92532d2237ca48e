#!/bin/bash
# Usage: rollup.sh FILE... -> hourly per-sensor aggregates (UTC) as CSV on stdout
set -euo pipefail
echo "hour,sensor,count,min,max,mean"
TZ=UTC gawk -F, '
FNR == 1 { next }
{ sub(/\r$/, "") }
NF != 3 { next }
$1 !~ /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})$/ { next }
$3 !~ /^[0-9]+(\.[0-9])?$/ { next }
{ t = mktime(substr($1, 1, 4) " " substr($1, 6, 2) " " substr($1, 9, 2) " " \
             substr($1, 12, 2) " " substr($1, 15, 2) " " substr($1, 18, 2))
  z = substr($1, 20)
  if (z != "Z") { sign = (substr(z, 1, 1) == "-") ? -1 : 1
    t -= sign * (substr(z, 2, 2) * 3600 + substr(z, 5, 2) * 60) }
  split($3, p, "."); v = p[1] * 10 + (p[2] == "" ? 0 : p[2])
  key = strftime("%Y-%m-%dT%H", t) "," $2
  n[key]++; s[key] += v
  if (!(key in lo) || v < lo[key]) lo[key] = v
  if (!(key in hi) || v > hi[key]) hi[key] = v }
END { for (k in n) { m = int((20 * s[k] + n[k]) / (2 * n[k]))
    printf "%s,%d,%d.%d,%d.%d,%d.%02d\n", k, n[k], int(lo[k] / 10), lo[k] % 10,
      int(hi[k] / 10), hi[k] % 10, int(m / 100), m % 100 } }' "$@" | LC_ALL=C sort
