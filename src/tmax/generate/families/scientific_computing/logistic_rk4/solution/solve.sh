mkdir -p /app/out
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{% if lang == "c" and code -%}
gcc -O2 -std=c11 -o /tmp/logistic /app/logistic.c -lm
{% endif -%}
{% for src, out in pairs -%}
{{ run }} {{ src }} > {{ out }}
{% endfor -%}
{% if level >= 2 -%}
first=$(grep -v '^#' /app/cases/batch1.txt | head -n 1)
set -- $first
awk -v r=$2 -v k=$3 -v y=$4 -v h=$5 -v n=$6 'function f(v) { return r * v * (1 - v / k) } BEGIN { printf "0 %.6f\n", y; for (i = 1; i <= n; i++) { a = f(y); b = f(y + h / 2 * a); c = f(y + h / 2 * b); d = f(y + h * c); y = y + h / 6 * (a + 2*b + 2*c + d); printf "%d %.6f\n", i, y } }' > /app/out/trajectory.tsv
{% endif -%}
{% if level >= 3 -%}
cat /app/out/*.final | sort -k2,2 -g -r | head -n 1 | cut -d' ' -f1 > /app/out/largest.txt
{% endif -%}
{% if level >= 4 -%}
count=$(cat /app/out/*.final | grep -c .)
echo "{\"cases\": $count}" > /app/out/summary.json
(cd /app/out && sha256sum {{ finals | join(" ") }} > checksums.sha256)
wc -l /app/out/*.final
{% endif -%}
{% if service -%}
cat > /app/solver_service.py <<'TMAX_EOF'
{{ service_source }}
TMAX_EOF
{{ start_service }}
{% endif -%}
