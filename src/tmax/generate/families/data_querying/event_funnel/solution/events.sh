#!/bin/bash
# Reports over <folder>/events.jsonl (and users.csv): events.sh <folder> <report>
export LC_ALL=C
dir=$1
report=$2
events() {
  jq -r '[.id, .ts, .user, .event, (.amount // 0)] | @tsv' "$dir/events.jsonl" \
    | awk -F'\t' '!seen[$1]++'
}
case "$report" in
  counts)
    echo "event,count"
    events | awk -F'\t' '{ n[$4]++ } END { for (e in n) print e "," n[e] }' \
      | sort -t, -k2,2nr -k1,1
    ;;
  top_buyers)
    echo "user,orders,revenue_cents"
    events | awk -F'\t' '$4 == "purchase" { o[$3]++; r[$3] += $5 }
      END { for (u in o) print u "," o[u] "," r[u] }' | sort -t, -k3,3nr -k1,1 | head -n {{ top_n }}
    ;;
  funnel)
    echo "step,users"
    events | sort -t "$(printf '\t')" -k3,3 -k2,2n | awk -F'\t' '
      $3 != user { user = $3; stage = 0; t = -1 }
      stage == 0 && $4 == "view" { stage = 1; t = $2; a++; next }
      stage == 1 && $4 == "cart" && $2 > t { stage = 2; t = $2; b++; next }
      stage == 2 && $4 == "purchase" && $2 > t { stage = 3; c++ }
      END { print "view," a + 0; print "cart," b + 0; print "purchase," c + 0 }'
    ;;
  by_country)
    echo "country,users,buyers,revenue_cents"
    events | awk -F'\t' -v users="$dir/users.csv" '
      BEGIN {
        while ((getline line < users) > 0) if (k++ > 0) { split(line, f, ","); c[f[1]] = f[2] }
      }
      {
        w = ($3 in c) ? c[$3] : "unknown"
        if (!($3 in seen)) { seen[$3] = 1; nu[w]++ }
        if ($4 == "purchase") { rev[w] += $5; if (!($3 in bought)) { bought[$3] = 1; nb[w]++ } }
      }
      END { for (w in nu) print w "," nu[w] "," nb[w] + 0 "," rev[w] + 0 }' \
      | sort -t, -k4,4nr -k1,1
    ;;
  *)
    echo "unknown report $report" >&2
    exit 1
    ;;
esac
