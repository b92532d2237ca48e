#!/bin/bash
export LC_ALL=C
awk -F, -v report="$2" -v positive="$3" '
function norm(s) { gsub(/^[ \t\r]+|[ \t\r]+$/, "", s); return tolower(s) }
NR == 1 { next }
NF >= 3 {
  t = norm($2); p = norm($3)
  if (t == "") next
  n++; truth[n] = t; pred[n] = p; score[n] = ($4 == "" ? 0 : $4 + 0)
  m[t, p]++; seen[t] = 1; seen[p] = 1
}
END {
  k = 0
  for (lab in seen) {
    k++; i = k
    while (i > 1 && labs[i - 1] > lab) { labs[i] = labs[i - 1]; i-- }
    labs[i] = lab
  }
  if (report == "confusion") {
    line = "truth"; for (j = 1; j <= k; j++) line = line "," labs[j]; print line
    for (i = 1; i <= k; i++) {
      line = labs[i]; for (j = 1; j <= k; j++) line = line "," (m[labs[i], labs[j]] + 0); print line
    }
    exit
  }
  if (report == "per_class") print "label,precision,recall,f1,support"
  total = 0; hits = 0
  for (i = 1; i <= k; i++) {
    lab = labs[i]; tp = m[lab, lab] + 0; predicted = 0; support = 0; hits += tp
    for (j = 1; j <= k; j++) { predicted += m[labs[j], lab]; support += m[lab, labs[j]] }
    pr = predicted ? tp / predicted : 0; rc = support ? tp / support : 0
    f1 = (pr + rc > 0) ? 2 * pr * rc / (pr + rc) : 0
    total += f1
    if (report == "per_class") printf "%s,%.4f,%.4f,%.4f,%d\n", lab, pr, rc, f1, support
  }
  if (report == "summary")
    printf "{\"accuracy\": %.4f, \"macro_f1\": %.4f, \"rows\": %d}\n", hits / n, total / k, n
  if (report == "auc") {
    positive = norm(positive); np = 0; nn = 0
    for (i = 1; i <= n; i++) if (truth[i] == positive) ps[++np] = score[i]; else ns[++nn] = score[i]
    twice = 0
    for (i = 1; i <= np; i++) for (j = 1; j <= nn; j++)
      twice += (ps[i] > ns[j]) ? 2 : (ps[i] == ns[j] ? 1 : 0)
    printf "%.4f\n", twice / (2 * np * nn)
  }
}' "$1"
