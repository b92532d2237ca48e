mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
: > /app/out/invalid.txt
{% for tab in tabs -%}
{{ run }} {{ tab }} | sed 's/^/{{ tab.rsplit("/", 1)[1] }}:/' >> /app/out/invalid.txt
{% endfor -%}
{% if level >= 2 -%}
: > /app/out/counts.txt
for f in {{ tabs | join(" ") }}; do
  b=$(basename $f)
  bad=$(grep -c "^$b:" /app/out/invalid.txt || true)
  entries=$(grep -cvE '^[[:space:]]*(#|$)' $f || true)
  echo "$b $((entries - bad)) $bad" >> /app/out/counts.txt
done
{% endif -%}
{% if level >= 3 -%}
mkdir -p /app/out/clean
for f in {{ tabs | join(" ") }}; do
  b=$(basename $f)
  grep "^$b:" /app/out/invalid.txt | cut -d: -f2 > /tmp/bad || true
  awk 'NR == FNR {bad[$1] = 1; next} !(FNR in bad)' /tmp/bad $f > /app/out/clean/$b
done
{% endif -%}
{% if level >= 4 -%}
n=$(grep -c . /app/out/invalid.txt || true)
echo "{\"files\": {{ tabs | length }}, \"invalid\": $n}" > /app/out/summary.json
(cd /app/out && sha256sum invalid.txt counts.txt > checksums.sha256)
{% endif -%}
