cat -n {{ program }}
cp {{ program }} /tmp/rank.orig
{% if lang == "c" -%}
gcc -O2 -std=c11 -o /tmp/rank {{ program }} && /tmp/rank {{ data }} || true
{% else -%}
{{ run }} {{ data }} || true
{% endif -%}
{% if level >= 2 -%}
printf 'name,score\nb,1\na,1\nc,-2\n' > /tmp/tiny.csv
{% endif -%}
cat > {{ program }} <<'FIXED_EOF'
{{ fixed }}
FIXED_EOF
{% if lang == "c" -%}
gcc -O2 -std=c11 -o /tmp/rank {{ program }}
{% endif -%}
{% if level >= 2 -%}
{{ run }} /tmp/tiny.csv
{% endif -%}
mkdir -p /app/out
{{ run }} {{ data }} > /app/out/ranking.txt
{% if level >= 3 -%}
diff /tmp/rank.orig {{ program }} || true
{% endif -%}
{% if level >= 4 -%}
diff /tmp/rank.orig {{ program }} | grep -E '^[0-9]+(,[0-9]+)?c' | cut -dc -f1 > /tmp/changed.txt || true
printf '%s\n' {{ bug_lines | join(" ") }} > /app/out/bugs.txt
cat /tmp/changed.txt /app/out/bugs.txt
cat /app/out/ranking.txt
{% endif -%}
