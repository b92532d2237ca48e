#!/bin/bash
# Usage: health_report.sh LOG... -> "SERVICE STATE FAILURES [AVAILABILITY]" per service
set -euo pipefail
cat "$@" | awk 'NF == 4 && ($3 == "ok" || $3 == "fail" || $3 == "degraded")' \
  | LC_ALL=C sort | awk -v L={{ level }} '
{ st[$2] = $3; n[$2]++; if ($3 == "fail") f[$2]++; if ($3 == "ok") ok[$2]++ }
END { for (s in n) { line = s " " st[s] " " f[s] + 0
    if (L >= 2) { p = int((2000 * ok[s] + n[s]) / (2 * n[s]))
      line = line " " int(p / 10) "." p % 10 }
    print line } }' | LC_ALL=C sort
