mkdir -p {{ out_dir }}
{{ setup }}
test "$({{ sealer }} '{{ probe }}')" = '{{ probe_token }}'
{%- if level >= 2 %}
test "$({{ sealer }} '{{ probe }}' | {{ decoder }})" = '{{ probe }}'
{%- endif %}
{%- if level == 1 %}
{{ decoder }} < {{ log }} > {{ outputs["decoded"] }}
printf '%02x\n' $(( 0x$({{ sealer }} A) ^ 0x41 )) > {{ outputs["key"] }}
{%- elif level == 2 %}
{{ decoder }} < {{ log }} > {{ outputs["decoded"] }}
echo {{ key_hex }} > {{ outputs["key"] }}
{%- else %}
awk '{print $5}' {{ log }} > /tmp/tokens.txt
{{ decoder }} < /tmp/tokens.txt > /tmp/plain.txt
test "$(wc -l < /tmp/plain.txt)" -eq "$(wc -l < {{ log }})"
awk '{print NR "\t" $2}' {{ log }} > /tmp/meta.txt
paste -d '\t' /tmp/meta.txt /tmp/plain.txt > /tmp/all.tsv
{%- if level >= 4 %}
awk -F'\t' '$3 == "INVALID" {print $1}' /tmp/all.tsv > {{ outputs["tampered"] }}
awk -F'\t' '$3 != "INVALID"' /tmp/all.tsv > {{ outputs["decoded"] }}
{%- else %}
cp /tmp/all.tsv {{ outputs["decoded"] }}
{%- endif %}
awk -F'\t' '$3 ~ /^USER / {u[$2] = substr($3, 6); next} $3 ~ /^PASS / && ($2 in u) {print $2, u[$2], substr($3, 6)}' {{ outputs["decoded"] }} > {{ outputs["credentials"] }}
{%- if level >= 4 %}
awk -F'\t' '$3 ~ /^GET / {print substr($3, 5)}' {{ outputs["decoded"] }} | LC_ALL=C sort -u > {{ outputs["exfil"] }}
{%- endif %}
{%- endif %}
