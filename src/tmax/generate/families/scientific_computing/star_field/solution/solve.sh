mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% for img, out in pairs -%}
{{ run }} {{ img }} > {{ out }}
{% endfor -%}
{% if level >= 2 -%}
: > /app/out/counts.txt
{% for img, out in pairs -%}
echo "{{ img.rsplit("/", 1)[1] }} $(head -n 1 {{ out }} | cut -d' ' -f2)" >> /app/out/counts.txt
{% endfor -%}
{% endif -%}
{% if level >= 3 -%}
sort -k2,2nr -k1,1 /app/out/counts.txt | head -n 1 | cut -d' ' -f1 > /app/out/richest.txt
{% endif -%}
{% if level >= 4 -%}
stars=$(awk '{s += $2} END {print s + 0}' /app/out/counts.txt)
printf '{"images": {{ pairs | length }}, "stars": %d}\n' "$stars" > /app/out/summary.json
(cd /app/out && sha256sum {{ stars | join(" ") }} counts.txt > checksums.sha256)
{% endif -%}
