head -n 5 {{ train_path }}
mkdir -p {{ out }}
{% if level >= 3 -%}
awk -F, 'NR > 1 && $NF == ""' {{ train_path }} | wc -l
cut -d, -f1 --complement {{ train_path }} | tail -n +2 | grep -c ',,' || true
{% endif -%}
cat > {{ source }} <<'PROGRAM_EOF'
{{ body }}
PROGRAM_EOF
{% if lang == "bash" -%}
chmod +x {{ source }}
{% endif -%}
{% for report, path in outputs.items() -%}
{{ run }} {{ report }} {{ train_path }}{% if report in ("apply", "drift") %} {{ holdout_path }}{% endif %} > {{ path }}
{% endfor -%}
{% if level >= 4 -%}
head -n 3 {{ holdout_path }}
cat {{ outputs["summary"] }} {{ outputs["drift"] }}
head -n 3 {{ outputs["features"] }} {{ outputs["apply"] }}
wc -l /app/data/*.csv {{ out }}/*.csv
{% endif -%}
