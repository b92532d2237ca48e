mkdir -p {{ outdir }}
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% for src, out in pairs -%}
{{ run }} {{ ref }} {{ src }} > {{ out }}
{% endfor -%}
{% if level >= 3 -%}
cat {{ matches }} | cut -f2 | grep -vx UNMATCHED | sort | uniq -c | sort -k1,1nr -k2 | sed 's/^ *//' > {{ outdir }}/counts.txt
{% endif -%}
{% if level >= 4 -%}
cat {{ matches }} | awk -F'\t' '$2 == "UNMATCHED" {print $1}' | LC_ALL=C sort > {{ outdir }}/unmatched.txt
names=$(cat {{ matches }} | grep -c .)
missing=$(grep -c . {{ outdir }}/unmatched.txt || true)
printf '{"names": %d, "matched": %d}\n' "$names" "$((names - missing))" > {{ outdir }}/summary.json
(cd {{ outdir }} && sha256sum {{ tsvs }} counts.txt unmatched.txt > checksums.sha256)
head -n 5 {{ outdir }}/counts.txt
cat {{ outdir }}/summary.json
{% endif -%}
