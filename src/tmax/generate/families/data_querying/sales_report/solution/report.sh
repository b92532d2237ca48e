#!/bin/bash
set -euo pipefail
db=$1
out=$2
mkdir -p "$out"
q() { sqlite3 -header -separator , "$db" "$1"; }
q "{{ queries["region_revenue.csv"] }}" > "$out/region_revenue.csv"
if [ {{ level }} -ge 2 ]; then
  q "{{ queries["top_customers.csv"] }}" > "$out/top_customers.csv"
fi
if [ {{ level }} -ge 3 ]; then
  cols=""
  while IFS= read -r cat; do
    cols+=", SUM(CASE WHEN p.category = '$cat' THEN oi.qty * p.price_cents ELSE 0 END)"
    cols+=" AS \"$cat\""
  done < <(sqlite3 "$db" "SELECT DISTINCT category FROM products ORDER BY 1")
  q "SELECT substr(o.order_date, 1, 7) AS month$cols {{ queries["pivot_base"] }} GROUP BY month ORDER BY month;" \
    > "$out/monthly_by_category.csv"
fi
if [ {{ level }} -ge 4 ]; then
  q "{{ queries["region_leaders.csv"] }}" > "$out/region_leaders.csv"
  sqlite3 "$db" "{{ queries["summary.json"] }}" > "$out/summary.json"
fi
