mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{{ run }} {{ inputs | join(" ") }} > /app/out/hourly.csv
{% if level >= 2 -%}
tail -n +2 /app/out/hourly.csv | sort -t, -k3,3nr -k1,1 -k2,2 | head -n 1 | awk -F, '{print $1, $2}' > /app/out/busiest.txt
{% endif -%}
{% if level >= 3 -%}
tail -n +2 /app/out/hourly.csv | awk -F, '!($2 in m) || $5 + 0 > m[$2] {m[$2] = $5 + 0} END {for (s in m) printf "%s %.1f\n", s, m[s]}' | LC_ALL=C sort > /app/out/peaks.txt
{% endif -%}
{% if level >= 4 -%}
rows=$(tail -n +2 /app/out/hourly.csv | grep -c .)
readings=$(tail -n +2 /app/out/hourly.csv | awk -F, '{s += $3} END {print s + 0}')
printf '{"rows": %d, "readings": %d}\n' "$rows" "$readings" > /app/out/summary.json
(cd /app/out && sha256sum hourly.csv busiest.txt peaks.txt > checksums.sha256)
head -n 3 /app/out/hourly.csv
wc -l /app/out/hourly.csv
cat /app/out/busiest.txt /app/out/peaks.txt /app/out/summary.json
{% endif -%}
