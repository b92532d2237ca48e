mkdir -p /app/out
{{ setup }}
{%- if level >= 4 %}
cat /app/uploads/queue-1.txt /app/uploads/queue-2.txt /app/uploads/queue-3.txt > /tmp/names.txt
paste -d '\t' <({{ gate }} < /tmp/names.txt) /tmp/names.txt > /tmp/joined.txt
{%- else %}
paste -d '\t' <({{ gate }} < /app/uploads/queue.txt) /app/uploads/queue.txt > /tmp/joined.txt
{%- endif %}
awk -F'\t' '$1 == "ACCEPT" {print $2}' /tmp/joined.txt > /app/out/accepted.txt
{%- if level >= 2 %}
awk -F'\t' '$1 != "ACCEPT" {sub(/^REJECT /, "", $1); print $1 "\t" $2}' /tmp/joined.txt > /app/out/rejected.txt
{%- else %}
awk -F'\t' '$1 != "ACCEPT" {print $2}' /tmp/joined.txt > /app/out/rejected.txt
{%- endif %}
{%- if level >= 3 %}
cut -f1 /app/out/rejected.txt | LC_ALL=C sort | uniq -c | awk '{print $2, $1}' | LC_ALL=C sort -k2,2nr -k1,1 > /app/out/rule_counts.txt
{%- endif %}
{%- if level >= 4 %}
total=$(wc -l < /tmp/joined.txt)
acc=$(wc -l < /app/out/accepted.txt)
rej=$(wc -l < /app/out/rejected.txt)
rules=$(awk '{printf "%s\"%s\": %d", (NR > 1 ? ", " : ""), $1, $2}' /app/out/rule_counts.txt)
{% raw %}printf '{"total": %d, "accepted": %d, "rejected": %d, "rules": {%s}}\n' "$total" "$acc" "$rej" "$rules" > /app/out/summary.json{% endraw %}
{%- endif %}
