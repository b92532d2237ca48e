#!/bin/bash
# Usage: imgstat.sh <png> stats|blobs <limit>. Handles single-IDAT, filter-0 RGB PNGs.
set -euo pipefail
png=$1
mode=$2
limit=$3
u32() { od -An -tu1 -j "$1" -N4 "$png" | awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }'; }
w=$(u32 16)
h=$(u32 20)
len=$(u32 33)
{
  printf '\037\213\010\000\000\000\000\000\000\003'
  tail -c +42 "$png" | head -c "$len" | tail -c +3
} | { gzip -dc 2>/dev/null || true; } | od -An -v -tu1 \
  | awk -v w="$w" -v h="$h" -v limit="$limit" -v mode="$mode" '
{
  for (i = 1; i <= NF; i++) {
    col = pos % (3 * w + 1); row = int(pos / (3 * w + 1)); pos++
    if (col == 0) continue
    x = int((col - 1) / 3); c = (col - 1) % 3
    sum[c] += $i; acc[x, row] += $i
  }
}
END {
  n = 0
  for (y = 0; y < h; y++) for (x = 0; x < w; x++) if (acc[x, y] >= limit) {
    b[x, y] = 1; n++
    if (n == 1 || x < x0) x0 = (n == 1 || x < x0) ? x : x0
    if (n == 1) { y0 = y; x1 = x; y1 = y; x0 = x }
    if (x > x1) x1 = x
    if (x < x0) x0 = x
    y1 = y
  }
  if (mode == "stats") {
    print "width " w; print "height " h; print "bright " n
    area = w * h
    printf "mean_rgb %d %d %d\n", int(sum[0] / area), int(sum[1] / area), int(sum[2] / area)
    if (n) print "bbox " x0 " " y0 " " x1 " " y1; else print "bbox none"
    exit
  }
  print "blob,area,x,y"
  id = 0
  for (y = 0; y < h; y++) for (x = 0; x < w; x++) if (((x, y) in b) && !((x, y) in seen)) {
    id++; top = 1; sx[1] = x; sy[1] = y; seen[x, y] = 1; area = 0
    while (top > 0) {
      cx = sx[top]; cy = sy[top]; top--; area++
      for (d = 0; d < 4; d++) {
        nx = cx + (d == 0) - (d == 1); ny = cy + (d == 2) - (d == 3)
        if (((nx, ny) in b) && !((nx, ny) in seen)) {
          seen[nx, ny] = 1; top++; sx[top] = nx; sy[top] = ny
        }
      }
    }
    print id "," area "," x "," y
  }
}'
