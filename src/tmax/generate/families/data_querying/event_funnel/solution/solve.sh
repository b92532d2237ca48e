head -n 3 {{ data }}/events.jsonl
mkdir -p {{ out }}
{% if level >= 3 -%}
wc -l {{ data }}/events.jsonl
jq -r .id {{ data }}/events.jsonl | sort | uniq -d | head
{% endif -%}
{{ setup }}
{% for report in reports -%}
{{ run }} {{ data }} {{ report }} > {{ out }}/{{ report }}.csv
{% endfor -%}
{% if level >= 4 -%}
head -n 3 {{ data }}/users.csv
jq -r .event {{ data }}/events.jsonl | sort | uniq -c
cat {{ out }}/funnel.csv {{ out }}/by_country.csv
wc -l {{ out }}/*.csv
{% endif -%}
