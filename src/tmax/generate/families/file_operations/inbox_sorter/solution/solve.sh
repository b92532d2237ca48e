mkdir -p /app/out /app/sorted
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{{ run }} /app/rules.conf /app/inbox /app/sorted > /app/out/moves.tsv
{% if level >= 2 -%}
cut -f2 /app/out/moves.tsv | cut -d/ -f1 | LC_ALL=C sort | uniq -c | awk '{print $2, $1}' > /app/out/counts.txt
{% endif -%}
{% if level >= 3 -%}
find /app/inbox -mindepth 1 -depth -type d -empty -delete
{% endif -%}
{% if level >= 4 -%}
python3 - <<'TMAX_PY'
import json
index = {}
for line in open('/app/out/moves.tsv', encoding='utf-8'):
    cat, year, name = line.rstrip('\n').split('\t')[1].split('/', 2)
    index.setdefault(cat, {}).setdefault(year, []).append(name)
index = {c: {y: sorted(n) for y, n in ys.items()} for c, ys in index.items()}
with open('/app/out/index.json', 'w', encoding='utf-8') as out:
    json.dump(index, out, ensure_ascii=False, indent=1, sort_keys=True)
TMAX_PY
{{ manifest }}
find /app/sorted -type f | wc -l
test -z "$(find /app/inbox -mindepth 1 -print -quit)"
cat /app/out/counts.txt
wc -l < /app/out/moves.tsv
(cd /app/out && sha256sum -c --quiet checksums.sha256)
python3 -m json.tool /app/out/index.json > /dev/null
{% endif -%}
{% if serve -%}
cat > /app/indexd.py <<'TMAX_EOF'
{{ server }}
TMAX_EOF
{{ start_service }}
{% endif -%}
