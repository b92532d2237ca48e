mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{{ run }} {{ source_path }} > /app/out/clean.csv
{% if level >= 2 -%}
grep -nxvFf /app/out/clean.csv {{ source_path }} | cut -d: -f1 > /tmp/rej || true
{% if level >= 4 -%}
awk 'NR == FNR {k[$0]++; next} (k[$0]-- > 0) {next} {print FNR}' /app/out/clean.csv {{ source_path }} > /tmp/rej
{% endif -%}
cp /tmp/rej /app/out/rejected.txt
{% endif -%}
{% if level >= 3 -%}
cut -d, -f3 /app/out/clean.csv | cut -c1-4 | sort | uniq -c | awk '{print $2, $1}' > /app/out/per_year.txt
{% endif -%}
{% if level >= 4 -%}
accepted=$(wc -l < /app/out/clean.csv)
rejected=$(wc -l < /app/out/rejected.txt)
printf '{"accepted": %d, "rejected": %d}\n' "$accepted" "$rejected" > /app/out/summary.json
(cd /app/out && sha256sum clean.csv rejected.txt per_year.txt > checksums.sha256)
cat /app/out/summary.json
{% endif -%}
