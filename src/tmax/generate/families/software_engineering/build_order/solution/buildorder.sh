#!/bin/bash
# Print the build order of a manifest (`name: dep dep` lines), one package per line.
export LC_ALL=C
declare -A deps=() known=() done=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line#"${line%%[![:space:]]*}"}
  [[ -z $line || $line == \#* ]] && continue
  name=${line%%:*}
  name=${name%"${name##*[![:space:]]}"}
  deps[$name]=${line#*:}
  known[$name]=1
done < "$1"
mapfile -t names < <(printf '%s\n' "${!known[@]}" | sort)
[[ ${#known[@]} -eq 0 ]] && exit 0
while :; do
  picked=""
  for name in "${names[@]}"; do
    [[ -n ${done[$name]+x} ]] && continue
    ready=1
    for dep in ${deps[$name]}; do
      if [[ -n ${known[$dep]+x} && -z ${done[$dep]+x} ]]; then ready=0; break; fi
    done
    if ((ready)); then picked=$name; break; fi
  done
  [[ -z $picked ]] && break
  done[$picked]=1
  printf '%s\n' "$picked"
done
