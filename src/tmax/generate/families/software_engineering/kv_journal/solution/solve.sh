mkdir -p /app/out
{% if level >= 3 -%}
ls -l /app/data
grep -c '^BEGIN' /app/data/*.log || true
{% endif -%}
{% if level >= 4 -%}
tail -n 3 /app/data/journal-005.log
{% endif -%}
{% if language -%}
mkdir -p {{ program_dir }}
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if language == "c" -%}
gcc -O2 -std=c11 -o {{ tool }} {{ program }} -lm
{% endif -%}
{% else -%}
cat > /tmp/kvreplay.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
printf 'SET a 1\nINCR a 2\nSET b x y\nDEL c\n' > /tmp/smoke.log
test "$({{ tool }} /tmp/smoke.log 2>/dev/null)" = "$(printf 'a=3\nb=x y')"
{% if level >= 4 -%}
head -n 1 /app/data/snapshot.kv
{% endif -%}
{{ tool }} {{ replay | join(" ") }} > /app/out/state.txt 2> /tmp/stats.txt
{% if level >= 3 -%}
wc -l /app/out/state.txt
{% endif -%}
{% if level >= 2 -%}
cp /tmp/stats.txt /app/out/stats.txt
{% endif -%}
{% if level >= 4 -%}
awk -F= 'FILENAME == ARGV[1] { if ($0 ~ /^#/ || $0 == "") next; old[$1] = substr($0, length($1) + 2); next } { v = substr($0, length($1) + 2); seen[$1] = 1; if (!($1 in old)) print "+ " $1; else if (old[$1] != v) print "~ " $1 } END { for (k in old) if (!(k in seen)) print "- " k }' /app/data/snapshot.kv /app/out/state.txt | LC_ALL=C sort -k2,2 > /app/out/changed.txt
cat /app/out/stats.txt
{% endif -%}
{% if serve -%}
cat > /app/kv_server.py <<'TMAX_EOF'
{{ server }}
TMAX_EOF
{{ start_service }}
{% endif -%}
