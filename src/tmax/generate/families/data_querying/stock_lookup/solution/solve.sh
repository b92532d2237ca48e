head -n 4 /app/data/*.csv
{% if level > 1 -%}
cat /app/queries.txt
{% endif -%}
{{ setup }}
{{ run }} /app/data < /app/queries.txt > /app/answers.txt
{% if level >= 3 -%}
paste -d'|' /app/queries.txt /app/answers.txt
wc -l /app/answers.txt
{% endif -%}
{% if service -%}
cat > /app/server.py <<'SERVER_EOF'
{{ server }}
SERVER_EOF
nohup python3 /app/server.py > /app/server.log 2>&1 &
{{ wait_line_port }}
{% if http -%}
{{ wait_http_port }}
{% endif -%}
head -n 1 /app/queries.txt > /dev/tcp/127.0.0.1/{{ line_port }}
{% endif -%}
{% if level >= 4 -%}
grep -c UNKNOWN /app/answers.txt || true
tail -n 3 /app/answers.txt
wc -l /app/data/*.csv
awk -F, 'NR > 1 { s += $3 } END { print s }' /app/data/stock.csv
grep -c ERROR /app/answers.txt || true
cut -d' ' -f1 /app/queries.txt | sort | uniq -c
{% endif -%}
