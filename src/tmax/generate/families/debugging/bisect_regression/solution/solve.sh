{% if level >= 2 -%}
ls /app/releases
cat -n /app/releases/{{ first }}/{{ script }}
{% endif -%}
mkdir -p /app/out
{{ runner }} /app/releases/{{ first }}/{{ script }} /app/data/{{ data[0] }} > /tmp/good.txt
for v in $(ls /app/releases | sort -t. -k2,2n); do if ! {{ runner }} /app/releases/$v/{{ script }} /app/data/{{ data[0] }} | cmp -s - /tmp/good.txt; then echo "$v"; break; fi; done > /tmp/first.txt
{% if level >= 2 -%}
cat /tmp/first.txt
{% endif -%}
{% if level >= 3 -%}
prev=''
for v in $(ls /app/releases | sort -t. -k2,2n); do if [ -n "$prev" ]; then diff <(sed 's/^VERSION.*//' /app/releases/$prev/{{ script }}) <(sed 's/^VERSION.*//' /app/releases/$v/{{ script }}) | grep -E '^[0-9]+c[0-9]+$' | sed "s/^.*c/$v /" || true; fi; prev=$v; done > /tmp/changes.txt
cat /tmp/changes.txt
{% endif -%}
{% if level >= 4 -%}
cut -d' ' -f1 /tmp/changes.txt > /app/out/first_bad.txt
cut -d' ' -f2 /tmp/changes.txt > /app/out/changed_lines.txt
{% else -%}
cp /tmp/first.txt /app/out/first_bad.txt
{% if level == 3 -%}
grep "^$(cat /tmp/first.txt) " /tmp/changes.txt | cut -d' ' -f2 > /app/out/changed_lines.txt
{% endif -%}
{% endif -%}
{% if level >= 2 -%}
diff /app/releases/{{ first }}/{{ script }} /app/releases/{{ last }}/{{ script }} || true
{% endif -%}
cat > {{ program }} <<'FIXED_EOF'
{{ fixed }}
FIXED_EOF
{% if lang == "bash" -%}
chmod +x {{ program }}
{% endif -%}
{% if level >= 2 -%}
{% for name, stem in totals -%}
{{ runner }} {{ program }} /app/data/{{ name }} > /app/out/totals_{{ stem }}.txt
{% endfor -%}
{% endif -%}
{% if level >= 4 -%}
cmp /tmp/good.txt /app/out/totals_{{ totals[0][1] }}.txt
{{ runner }} {{ program }} /dev/null || true
head -n 3 /app/out/*.txt
{% endif -%}
