mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
: > /app/out/deleted.txt
{% if level >= 4 -%}
freed=0
{% endif -%}
{% for host in hosts -%}
{{ run }} /app/backups/{{ host }} > /tmp/{{ host }}.del
sed 's|^|{{ host }}/|' /tmp/{{ host }}.del >> /app/out/deleted.txt
{% if level >= 4 -%}
freed=$((freed + $(cd /app/backups/{{ host }} && cat /tmp/{{ host }}.del | xargs -r stat -c %s | awk '{s += $1} END {print s + 0}')))
{% endif -%}
(cd /app/backups/{{ host }} && xargs -r rm -f -- < /tmp/{{ host }}.del)
{% endfor -%}
LC_ALL=C sort -o /app/out/deleted.txt /app/out/deleted.txt
{% if level >= 3 -%}
(cd /app/backups && ls -1 */db-*.tar.gz | LC_ALL=C grep -E '/db-[0-9]{8}\.tar\.gz$' | LC_ALL=C sort) > /app/out/kept.txt
{% endif -%}
{% if level >= 4 -%}
{% for host in hosts -%}
ls /app/backups/{{ host }} | grep -E '^db-[0-9]{8}\.tar\.gz$' | sort | tail -n 1 > /app/backups/{{ host }}/LATEST
{% endfor -%}
deleted=$(grep -c . /app/out/deleted.txt || true)
kept=$(grep -c . /app/out/kept.txt || true)
printf '{"deleted": %d, "kept": %d, "freed_bytes": %d}\n' "$deleted" "$kept" "$freed" > /app/out/summary.json
(cd /app/out && sha256sum deleted.txt kept.txt > checksums.sha256)
{% endif -%}
