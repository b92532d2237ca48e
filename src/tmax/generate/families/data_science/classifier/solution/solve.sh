head -n 3 /app/data/train.csv
{% if level >= 2 -%}
cut -d, -f{{ label_column }} /app/data/train.csv | sort | uniq -c
{% endif -%}
{% if level >= 3 -%}
grep -c ',,' /app/data/train.csv || true
wc -l /app/data/*.csv
{% endif -%}
mkdir -p /app/out
cat > {{ source }} <<'PROGRAM_EOF'
{{ body }}
PROGRAM_EOF
{% if lang == "c" -%}
{{ build }}
{% elif lang == "bash" -%}
chmod +x {{ source }}
{% endif -%}
{{ run }} /app/data/train.csv /app/data/test.csv > /app/out/predictions.txt
{% if level >= 2 -%}
echo label,count > /app/out/class_counts.csv
sort /app/out/predictions.txt | uniq -c | awk '{print $2","$1}' >> /app/out/class_counts.csv
{% endif -%}
{% if level >= 4 -%}
{{ run }} /app/data/train.csv /app/data/train.csv > /tmp/self.txt
cut -d, -f{{ label_column }} /app/data/train.csv | tail -n +2 > /tmp/truth.txt
paste -d' ' /tmp/self.txt /tmp/truth.txt | awk '$1 == $2' | wc -l
cat /app/out/class_counts.csv
{% endif -%}
{% if service -%}
cat > /app/server.py <<'SERVER_EOF'
{{ server }}
SERVER_EOF
nohup python3 /app/server.py > /app/server.log 2>&1 &
{{ wait_port }}
{% endif -%}
