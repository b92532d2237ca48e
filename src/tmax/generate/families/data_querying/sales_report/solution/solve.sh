sqlite3 {{ db }} '.tables'
{% if level >= 2 -%}
sqlite3 {{ db }} '.schema orders'
sqlite3 {{ db }} 'SELECT status, COUNT(*) FROM orders GROUP BY status;'
{% endif -%}
{% if level >= 3 -%}
sqlite3 {{ db }} 'SELECT COUNT(*) FROM customers WHERE is_test;'
{% endif -%}
{% if level >= 4 -%}
sqlite3 {{ db }} 'PRAGMA foreign_key_list(order_items);'
{% endif -%}
mkdir -p {{ out }}
{% if code -%}
{{ setup }}
{{ run }} {{ db }} {{ out }}
{% else -%}
sqlite3 -header -separator , {{ db }} "{{ queries["region_revenue.csv"] }}" > {{ out }}/region_revenue.csv
{% if level >= 2 -%}
sqlite3 -header -separator , {{ db }} "{{ queries["top_customers.csv"] }}" > {{ out }}/top_customers.csv
{% endif -%}
{% if level >= 3 -%}
sqlite3 -header -separator , {{ db }} "SELECT substr(o.order_date, 1, 7) AS month
{%- for c in categories %}, SUM(CASE WHEN p.category = '{{ c }}' THEN oi.qty * p.price_cents ELSE 0 END) AS {{ c }}{% endfor %} {{ queries["pivot_base"] }} GROUP BY month ORDER BY month;" > {{ out }}/monthly_by_category.csv
{% endif -%}
{% if level >= 4 -%}
sqlite3 -header -separator , {{ db }} "{{ queries["region_leaders.csv"] }}" > {{ out }}/region_leaders.csv
sqlite3 {{ db }} "{{ queries["summary.json"] }}" > {{ out }}/summary.json
{% endif -%}
{% endif -%}
head -n 3 {{ out }}/region_revenue.csv
{% if level >= 2 -%}
head -n 3 {{ out }}/top_customers.csv
{% endif -%}
{% if level >= 4 -%}
cat {{ out }}/summary.json
wc -l {{ out }}/*.csv
{% endif -%}
