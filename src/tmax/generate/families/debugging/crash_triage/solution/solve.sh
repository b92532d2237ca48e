file {{ binary }}
ls {{ inputs }}
mkdir -p {{ out }}
{% if level >= 2 -%}
head -n 3 {{ inputs }}/{{ first[0] }}
{% endif -%}
{% if level >= 3 -%}
{{ binary }} < {{ inputs }}/{{ first[1] }} || echo "rc=$?"
strings {{ binary }} | head -n 20 || true
{% endif -%}
cat > {{ src }} <<'PROGRAM_EOF'
{{ body }}
PROGRAM_EOF
{% if lang == "bash" -%}
chmod +x {{ src }}
{% endif -%}
{{ run }} {{ inputs }} > {{ out }}/status.csv
{% if level >= 3 -%}
{{ run }} {{ inputs }} first > {{ out }}/first_bad.csv
{% endif -%}
{% if level >= 4 -%}
echo '{{ ops["div"] }} 1 0' > {{ out }}/repro_fpe.txt
echo '{{ ops["get"] }} 100000' > {{ out }}/repro_segv.txt
{{ binary }} < {{ out }}/repro_fpe.txt || echo "rc=$?"
{{ binary }} < {{ out }}/repro_segv.txt || echo "rc=$?"
ok=$(grep -c ',ok$' {{ out }}/status.csv || true)
ex=$(grep -c ',exit:' {{ out }}/status.csv || true)
sg=$(grep -c ',signal:' {{ out }}/status.csv || true)
printf '{"ok": %d, "exit": %d, "signal": %d}\n' "$ok" "$ex" "$sg" > {{ out }}/counts.json
cat {{ out }}/status.csv {{ out }}/counts.json
{% endif -%}
