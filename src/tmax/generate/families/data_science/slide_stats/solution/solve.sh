file /app/images/*.png
mkdir -p /app/out
cat > {{ source }} <<'PROGRAM_EOF'
{{ body }}
PROGRAM_EOF
{% if lang == "bash" -%}
chmod +x {{ source }}
{% endif -%}
{% if level < 4 -%}
{{ run }} /app/images/slide.png stats {{ limit }}{% if not full %} | head -n 3{% endif %} > /app/out/stats.txt
{% if level >= 3 -%}
{{ run }} /app/images/slide.png blobs {{ limit }} > /app/out/blobs.csv
cat /app/out/stats.txt
tail -n +2 /app/out/blobs.csv | wc -l
{% endif -%}
{% else -%}
echo image,bright,blobs,largest > /app/out/summary.csv
{% for stem in stems -%}
{{ run }} /app/images/{{ stem }}.png blobs {{ limit }} > /app/out/{{ stem }}_blobs.csv
b=$({{ run }} /app/images/{{ stem }}.png stats {{ limit }} | awk '$1 == "bright" { print $2 }')
awk -F, -v name={{ stem }} -v b="$b" 'NR > 1 { n++; if ($2 > m) m = $2 } END { print name "," b "," n + 0 "," m + 0 }' /app/out/{{ stem }}_blobs.csv >> /app/out/summary.csv
{% endfor -%}
tail -n +2 /app/out/summary.csv | sort -t, -k3,3nr -k1,1 | head -n 1 | cut -d, -f1 > /app/out/busiest.txt
cat /app/out/summary.csv /app/out/busiest.txt
{% endif -%}
