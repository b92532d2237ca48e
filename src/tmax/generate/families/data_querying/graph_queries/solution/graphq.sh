#!/bin/bash
set -euo pipefail
export LC_ALL=C
edges=$1
mode=$2
LOAD='
NR > 1 && NF >= 2 {
  a = $1; b = $2
  if (!(a in seen)) { seen[a] = 1; nodes[++n] = a }
  if (!(b in seen)) { seen[b] = 1; nodes[++n] = b }
  if (a != b && !((a, b) in e)) {
    e[a, b] = 1; e[b, a] = 1; deg[a]++; deg[b]++
    nb[a] = nb[a] " " b; nb[b] = nb[b] " " a
  }
}
function bfs(s,   head, tail, u, k, m, parts, v) {
  split("", dist); head = 1; tail = 1; queue[1] = s; dist[s] = 0
  while (head <= tail) {
    u = queue[head++]; m = split(nb[u], parts, " ")
    for (k = 1; k <= m; k++) {
      v = parts[k]
      if (!(v in dist)) { dist[v] = dist[u] + 1; queue[++tail] = v }
    }
  }
}'
case "$mode" in
  degrees)
    echo "node,degree"
    awk -F, "$LOAD"' END { for (i = 1; i <= n; i++) print nodes[i] "," (deg[nodes[i]] + 0) }' \
      "$edges" \
      | sort -t, -k2,2nr -k1,1
    ;;
  components)
    awk -F, "$LOAD"' END {
      for (i = 1; i <= n; i++) if (!(nodes[i] in comp)) {
        c++; bfs(nodes[i]); for (v in dist) comp[v] = c
      }
      for (v in comp) print comp[v] "\t" v }' "$edges" \
      | sort -t "$(printf '\t')" -k1,1n -k2,2 \
      | awk -F'\t' '{ if ($1 != last && NR > 1) { print size "\t" first "\t" line; line = "" }
          if ($1 != last) { size = 0; first = $2 } last = $1; size++
          line = (line == "" ? $2 : line " " $2) }
        END { if (NR) print size "\t" first "\t" line }' \
      | sort -t "$(printf '\t')" -k1,1nr -k2,2 | cut -f3
    ;;
  dist)
    echo "node,hops"
    awk -F, -v s="$3" "$LOAD"' END {
      if (s in seen) { bfs(s); for (v in dist) print v "," dist[v] } }' \
      "$edges" | sort -t, -k2,2n -k1,1
    ;;
  path)
    awk -F, -v s="$3" -v t="$4" "$LOAD"' END {
      if (!(t in seen)) { print "none"; exit }
      bfs(t)
      if (!(s in dist)) { print "none"; exit }
      u = s; out = s
      while (u != t) {
        best = ""; m = split(nb[u], parts, " ")
        for (k = 1; k <= m; k++) {
          v = parts[k]
          if (dist[v] == dist[u] - 1 && (best == "" || v < best)) best = v
        }
        u = best; out = out " -> " u
      }
      print out }' "$edges"
    ;;
esac
