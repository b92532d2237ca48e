function csvsplit(line, out,    n, i, c, f, q) {
  n = 0; f = ""; q = 0
  for (i = 1; i <= length(line); i++) {
    c = substr(line, i, 1)
    if (q) {
      if (c == "\"") { if (substr(line, i + 1, 1) == "\"") { f = f c; i++ } else q = 0 }
      else f = f c
    } else if (c == "\"") q = 1
    else if (c == ",") { out[++n] = f; f = "" }
    else f = f c
  }
  out[++n] = f
  return n
}
function money(c,    s) {
  s = c < 0 ? "-" : ""
  if (c < 0) c = -c
  return sprintf("%s%d.%02d", s, int(c / 100), c % 100)
}
NR == 1 { n = csvsplit($0, h); for (i = 1; i <= n; i++) col[h[i]] = i; next }
{
  csvsplit($0, v); a = v[col["amount"]]; neg = substr(a, 1, 1) == "-"; gsub(/[-.]/, "", a)
  c = (neg ? -1 : 1) * a; total += c
  if (group in col) dept[v[col[group]]] += c
}
END { if (mode == "dept") { for (d in dept) print d, money(dept[d]) } else print money(total) }
