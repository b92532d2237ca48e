mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if lang == "c" and code -%}
gcc -O2 -std=c11 -o /tmp/tone /app/tone.c -lm
{% endif -%}
: > /app/out/report.txt
{% for name in names -%}
echo "{{ name }} $({{ run }} /app/{{ name }})" >> /app/out/report.txt
{% endfor -%}
{% if level >= 2 and mode == "freq" -%}
sort -k2,2 -g -r /app/out/report.txt | head -n 1 | cut -d' ' -f1 > /app/out/highest.txt
{% elif level >= 2 -%}
sed 's/.*rms=\([0-9]*\).*/\1/' /app/out/report.txt > /tmp/rms
paste -d' ' /tmp/rms /app/out/report.txt | sort -s -k1,1nr | head -n 1 | cut -d' ' -f2 > /app/out/loudest.txt
{% endif -%}
{% if level >= 3 and mode == "freq" -%}
awk '$2 >= 500 {print $1}' /app/out/report.txt > /app/out/flagged.txt
{% elif level >= 3 -%}
awk '{split($3, p, "="); if (p[2] >= 32000) print $1}' /app/out/report.txt > /app/out/flagged.txt
{% endif -%}
{% if level >= 4 -%}
total=0
{% for name in names -%}
{% if ext == "wav" -%}
total=$((total + ($(stat -c %s /app/{{ name }}) - 44) / 2))
{% else -%}
total=$((total + $(tail -n +2 /app/{{ name }} | grep -c .)))
{% endif -%}
{% endfor -%}
printf '{"recordings": {{ level }}, "total_samples": %d}\n' "$total" > /app/out/summary.json
(cd /app/out && sha256sum report.txt flagged.txt summary.json > checksums.sha256)
cat /app/out/report.txt
{% endif -%}
