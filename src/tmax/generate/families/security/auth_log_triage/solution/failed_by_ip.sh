#!/bin/bash
# Failed SSH password attempts per source address, from auth logs (plain or .gz).
set -euo pipefail
for log in "$@"; do
  case "$log" in
    *.gz) gzip -dc -- "$log" ;;
    *) cat -- "$log" ;;
  esac
done | awk '$5 ~ /^sshd\[[0-9]+\]:$/ {
  b = 6; n = 1
  if ($6 == "message" && $7 == "repeated" && $9 == "times:" && $10 == "[") { n = $8; b = 11 }
  if ($b == "Failed" && $(b + 1) == "password" && $(b + 2) == "for") {
    u = b + 3
    if ($u == "invalid" && $(u + 1) == "user") u += 2
    if ($(u + 1) == "from") count[$(u + 2)] += n
  }
}
END { for (ip in count) print ip, count[ip] }' | LC_ALL=C sort -k2,2nr -k1,1
