mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if lang == "c" and code -%}
gcc -O2 -std=c11 -o /tmp/totals /app/totals.c -lm
{% endif -%}
{{ run }} {{ inputs | join(" ") }} > /app/out/totals.csv
{% if level >= 2 -%}
all=$(tail -q -n +2 /app/exports/*.csv | grep -c .)
uniq_ids=$(tail -q -n +2 /app/exports/*.csv | cut -d, -f1 | sort -u | grep -c .)
echo $((all - uniq_ids)) > /app/out/duplicates.txt
{% endif -%}
{% if level >= 3 -%}
tail -n +2 /app/out/totals.csv | awk -F, '{print $2","$1}' | sort -t, -k1,1gr -k2,2 | head -n 3 | cut -d, -f2 > /app/out/top3.txt
{% endif -%}
{% if level >= 4 -%}
customers=$(tail -n +2 /app/out/totals.csv | grep -c .)
grand=$(tail -n +2 /app/out/totals.csv | awk -F, '{split($2, p, "."); s = (substr($2, 1, 1) == "-") ? -1 : 1; c += s * (((p[1] < 0) ? -p[1] : p[1]) * 100 + p[2])} END {a = (c < 0) ? -c : c; printf "%s%d.%02d", (c < 0) ? "-" : "", int(a / 100), a % 100}')
printf '{"customers": %d, "grand_total": "%s"}\n' "$customers" "$grand" > /app/out/summary.json
(cd /app/out && sha256sum totals.csv top3.txt summary.json > checksums.sha256)
head -n 5 /app/out/totals.csv /app/out/top3.txt
{% endif -%}
{% if service -%}
cat > /app/totals_service.py <<'TMAX_EOF'
{{ server }}
TMAX_EOF
{{ start_service }}
{% endif -%}
