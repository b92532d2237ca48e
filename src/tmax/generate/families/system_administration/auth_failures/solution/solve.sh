mkdir -p /app/out /tmp/logs
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if lang == "c" and code -%}
gcc -O2 -std=c11 -o /tmp/failures /app/failures.c
{% endif -%}
{% for log in logs if log.endswith(".gz") -%}
gzip -dc {{ log }} > /tmp/logs/auth.log.2
{% endfor -%}
{{ run }} {{ plain }} > /app/out/failures.txt
{% if level >= 2 -%}
cat {{ plain }} | sed -n -E 's/.*sshd\[[0-9]+\]: Failed password for (invalid user )?([^ ]+) from [^ ]+ port [0-9]+.*/\2/p' | LC_ALL=C sort | uniq -c | awk '{print $1, $2}' | LC_ALL=C sort -k1,1nr -k2,2 > /app/out/users.txt
{% endif -%}
{% if level >= 3 -%}
cat {{ plain }} | sed -n -E 's/.*sshd\[[0-9]+\]: Accepted [a-z]+ for [^ ]+ from ([^ ]+) port.*/\1/p' | sort -u > /tmp/ok_ips
awk -v n={{ limit }} '$1 >= n {print $2}' /app/out/failures.txt | grep -vxFf /tmp/ok_ips | sort -t. -k1,1n -k2,2n -k3,3n -k4,4n > /app/out/blocklist.txt || true
{% endif -%}
{% if level >= 4 -%}
attempts=$(awk '{s += $1} END {print s + 0}' /app/out/failures.txt)
sources=$(grep -c . /app/out/failures.txt || true)
blocked=$(grep -c . /app/out/blocklist.txt || true)
printf '{"failed_attempts": %d, "sources": %d, "blocked": %d}\n' "$attempts" "$sources" "$blocked" > /app/out/summary.json
(cd /app/out && sha256sum failures.txt users.txt blocklist.txt > checksums.sha256)
head -n 3 /app/out/failures.txt /app/out/blocklist.txt
{% endif -%}
