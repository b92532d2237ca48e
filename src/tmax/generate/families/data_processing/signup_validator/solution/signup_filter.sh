#!/bin/bash
# Usage: signup_filter.sh FILE -> the valid records, unchanged, in input order
set -euo pipefail
LC_ALL=C awk -v L={{ level }} '
function okdate(s,   y, m, d, leap, dim) {
  if (s !~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$/) return 0
  if (L < 2) return 1
  y = substr(s, 1, 4) + 0; m = substr(s, 6, 2) + 0; d = substr(s, 9, 2) + 0
  leap = (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
  split("31 28 31 30 31 30 31 31 30 31 30 31", dim, " "); if (leap) dim[2] = 29
  return m >= 1 && m <= 12 && d >= 1 && d <= dim[m] }
{ n = split($0, f, ","); if (n != 4) next
  if (f[1] !~ /^{{ prefix }}[0-9][0-9][0-9][0-9][0-9][0-9]$/) next
  if (f[2] !~ /^[a-z0-9+_-]+(\.[a-z0-9+_-]+)*@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z][a-z]+$/) next
  split(f[2], parts, "."); tld = parts[length(parts)]; if (length(tld) > 10) next
  if (!okdate(f[3])) next
  if (f[4] !~ /^-?[0-9]+\.[0-9][0-9]$/) next
  if (L >= 3 && (f[4] ~ /^-/ || f[4] + 0 > {{ cap }})) next
  if (L >= 4) { if (f[1] in seen) next; seen[f[1]] = 1 }
  print }' "$1"
