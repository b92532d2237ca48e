head -n 5 {{ source }}
{% if level >= 3 -%}
cut -d, -f2 {{ source }} | sort | uniq -c
{% endif -%}
mkdir -p {{ out }}
cat > {{ tool }} <<'PROGRAM_EOF'
{{ body }}
PROGRAM_EOF
{% if lang == "c" -%}
{{ build }}
{% elif lang == "bash" -%}
chmod +x {{ tool }}
{% endif -%}
{{ run }} {{ source }} confusion > {{ out }}/confusion.csv
{% if level >= 2 -%}
{{ run }} {{ source }} per_class > {{ out }}/per_class.csv
{% endif -%}
{% if level >= 3 -%}
{{ run }} {{ source }} summary > {{ out }}/summary.json
{% endif -%}
{% if level >= 4 -%}
{{ run }} {{ source }} auc {{ positive }} > {{ out }}/auc.txt
cat {{ out }}/summary.json {{ out }}/auc.txt
column -t -s, {{ out }}/per_class.csv || cat {{ out }}/per_class.csv
wc -l {{ out }}/*
cut -d, -f4 {{ source }} | tail -n +2 | sort -n | head -n 3
awk -F, 'NR > 1 && $2 == ""' {{ source }} | wc -l
{% endif -%}
