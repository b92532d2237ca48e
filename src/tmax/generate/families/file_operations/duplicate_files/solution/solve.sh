mkdir -p /app/report
{% if level >= 3 -%}
find /app/photos -type f | wc -l
du -sh /app/photos
{% endif -%}
{% if level >= 4 -%}
find /app/photos -type l -exec ls -l {} +
{% endif -%}
{% if code -%}
mkdir -p {{ program_folder }}
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% else -%}
cat > /tmp/dupes.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
{{ tool }} /app/photos > /app/report/duplicates.txt
{% if level >= 2 -%}
while IFS= read -r line; do first=${line%%$'\t'*}; n=$(printf '%s\n' "$line" | awk -F'\t' '{print NF}'); size=$(stat -c %s "/app/photos/$first"); echo $(( (n - 1) * size )); done < /app/report/duplicates.txt | awk '{s += $1} END {print s + 0}' > /app/report/wasted_bytes.txt
{% endif -%}
{% if level >= 3 -%}
awk -F'\t' '{best = $1; bc = gsub("/", "/", best); for (i = 2; i <= NF; i++) {p = $i; c = gsub("/", "/", p); if (c < bc || (c == bc && p < best)) {best = $i; bc = c}} print best}' /app/report/duplicates.txt > /app/report/keep.txt
{% endif -%}
{% if service -%}
cat > /app/dupes_server.py <<'TMAX_EOF'
{{ server }}
TMAX_EOF
{{ start_service }}
{% endif -%}
{% if level >= 4 -%}
paste /app/report/keep.txt /app/report/duplicates.txt | while IFS=$'\t' read -r -a parts; do keep=${parts[0]}; for p in "${parts[@]:1}"; do [[ $p == "$keep" ]] && continue; mkdir -p "/app/trash/$(dirname "$p")"; mv "/app/photos/$p" "/app/trash/$p"; echo "$p"; done; done | LC_ALL=C sort > /app/report/moved.txt
groups=$(wc -l < /app/report/duplicates.txt)
moved=$(wc -l < /app/report/moved.txt)
printf '{"groups": %d, "moved": %d, "wasted_bytes": %d}\n' "$groups" "$moved" "$(cat /app/report/wasted_bytes.txt)" > /app/report/summary.json
find /app/trash -type f | wc -l
{% endif -%}
