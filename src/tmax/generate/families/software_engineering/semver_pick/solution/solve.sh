mkdir -p {{ out }}
{% if level >= 3 -%}
head -n 5 /app/{{ index_file }}
cat /app/{{ req_file }}
{% endif -%}
{% if vendored -%}
ls -R /app/vendor
cat /app/vendor/semverlite/README.md
cp /app/vendor/semverlite/core.py /tmp/core.py.orig
cat > /app/vendor/semverlite/core.py <<'TMAX_EOF'
{{ core }}
TMAX_EOF
PYTHONPATH=/app/vendor python3 -c 'import semverlite as s; assert s.compare("1.2.10", "1.2.9") == 1'
{% if level >= 2 -%}
PYTHONPATH=/app/vendor python3 -c 'import semverlite as s; assert s.satisfies("0.2.5", "^0.2.3") and not s.satisfies("0.3.0", "^0.2.3")'
{% endif -%}
{% if level >= 3 -%}
PYTHONPATH=/app/vendor python3 -c 'import semverlite as s; assert s.compare("1.0.0-rc.10", "1.0.0-rc.9") == 1'
{% endif -%}
{% if level >= 4 -%}
PYTHONPATH=/app/vendor python3 -c 'import semverlite as s; assert s.satisfies("3.1.0", "^1.0.0 || ^3.0.0")'
{% endif -%}
diff -u --label a/semverlite/core.py --label b/semverlite/core.py /tmp/core.py.orig /app/vendor/semverlite/core.py > {{ out }}/semverlite.patch || true
python3 /app/{{ tool }}
cat {{ out }}/{{ res_file }}
{% if language -%}
mkdir -p {{ program_dir }}
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
diff <({{ pick }} /app/{{ index_file }} < /app/{{ req_file }}) {{ out }}/{{ res_file }}
{% endif -%}
{% else -%}
{% if language -%}
mkdir -p {{ program_dir }}
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% else -%}
cat > /tmp/pick.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
printf 'a 1.2.9\na 1.2.10\na 2.0.0\n' > /tmp/smoke_index.txt
test "$(echo 'a <2.0.0' | {{ pick }} /tmp/smoke_index.txt)" = 'a 1.2.10'
{{ pick }} /app/{{ index_file }} < /app/{{ req_file }} > {{ out }}/{{ res_file }}
{% if level >= 2 -%}
{{ pick }} --sort /app/{{ index_file }} > {{ out }}/{{ ver_file }}
{% endif -%}
{% if level >= 3 -%}
awk 'NR == FNR {for (i = 2; i <= NF; i++) {pos[$1 " " $i] = i; if ($i !~ /-/) latest[$1] = $i} next} $2 != "NONE" && ($1 in latest) && pos[$1 " " $2] < pos[$1 " " latest[$1]] {print $1, $2, latest[$1]}' {{ out }}/{{ ver_file }} {{ out }}/{{ res_file }} > {{ out }}/{{ old_file }}
{% endif -%}
{% if level >= 4 -%}
awk 'BEGIN {printf "{"} {printf "%s\"%s\": %s", (NR > 1 ? ", " : ""), $1, ($2 == "NONE" ? "null" : "\"" $2 "\"")} END {print "}"}' {{ out }}/{{ res_file }} > {{ out }}/{{ lock_file }}
python3 -m json.tool {{ out }}/{{ lock_file }}
grep -c ' NONE$' {{ out }}/{{ res_file }} || true
{% endif -%}
{% endif -%}
