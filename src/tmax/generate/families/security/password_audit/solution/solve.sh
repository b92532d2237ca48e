{% if level >= 3 -%}
wc -l {{ dump }} {{ wordlist }}
head -n 3 {{ dump }}
{% endif -%}
{% if level >= 4 -%}
cut -d'$' -f2 {{ dump }} | sort | uniq -c
{% endif -%}
{{ program_step }}
{{ crack }} {{ dump }} {{ wordlist }} > /tmp/cracked.txt
mv /tmp/cracked.txt {{ cracked }}
{%- if level >= 2 %}
cut -d: -f1 {{ dump }} | LC_ALL=C sort > /tmp/users.txt
cut -d: -f1 {{ cracked }} | LC_ALL=C sort > /tmp/cracked_users.txt
LC_ALL=C comm -23 /tmp/users.txt /tmp/cracked_users.txt > {{ uncracked }}
{%- endif %}
{%- if level >= 3 %}
awk -F: '{print $2 "\t" $1}' {{ cracked }} | LC_ALL=C sort > /tmp/pw_users.txt
awk -F'\t' '{u[$1] = n[$1]++ ? u[$1] "," $2 : $2} END {for (p in n) if (n[p] > 1) print p, u[p]}' /tmp/pw_users.txt | LC_ALL=C sort > {{ shared }}
{%- endif %}
{%- if level >= 4 %}
awk -F: 'NR == FNR {ok[$1] = 1; next} {split($2, p, "$"); t[p[2]]++; n++; if ($1 in ok) {c[p[2]]++; k++}} END {printf "{\"total\": %d, \"cracked\": %d, \"percent\": %.1f, \"by_algorithm\": {", n, k, 100 * k / n; s = ""; for (a in t) {printf "%s\"%s\": {\"total\": %d, \"cracked\": %d}", s, a, t[a], c[a] + 0; s = ", "} print "}}"}' {{ cracked }} {{ dump }} > {{ report }}
python3 -m json.tool {{ report }}
{%- endif %}
