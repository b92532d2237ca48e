mkdir -p {{ clean }}
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if lang == "c" -%}
gcc -O2 -std=c11 -o /tmp/prog {{ tool }}
{% endif -%}
for f in {{ data_dir }}/*.csv; do
  {{ run }} "$f" > "{{ clean }}/$(basename "$f")"
done
{% if level >= 2 -%}
for f in {{ data_dir }}/*.csv; do
  n=$(basename "$f")
  if iconv -f UTF-8 -t UTF-8 "$f" > /dev/null 2>&1; then e=utf-8; else e=latin-1; fi
  if grep -q $'\r$' "$f"; then l=crlf; else l=lf; fi
  r=$(python3 -c 'import csv, sys; print(len(list(csv.reader(open(sys.argv[1], encoding="utf-8")))) - 1)' "{{ clean }}/$n")
  echo "$n $e $l $r"
done | LC_ALL=C sort > {{ report }}
{% endif -%}
{% if level >= 3 -%}
mkdir -p {{ json_dir }}
cat > /tmp/tojson.py <<'TMAX_EOF'
{{ tojson }}
TMAX_EOF
python3 /tmp/tojson.py {{ json_dir }} {{ clean }}/*.csv
{% endif -%}
{% if level >= 4 -%}
files=$(wc -l < {{ report }})
rows=$(awk '{s += $4} END {print s + 0}' {{ report }})
conv=$(awk '$2 == "latin-1" {printf "%s\"%s\"", (k++ ? ", " : ""), $1}' {{ report }})
echo "{\"files\": $files, \"rows\": $rows, \"converted\": [$conv]}" > {{ summary }}
(cd {{ clean }} && sha256sum *.csv > {{ checksums }})
cat {{ summary }}
{% endif -%}
