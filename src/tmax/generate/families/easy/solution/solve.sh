{% for step in steps -%}
{{ step.command }}
{% endfor -%}
