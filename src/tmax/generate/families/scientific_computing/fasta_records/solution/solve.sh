mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if mode == "table" -%}
{% for src, out in pairs -%}
{% if level >= 3 -%}
{{ run }} {{ src }} | awk -F'\t' '$2 >= {{ min_len }}' > {{ out }}
{% else -%}
{{ run }} {{ src }} > {{ out }}
{% endif -%}
{% endfor -%}
{% if level >= 4 -%}
cat /app/out/run*.tsv > /tmp/all.tsv
sort -t$'\t' -k2,2nr -k1,1 /tmp/all.tsv | head -n 1 | cut -f1 > /app/out/longest.txt
records=$(wc -l < /tmp/all.tsv)
bases=$(awk -F'\t' '{s += $2} END {print s + 0}' /tmp/all.tsv)
gc=$(awk -F'\t' '{s += $3} END {print s + 0}' /tmp/all.tsv)
printf '{"records": %d, "bases": %d, "gc": %d}\n' "$records" "$bases" "$gc" > /app/out/summary.json
(cd /app/out && sha256sum {{ tables | join(" ") }} > checksums.sha256)
{% endif -%}
{% else -%}
: > /app/out/verdicts.txt
for f in $(ls /app/incoming | sort); do
  if {{ run }} /app/incoming/$f 2>/dev/null; then v=OK; else v=BAD; fi
  echo "$f $v" >> /app/out/verdicts.txt
done
{% if level >= 3 -%}
mkdir -p /app/out/accepted
awk '$2 == "OK" {print $1}' /app/out/verdicts.txt > /tmp/ok.txt
while read -r f; do cp /app/incoming/$f /app/out/accepted/; done < /tmp/ok.txt
{% endif -%}
{% if level >= 4 -%}
ok=$(grep -c ' OK$' /app/out/verdicts.txt || true)
bad=$(grep -c ' BAD$' /app/out/verdicts.txt || true)
printf '{"ok": %d, "bad": %d}\n' "$ok" "$bad" > /app/out/summary.json
(cd /app/out && sha256sum verdicts.txt summary.json > checksums.sha256)
{% endif -%}
cat /app/out/verdicts.txt
{% endif -%}
