mkdir -p /app/report
{{ program_step }}
{{ tool }} {{ logs }} > /app/report/failed_by_ip.txt
{%- if level >= 3 %}
gzip -dc /app/logs/auth.log.2.gz > /tmp/all.log
cat /app/logs/auth.log.1 /app/logs/auth.log >> /tmp/all.log
{%- else %}
cp /app/logs/auth.log /tmp/all.log
{%- endif %}
{%- if level >= 2 %}
awk '$5 ~ /^sshd\[[0-9]+\]:$/ {
  b = 6; n = 1
  if ($6 == "message" && $7 == "repeated" && $9 == "times:" && $10 == "[") { n = $8; b = 11 }
  if ($b == "Invalid" && $(b + 1) == "user") print $(b + 2)
  if ($b == "Failed" && $(b + 3) == "invalid" && $(b + 4) == "user") print $(b + 5)
}' /tmp/all.log | LC_ALL=C sort -u > /app/report/invalid_users.txt
{%- if level >= 4 %}
grep -v '^#' /app/config/allowlist.txt | grep . > /tmp/allow.txt || true
{%- else %}
: > /tmp/allow.txt
{%- endif %}
awk -v t={{ threshold }} 'FILENAME == ARGV[1] {
  split($1, net, "/"); split(net[1], o, "."); k = net[2] / 8; p = ""
  for (i = 1; i <= k; i++) p = p o[i] "."
  pre[++np] = p; next
}
{ if ($2 < t) next; for (i = 1; i <= np; i++) if (index($1 ".", pre[i]) == 1) next; print $1 }
' /tmp/allow.txt /app/report/failed_by_ip.txt | LC_ALL=C sort > /app/report/blocklist.txt
{%- endif %}
{%- if level >= 3 %}
awk -v t={{ threshold }} '$5 ~ /^sshd\[[0-9]+\]:$/ {
  b = 6; n = 1
  if ($6 == "message" && $7 == "repeated" && $9 == "times:" && $10 == "[") { n = $8; b = 11 }
  if ($b == "Failed" && $(b + 1) == "password" && $(b + 2) == "for") {
    u = b + 3; if ($u == "invalid" && $(u + 1) == "user") u += 2
    if ($(u + 1) == "from") seen[$(u + 2)] += n
  }
  if ($b == "Accepted" && $(b + 2) == "for" && $(b + 4) == "from" && seen[$(b + 5)] >= t)
    print $(b + 3), $(b + 5)
}' /tmp/all.log | LC_ALL=C sort -u > /app/report/compromised.txt
{%- endif %}
{%- if level >= 4 %}
total=$(awk '{s += $2} END {print s + 0}' /app/report/failed_by_ip.txt)
ips=$(wc -l < /app/report/failed_by_ip.txt)
blocked=$(wc -l < /app/report/blocklist.txt)
top=$(head -n 1 /app/report/failed_by_ip.txt | cut -d' ' -f1)
users=$(cut -d' ' -f1 /app/report/compromised.txt | LC_ALL=C sort -u | awk '{printf "%s\"%s\"", (NR > 1 ? ", " : ""), $0}')
printf '{"total_failed": %d, "unique_ips": %d, "blocked": %d, "top_ip": "%s", "compromised_users": [%s]}\n' "$total" "$ips" "$blocked" "$top" "$users" > /app/report/summary.json
python3 -m json.tool /app/report/summary.json > /dev/null
{%- endif %}
{%- if serve %}
{{ server_step }}
{{ start }}
{%- endif %}
