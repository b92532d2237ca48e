mkdir -p /app/out /app/extracted
{% if level >= 3 -%}
ls -l /app/incoming
{% endif -%}
{% if code -%}
mkdir -p /app
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% else -%}
cat > /tmp/tarcheck.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
for a in /app/incoming/*; do echo "$(basename "$a") $({{ check }} "$a")"; done | LC_ALL=C sort > /tmp/verdicts.txt
{% if level >= 2 -%}
cp /tmp/verdicts.txt /app/out/verdicts.txt
awk '$2 == "OK" {print $1}' /app/out/verdicts.txt | while read -r a; do stem=${a%.gz}; stem=${stem%.tar}; mkdir -p "/app/extracted/$stem"; tar -xf "/app/incoming/$a" -C "/app/extracted/$stem"; done
{% else -%}
sed 's/ REJECT .*/ REJECT/' /tmp/verdicts.txt > /app/out/verdicts.txt
{% endif -%}
{% if level >= 3 -%}
awk '$2 == "OK" {print $1}' /app/out/verdicts.txt | while read -r a; do tar -tvf "/app/incoming/$a" --numeric-owner | awk -v a="$a" '$1 ~ /^-/ {print a "\t" $6 "\t" $3}'; done | LC_ALL=C sort > /app/out/inventory.tsv
{% endif -%}
{% if level >= 4 -%}
archives=$(wc -l < /app/out/verdicts.txt)
safe=$(grep -c ' OK$' /app/out/verdicts.txt || true)
rejected=$(awk '$2 == "REJECT" {n[$3]++} END {for (r in n) printf "%s\"%s\": %d", (k++ ? ", " : ""), r, n[r]}' /app/out/verdicts.txt)
files=$(wc -l < /app/out/inventory.tsv)
bytes=$(awk -F'\t' '{s += $3} END {print s + 0}' /app/out/inventory.tsv)
{% raw %}printf '{"archives": %d, "safe": %d, "rejected": {%s}, "files": %d, "bytes": %d}\n' "$archives" "$safe" "$rejected" "$files" "$bytes" > /app/out/summary.json{% endraw %}
{% endif -%}
