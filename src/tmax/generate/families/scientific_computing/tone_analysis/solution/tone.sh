#!/bin/bash
# Usage: tone.sh RECORDING  (16-bit mono WAV, or text: "rate N" then one sample a line)
set -euo pipefail
f="$1"
if [ "${f##*.}" = wav ]; then
  rate=$(od -An -t u4 -j 24 -N 4 "$f" | tr -d ' ')
else
  rate=$(head -n 1 "$f" | awk '{print $2}')
fi
if [ "${f##*.}" = wav ]; then
  od -An -v -t d2 -j 44 "$f" | tr -s ' ' '\n' | grep -v '^$'
else
  tail -n +2 "$f" | grep -v '^$'
fi | awk -v mode={{ mode }} -v L={{ level }} -v T={{ threshold }} -v rate="$rate" '
{ s = $1 + 0; x[n] = s; a = (s < 0) ? -s : s; if (a > peak) peak = a
  sum += s; ss += s * s; if (n > 0 && ((p < 0) != (s < 0))) cr++
  if (a > T) over++; p = s; n++ }
END {
  if (mode == "freq") {
    h = 0.3 * peak; armed = 0; cnt = 0
    for (i = 1; i < n; i++) {
      if (x[i-1] < -h) armed = 1
      if (armed && x[i-1] < 0 && x[i] >= 0) {
        t = (i - 1) + x[i-1] / (x[i-1] - x[i]); if (cnt == 0) first = t
        last = t; cnt++; armed = 0 }
    }
    printf "%.2f\n", (cnt - 1) * rate / (last - first); exit }
  line = "samples=" n " peak=" peak
  if (L >= 2) line = line " rms=" int(sqrt(ss / n))
  if (L >= 3) line = line " crossings=" cr + 0 " over=" over + 0
  if (L >= 4) line = line " mean=" int(sum / n)
  print line }'
