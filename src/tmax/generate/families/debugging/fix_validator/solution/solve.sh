cat /app/legacy_validate.py
{% if level >= 2 -%}
head /app/data/rejected_by_import.txt
{% endif -%}
cat > {{ program }} <<'PROGRAM_EOF'
{{ body }}
PROGRAM_EOF
{% if lang == "bash" -%}
chmod +x {{ program }}
{% endif -%}
{{ run }} < /app/data/rejected_by_import.txt || true
{% if level >= 3 -%}
printf '%s\n' '{{ samples[0] }}' | {{ run }}
printf '%s\n' '{{ samples[1] }}' | {{ run }} || true
{% endif -%}
{% if level >= 4 -%}
printf 'root:1000:a@b.co:/bin/sh\n' | {{ run }} || true
wc -l /app/data/rejected_by_import.txt
grep -n 'ok' /app/legacy_validate.py
python3 /app/legacy_validate.py < /app/data/rejected_by_import.txt
{{ run }} < /app/data/rejected_by_import.txt | sort | uniq -c || true
{{ run }} < /app/data/rejected_by_import.txt | grep -c INVALID || true
{% endif -%}
{% if service -%}
cat > /app/server.py <<'SERVER_EOF'
{{ server }}
SERVER_EOF
nohup python3 /app/server.py > /app/server.log 2>&1 &
{{ wait_port }}
{% endif -%}
