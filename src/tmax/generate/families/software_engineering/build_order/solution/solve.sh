mkdir -p {{ out }}
{% if language -%}
mkdir -p {{ program_dir }}
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if language == "c" -%}
gcc -O2 -std=c11 -o {{ tool }} {{ program }} -lm
{% endif -%}
{% else -%}
cat > /tmp/buildorder.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
{% if level <= 2 -%}
cp /app/repo/{{ manifest }} /tmp/manifest.txt
{% else -%}
ls /app/repo
for f in /app/repo/*/{{ ini }}; do awk -F' *= *' '$1 == "name" {n = $2} $1 == "{{ key }}" {r = $2} END {gsub(/,/, " ", r); print n ": " r}' "$f"; done > /tmp/manifest.txt
for f in /app/repo/*/{{ ini }}; do printf '%s %s\n' "$(basename "$(dirname "$f")")" "$(awk -F' *= *' '$1 == "name" {print $2}' "$f")"; done > /tmp/dirs.txt
{% endif -%}
{{ tool }} /tmp/manifest.txt > {{ out }}/build_order.txt
{% if level >= 2 -%}
grep -v '^#' /tmp/manifest.txt | grep . | cut -d: -f1 | sed 's/ *$//' | LC_ALL=C sort > /tmp/all.txt
LC_ALL=C sort {{ out }}/build_order.txt > /tmp/built.txt
LC_ALL=C comm -23 /tmp/all.txt /tmp/built.txt > {{ out }}/blocked.txt
{% endif -%}
{% if level >= 3 -%}
awk 'NR == FNR {m[$1] = $2; next} {split($0, p, "/"); if (p[1] == "repo" && (p[2] in m)) print m[p[2]]}' /tmp/dirs.txt /app/{{ change_list }} | LC_ALL=C sort -u > /tmp/rebuild.set
while :; do awk 'NR == FNR {s[$1] = 1; next} {split($0, a, ":"); n = a[1]; if (n in s) next; k = split(a[2], d, " "); for (i = 1; i <= k; i++) if (d[i] in s) {print n; break}}' /tmp/rebuild.set /tmp/manifest.txt > /tmp/more.txt; [ -s /tmp/more.txt ] || break; cat /tmp/more.txt >> /tmp/rebuild.set; done
grep -Fxf /tmp/rebuild.set {{ out }}/build_order.txt > {{ out }}/rebuild.txt || true
{% endif -%}
{% if level >= 4 -%}
awk 'NR == FNR {split($0, a, ":"); deps[a[1]] = a[2]; next} {k = split(deps[$1], d, " "); m = 0; for (i = 1; i <= k; i++) if ((d[i] in lvl) && lvl[d[i]] > m) m = lvl[d[i]]; lvl[$1] = m + 1; print m + 1, $1}' /tmp/manifest.txt {{ out }}/build_order.txt | LC_ALL=C sort -k1,1n -k2,2 > /tmp/levels.txt
awk '$1 != w {if (NR > 1) print line; w = $1; line = $1 ":"} {line = line " " $2} END {if (NR) print line}' /tmp/levels.txt > {{ out }}/waves.txt
printf '{"packages": %d, "buildable": %d, "blocked": %d, "waves": %d, "rebuild": %d}\n' $(wc -l < /tmp/all.txt) $(wc -l < {{ out }}/build_order.txt) $(wc -l < {{ out }}/blocked.txt) $(wc -l < {{ out }}/waves.txt) $(wc -l < {{ out }}/rebuild.txt) > {{ out }}/summary.json
cat {{ out }}/summary.json
{% endif -%}
