#!/bin/bash
# Answer stock queries (one per stdin line) from the CSV files in $1.
export LC_ALL=C
exec awk -v dir="$1" '
function load(file, kind,   line, f, seen) {
  seen = 0
  while ((getline line < file) > 0) {
    if (seen++ == 0) continue
    split(line, f, ",")
    if (kind == "price") { price[f[1]] = f[2] + 0; continue }
    stock[f[1] SUBSEP f[2]] += f[3]; total[f[1]] += f[3]; wh[f[2]] = 1
  }
  close(file)
}
BEGIN {
  load(dir "/stock.csv", "stock"); load(dir "/moves.csv", "stock"); load(dir "/prices.csv", "price")
}
{
  n = split($0, q, " ")
  if (n == 0) next
  cmd = q[1]; arg = q[2]
  if (cmd == "STOCK") reply = (arg in total) ? total[arg] : "UNKNOWN"
  else if ((cmd == "VALUE" || cmd == "WAREHOUSE") && !(arg in wh)) reply = "UNKNOWN"
  else if (cmd == "VALUE") {
    sum = 0
    for (key in stock) { split(key, k, SUBSEP); if (k[2] == arg) sum += stock[key] * price[k[1]] }
    reply = sum
  } else if (cmd == "WAREHOUSE") {
    cnt = 0; units = 0
    for (key in stock) {
      split(key, k, SUBSEP)
      if (k[2] == arg && stock[key] > 0) { cnt++; units += stock[key] }
    }
    reply = cnt " " units
  } else if (cmd == "LOW" && arg ~ /^-?[0-9]+$/) {
    m = 0
    for (s in total) if (total[s] < arg + 0) {
      m++; i = m
      while (i > 1 && low[i - 1] > s) { low[i] = low[i - 1]; i-- }
      low[i] = s
    }
    reply = "NONE"
    if (m > 0) { reply = low[1]; for (i = 2; i <= m; i++) reply = reply "," low[i] }
  } else reply = "ERROR"
  print reply
  fflush()
}'
