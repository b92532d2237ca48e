#!/bin/bash
# Nearest class centroid with per-feature within-class scaling; missing cells skipped.
export LC_ALL=C
awk -F, -v train="$1" '
BEGIN {
  n = 0
  while ((getline line < train) > 0) {
    if (n++ == 0) continue
    m = split(line, f, ","); d = m - 1; lab = f[m]; labs[lab] = 1; rows[n] = line
    for (i = 1; i <= d; i++) if (f[i] != "") { sum[lab, i] += f[i]; cnt[lab, i]++ }
  }
  for (lab in labs) for (i = 1; i <= d; i++)
    mean[lab, i] = cnt[lab, i] ? sum[lab, i] / cnt[lab, i] : 0
  for (r = 2; r <= n; r++) {
    split(rows[r], f, ","); lab = f[d + 1]
    for (i = 1; i <= d; i++) if (f[i] != "") { var[i] += (f[i] - mean[lab, i]) ^ 2; seen[i]++ }
  }
  for (i = 1; i <= d; i++) var[i] = (seen[i] ? var[i] / seen[i] : 0) + 1e-9
}
FNR == 1 { next }
{
  best = -1
  for (lab in labs) {
    dist = 0
    for (i = 1; i <= d; i++) if ($i != "") dist += ($i - mean[lab, i]) ^ 2 / var[i]
    if (best < 0 || dist < best || (dist == best && lab < pick)) { best = dist; pick = lab }
  }
  print pick
  fflush()
}' "$2"
