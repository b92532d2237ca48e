mkdir -p {{ dest }} {{ out }}
{% if level >= 2 -%}
find {{ inbox }} -type f -exec file -b {} + | sort | uniq -c
{% endif -%}
{% if level >= 4 -%}
find {{ inbox }} -type f | wc -l
{% endif -%}
{% if code -%}
mkdir -p /app
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% else -%}
cat > /tmp/toutf8.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
cd {{ inbox }} && find . -type f | sed 's|^\./||' | LC_ALL=C sort > /tmp/files.txt
while IFS= read -r f; do mkdir -p "{{ dest }}/$(dirname "$f")"; {{ tool }} "{{ inbox }}/$f" > "{{ dest }}/$f"; done < /tmp/files.txt
{% if level >= 2 -%}
while IFS= read -r f; do echo "$f $({{ tool }} --detect "{{ inbox }}/$f")"; done < /tmp/files.txt > {{ report }}
{% endif -%}
{% if level >= 4 -%}
while read -r f enc; do printf '%s\t%s\t%s\t%s\n' "$f" "$enc" "$(tr -dc '\n' < "{{ dest }}/$f" | wc -c)" "$(sha256sum < "{{ dest }}/$f" | cut -d' ' -f1)"; done < {{ report }} > {{ out }}/manifest.tsv
files=$(wc -l < {{ out }}/manifest.tsv)
bytes=$(find {{ dest }} -type f -exec cat {} + | wc -c)
by=$(awk '{n[$2]++} END {for (e in n) printf "%s\"%s\": %d", (k++ ? ", " : ""), e, n[e]}' {{ report }})
{% raw %}printf '{"files": %d, "by_encoding": {%s}, "bytes": %d}\n' "$files" "$by" "$bytes" > {% endraw %}{{ out }}/summary.json
python3 -m json.tool {{ out }}/summary.json
{% endif -%}
