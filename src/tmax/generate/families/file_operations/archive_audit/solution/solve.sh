mkdir -p {{ out }}
cat > {{ tool }} <<'TMAX_EOF'
{{ source }}
TMAX_EOF
{{ run }} {{ incoming }}/{{ manifest_name }} {{ archives | join(" ") }} > {{ report }}
{% if repack -%}
rm -rf /tmp/unpacked /tmp/good
mkdir -p /tmp/unpacked /tmp/good
{% for archive in archives -%}
{% if archive.endswith(".zip") -%}
unzip -q -o {{ archive }} -d /tmp/unpacked
{% else -%}
tar -xf {{ archive }} -C /tmp/unpacked
{% endif -%}
{% endfor -%}
awk '$1 == "OK" {print $2}' {{ report }} > /tmp/ok.list
(cd /tmp/unpacked && xargs -r cp --parents -t /tmp/good < /tmp/ok.list)
tar -C /tmp/good -cf - -T /tmp/ok.list | gzip -9 > {{ verified }}
{% endif -%}
{% if level >= 4 -%}
awk '$1 == "CORRUPT" || $1 == "EXTRA" {print $2}' {{ report }} > /tmp/bad.list
mkdir -p {{ quarantine }}
(cd /tmp/unpacked && xargs -r cp --parents -t {{ quarantine }} < /tmp/bad.list)
ok=$(grep -c '^OK ' {{ report }} || true)
corrupt=$(grep -c '^CORRUPT ' {{ report }} || true)
missing=$(grep -c '^MISSING ' {{ report }} || true)
extra=$(grep -c '^EXTRA ' {{ report }} || true)
echo "{\"ok\": $ok, \"corrupt\": $corrupt, \"missing\": $missing, \"extra\": $extra}" > {{ summary }}
(cd {{ out }} && sha256sum {{ report_name }} {{ verified_name }} {{ summary_name }} > {{ checksums }})
{% endif -%}
