#!/bin/bash
# Usage: stars.sh IMAGE.png (8-bit RGB, filter 0, one IDAT) -> star report on stdout
set -euo pipefail
f="$1"
w=$(od -An -tu4 --endian=big -j16 -N4 "$f" | tr -d ' ')
h=$(od -An -tu4 --endian=big -j20 -N4 "$f" | tr -d ' ')
len=$(od -An -tu4 --endian=big -j33 -N4 "$f" | tr -d ' ')
{ printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03'; tail -c +44 "$f" | head -c $((len - 2)); } \
  | { gzip -dc 2>/dev/null || true; } | od -An -v -tu1 -w$((w * 3 + 1)) \
  | awk -v W="$w" -v H="$h" -v T={{ threshold }} -v MS={{ min_size }} '
{ y = NR - 1
  for (x = 0; x < W; x++) b[y * W + x] = (int(($(3*x+2) + $(3*x+3) + $(3*x+4)) / 3) >= T) }
END {
  count = 0
  for (s = 0; s < W * H; s++) {
    if (!b[s] || seen[s]) continue
    seen[s] = 1; top = 0; st[top++] = s; n = 0; sx = 0; sy = 0
    while (top > 0) {
      i = st[--top]; x = i % W; y = int(i / W); n++; sx += x; sy += y
      if (x + 1 < W && b[i + 1] && !seen[i + 1]) { seen[i + 1] = 1; st[top++] = i + 1 }
      if (x > 0 && b[i - 1] && !seen[i - 1]) { seen[i - 1] = 1; st[top++] = i - 1 }
      if (y + 1 < H && b[i + W] && !seen[i + W]) { seen[i + W] = 1; st[top++] = i + W }
      if (y > 0 && b[i - W] && !seen[i - W]) { seen[i - W] = 1; st[top++] = i - W } }
    if (n < MS) continue
    cx = int((20 * sx + n) / (2 * n)); cy = int((20 * sy + n) / (2 * n))
    out[++count] = int(cx / 10) "." cx % 10 " " int(cy / 10) "." cy % 10 " " n }
  print "count " count
  for (k = 1; k <= count; k++) print out[k] }'
