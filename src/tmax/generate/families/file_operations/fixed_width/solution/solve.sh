mkdir -p {{ out }}
cat {{ layout_path }}
{% if code -%}
mkdir -p /app
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if build -%}
{{ build }}
{% endif -%}
{% else -%}
cat > /tmp/fw2csv.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
{% if level >= 2 -%}
cat > /tmp/csvsum.awk <<'TMAX_EOF'
{{ awk }}
TMAX_EOF
{% endif -%}
{% if level <= 2 -%}
{{ tool }} {{ layout_path }} {{ folder }}/{{ names[0] }} > {{ out }}/records.csv
{% else -%}
printf 'file,%s\n' "$({{ tool }} {{ layout_path }} /dev/null | head -n 1)" > {{ out }}/records.csv
{% for name in names -%}
{{ tool }} {{ layout_path }} {{ folder }}/{{ name }} > /tmp/f{{ loop.index0 }}.csv 2> /tmp/f{{ loop.index0 }}.rej
tail -n +2 /tmp/f{{ loop.index0 }}.csv | sed 's/^/{{ name }},/' >> {{ out }}/records.csv
{% endfor -%}
{% endif -%}
{% if level >= 2 -%}
awk -v mode=dept -v group={{ group }} -f /tmp/csvsum.awk {{ out }}/records.csv | LC_ALL=C sort -k1,1 > {{ out }}/{{ group }}_totals.txt
{% endif -%}
{% if level >= 3 -%}
i=0; for n in {{ names | join(" ") }}; do f={{ folder }}/$n; count=$(grep -c '^D' "$f"); total=$(awk -f /tmp/csvsum.awk /tmp/f$i.csv); t=$(grep '^T' "$f" | tr -d '\r'); tc=$((10#${t:1:8})); tv=$((10#${t:10:13})); [ "${t:9:1}" = - ] && tv=$((-tv)); c=${total//./}; if [ "${c:0:1}" = - ]; then cents=$((-10#${c#-})); else cents=$((10#$c)); fi; status=MISMATCH; [ "$tc" -eq "$count" ] && [ "$tv" -eq "$cents" ] && status=OK; echo "$n $count $total $status"; i=$((i + 1)); done > {{ out }}/validation.txt
{% endif -%}
{% if level >= 4 -%}
{ {% for name in names %}sed "s/^/{{ name }}:/" /tmp/f{{ loop.index0 }}.rej; {% endfor %}} > {{ out }}/rejects.txt
records=$(($(wc -l < {{ out }}/records.csv) - 1))
rejected=$(wc -l < {{ out }}/rejects.txt)
total=$(awk -f /tmp/csvsum.awk {{ out }}/records.csv)
mismatched=$(awk '$4 == "MISMATCH" {printf "%s\"%s\"", (n++ ? ", " : ""), $1}' {{ out }}/validation.txt)
printf '{"files": 3, "records": %d, "rejected": %d, "total": "%s", "mismatched": [%s]}\n' "$records" "$rejected" "$total" "$mismatched" > {{ out }}/summary.json
{% endif -%}
