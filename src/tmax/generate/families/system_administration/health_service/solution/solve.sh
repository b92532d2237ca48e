mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{{ run }} {{ logs | join(" ") }} > /app/out/status.txt
{% if level >= 3 -%}
cat {{ logs | join(" ") }} | awk 'NF == 4 && ($3 == "ok" || $3 == "fail" || $3 == "degraded")' | LC_ALL=C sort > /tmp/checks
awk '{r[$2] = r[$2] " " $3} END {for (s in r) print s, r[s]}' /tmp/checks > /tmp/history
awk '{f = 0; for (i = (NF > 4 ? NF - 2 : 2); i <= NF; i++) if ($i == "fail") f = 1; if (f) print $1}' /tmp/history | LC_ALL=C sort > /app/out/flapping.txt
{% endif -%}
{% if level >= 4 -%}
services=$(grep -c . /app/out/status.txt)
down=$(awk '$2 == "fail" {printf "%s\"%s\"", (n++ ? ", " : ""), $1}' /app/out/status.txt)
echo "{\"services\": $services, \"down\": [$down]}" > /app/out/summary.json
(cd /app/out && sha256sum status.txt flapping.txt summary.json > checksums.sha256)
cat /app/out/summary.json
(cd /app/out && sha256sum -c --quiet checksums.sha256)
{% endif -%}
{% if serve -%}
cat > /app/statusd.py <<'TMAX_EOF'
{{ server }}
TMAX_EOF
{{ start_service }}
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/{{ http_port }}) 2>/dev/null && break; sleep 0.1; done
{% endif -%}
