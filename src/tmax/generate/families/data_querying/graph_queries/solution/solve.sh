head -n 5 /app/graph/edges.csv
{% if level >= 3 -%}
wc -l /app/graph/edges.csv
{% endif -%}
mkdir -p /app/out
{{ setup }}
{{ run }} /app/graph/edges.csv degrees > /app/out/degrees.csv
{% if level >= 2 -%}
{{ run }} /app/graph/edges.csv components > /app/out/components.txt
{% endif -%}
{% if level >= 3 -%}
{{ run }} /app/graph/edges.csv dist {{ source }} > /app/out/distances.csv
tail -n 3 /app/out/distances.csv
{% endif -%}
{% if level >= 4 -%}
{{ run }} /app/graph/edges.csv path {{ source }} {{ target }} > /app/out/path.txt
nodes=$(tail -n +2 /app/out/degrees.csv | wc -l)
edges=$(awk -F, 'NR > 1 { s += $2 } END { print s / 2 }' /app/out/degrees.csv)
comps=$(wc -l < /app/out/components.txt)
largest=$(head -n 1 /app/out/components.txt | wc -w)
ecc=$(tail -n 1 /app/out/distances.csv | cut -d, -f2)
printf '{"nodes": %d, "edges": %d, "components": %d, "largest_component": %d, "eccentricity": %d}\n' "$nodes" "$edges" "$comps" "$largest" "$ecc" > /app/out/summary.json
cat /app/out/summary.json /app/out/path.txt
{% endif -%}
