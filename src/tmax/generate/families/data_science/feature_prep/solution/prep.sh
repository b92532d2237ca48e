#!/bin/bash
# prep.sh <summary|features|apply|drift> <train.csv> [<other.csv>]
export LC_ALL=C
level={{ level }}
exec awk -F, -v report="$1" -v level="$level" '
function f4(x) { return sprintf("%.4f", x) }
function z(x, j) { return sd[j] ? f4((x - mu[j]) / sd[j]) : f4(0) }
NR == FNR && FNR == 1 {
  for (i = 1; i <= NF; i++) {
    if ($i == "id") ic = i; else if ($i == "city") cc = i; else if ($i == "label") lc = i
    else { nc++; num[nc] = i; name[nc] = $i }
  }
  next
}
NR == FNR {
  if (NF < 2 || (level >= 3 && $lc == "")) next
  n++; id[n] = $ic; lab[n] = $lc; city[n] = $cc; seen[$cc] = 1
  for (j = 1; j <= nc; j++) {
    v[n, j] = $num[j]
    if ($num[j] != "") { k[j]++; sum[j] += $num[j]; xs[j, k[j]] = $num[j] + 0 }
  }
  next
}
FNR == 1 { for (i = 1; i <= NF; i++) oc[$i] = i; next }
NF >= 2 {
  m++; oid[m] = $oc["id"]; ocity[m] = $oc["city"]
  for (j = 1; j <= nc; j++) {
    ov[m, j] = $oc[name[j]]
    if (ov[m, j] != "") { ok[j]++; osum[j] += ov[m, j] }
  }
}
END {
  for (j = 1; j <= nc; j++) {
    mu[j] = sum[j] / k[j]; ss = 0
    for (i = 1; i <= k[j]; i++) { d = xs[j, i] - mu[j]; ss += d * d }
    sd[j] = sqrt(ss / k[j])
    for (i = 2; i <= k[j]; i++) {
      x = xs[j, i]; p = i - 1
      while (p >= 1 && xs[j, p] > x) { xs[j, p + 1] = xs[j, p]; p-- }
      xs[j, p + 1] = x
    }
    h = int(k[j] / 2)
    med[j] = (k[j] % 2) ? xs[j, h + 1] : (xs[j, h] + xs[j, h + 1]) / 2
  }
  nct = 0
  if (level >= 3) {
    for (c in seen) {
      nct++; p = nct
      while (p > 1 && cl[p - 1] > c) { cl[p] = cl[p - 1]; p-- }
      cl[p] = c
    }
  }
  if (report == "summary") {
    print "column,missing,median,mean,std"
    for (j = 1; j <= nc; j++) print name[j] "," n - k[j] "," f4(med[j]) "," f4(mu[j]) "," f4(sd[j])
  } else if (report == "features" || report == "apply") {
    head = "id"
    for (j = 1; j <= nc; j++) head = head "," name[j]
    for (c = 1; c <= nct; c++) head = head ",city=" cl[c]
    if (report == "features") { print head ",label"; rows = n } else { print head; rows = m }
    for (r = 1; r <= rows; r++) {
      line = (report == "features") ? id[r] : oid[r]
      for (j = 1; j <= nc; j++) {
        x = (report == "features") ? v[r, j] : ov[r, j]
        line = line "," z(x == "" ? med[j] : x, j)
      }
      here = (report == "features") ? city[r] : ocity[r]
      for (c = 1; c <= nct; c++) line = line "," (here == cl[c] ? 1 : 0)
      print (report == "features") ? line "," lab[r] : line
    }
  } else if (report == "drift") {
    print "column,train_mean,holdout_mean,shift"
    for (j = 1; j <= nc; j++) {
      held = osum[j] / ok[j]
      print name[j] "," f4(mu[j]) "," f4(held) "," (sd[j] ? f4((held - mu[j]) / sd[j]) : f4(0))
    }
  } else { print "unknown report " report > "/dev/stderr"; exit 1 }
}' "$2" ${3:+"$3"}
