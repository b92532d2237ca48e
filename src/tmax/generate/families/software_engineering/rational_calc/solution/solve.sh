mkdir -p {{ out }}
{% if language -%}
mkdir -p {{ program_dir }}
cat > {{ program }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if language == "c" -%}
gcc -O2 -std=c11 -o {{ calc }} {{ program }} -lm
{% endif -%}
{% else -%}
cat > /tmp/ratcalc.sh <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% endif -%}
test "$(echo '1/2 + 1/3 * 2' | {{ calc }})" = 7/6
{% if level <= 2 -%}
{{ calc }} < /app/{{ in_dir }}/{{ expr_file }} > {{ out }}/{{ res_file }}
{% else -%}
{% for name in inputs -%}
{{ calc }} < /app/{{ in_dir }}/{{ name }} > {{ out }}/{{ name }}
{% endfor -%}
for b in {{ range(1, inputs | length + 1) | join(" ") }}; do awk -v f={{ prefix }}-$b.txt '$0 == "ERROR" {print f ":" NR}' {{ out }}/{{ prefix }}-$b.txt; done > {{ out }}/{{ err_file }}
{% endif -%}
{% if level >= 2 -%}
cat {{ outputs | join(" ") }} > /tmp/all_{{ res_file }}
awk -F/ '$0 != "ERROR" {n = $1 + 0; d = (NF > 1) ? $2 + 0 : 1; if (!seen || n * bd > bn * d) {bn = n; bd = d; big = $0} if (!seen || n * sd < sn * d) {sn = n; sd = d; small = $0} seen = 1} END {print "max " big; print "min " small}' /tmp/all_{{ res_file }} > {{ out }}/{{ ext_file }}
{% endif -%}
{% if level >= 4 -%}
total=$(wc -l < /tmp/all_{{ res_file }})
errors=$(grep -c '^ERROR$' /tmp/all_{{ res_file }} || true)
integers=$(grep -c '^-*[0-9][0-9]*$' /tmp/all_{{ res_file }} || true)
max=$(awk '$1 == "max" {print $2}' {{ out }}/{{ ext_file }})
min=$(awk '$1 == "min" {print $2}' {{ out }}/{{ ext_file }})
printf '{"expressions": %d, "errors": %d, "integers": %d, "max": "%s", "min": "%s"}\n' "$total" "$errors" "$integers" "$max" "$min" > {{ out }}/{{ sum_file }}
{% endif -%}
