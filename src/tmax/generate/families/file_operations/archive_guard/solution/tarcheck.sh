#!/bin/bash
# Screen a tar archive before extraction: prints OK or REJECT RULE.
export LC_ALL=C
LEVEL={{ level }}
MAX_MEMBERS={{ limits[0] }}
MAX_BYTES={{ limits[1] }}

escapes() {  # start directory $1 (may be empty), link target $2
  local target=$2 part
  [[ $target == /* ]] && return 0
  local -a parts=()
  local IFS=/
  for part in $1; do [[ -n $part && $part != . ]] && parts+=("$part"); done
  for part in $target; do
    case $part in
      "" | .) ;;
      ..) ((${#parts[@]})) || return 0; unset 'parts[${#parts[@]}-1]' ;;
      *) parts+=("$part") ;;
    esac
  done
  return 1
}

declare -A broken=()
count=0 bytes=0
names=()
while IFS= read -r line; do
  read -r perms _owner size _date _time rest <<< "$line"
  type=${perms:0:1}
  name=$rest
  case $type in
    l) name=${rest% -> *}; target=${rest#* -> } ;;
    h) name=${rest% link to *}; target=${rest#* link to } ;;
  esac
  name=${name%/}
  names+=("$name")
  count=$((count + 1))
  [[ $name == /* ]] && broken[absolute]=1
  [[ /$name/ == */../* ]] && broken[traversal]=1
  if ((LEVEL >= 2)); then
    if [[ $type == l ]]; then
      dir=""
      [[ $name == */* ]] && dir=${name%/*}
      escapes "$dir" "$target" && broken[link]=1
    elif [[ $type == h ]]; then
      escapes "" "$target" && broken[link]=1
    fi
  fi
  case $type in
    -) bytes=$((bytes + size)) ;;
    c | b | p) broken[special]=1 ;;
  esac
done < <(tar -tvPf "$1" --numeric-owner)
if ((LEVEL >= 3)); then
  ((count > MAX_MEMBERS)) && broken[count]=1
  ((bytes > MAX_BYTES)) && broken[size]=1
else
  unset 'broken[special]'
fi
if ((LEVEL >= 4)) && [[ -n $(printf '%s\n' "${names[@]}" | sort | uniq -d) ]]; then
  broken[duplicate]=1
fi
for rule in absolute traversal link special duplicate count size; do
  if [[ -n ${broken[$rule]-} ]]; then echo "REJECT $rule"; exit 0; fi
done
echo OK
