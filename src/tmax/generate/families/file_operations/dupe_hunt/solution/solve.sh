mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{{ run }} {{ root }} > /app/out/duplicates.txt
{% if level >= 2 -%}
total=0
while read -r first rest; do
  [ -n "$rest" ] || continue
  size=$(stat -c %s "{{ root }}/$first")
  copies=$(echo $rest | wc -w)
  total=$((total + size * copies))
done < /app/out/duplicates.txt
echo "$total" > /app/out/reclaimable.txt
{% endif -%}
{% if level >= 3 -%}
while read -r first rest; do
  for other in $rest; do
    ln -f "{{ root }}/$first" "{{ root }}/$other"
  done
done < /app/out/duplicates.txt
{% endif -%}
{% if level >= 4 -%}
groups=$(grep -c . /app/out/duplicates.txt || true)
redundant=$(awk '{s += NF - 1} END {print s + 0}' /app/out/duplicates.txt)
echo "{\"groups\": $groups, \"redundant_files\": $redundant, \"reclaimable_bytes\": $total}" > /app/out/summary.json
{{ manifest }}
find {{ root }} -type f -links +1 | sort | head
{% endif -%}
