#!/bin/bash
# Convert a fixed-width export to CSV: {{ tool_name }} LAYOUT FILE (CSV on stdout, UTF-8;
# rejected records as `LINE REASON` on stderr).
export LC_ALL=C
LEVEL={{ level }}
names=() starts=() widths=() kinds=()
while read -r name start width kind rest || [[ -n $name ]]; do
  [[ -z $name || -z $kind || $name == \#* ]] && continue
  names+=("$name") starts+=("$start") widths+=("$width") kinds+=("$kind")
done < "$1"
length=0
for i in "${!names[@]}"; do
  end=$((starts[i] + widths[i] - 1))
  ((end > length)) && length=$end
done

valid_date() {
  [[ $1 =~ ^[0-9]{8}$ ]] || return 1
  local y=$((10#${1:0:4})) m=$((10#${1:4:2})) d=$((10#${1:6:2})) days
  ((m >= 1 && m <= 12 && d >= 1)) || return 1
  case $m in
    2) if (((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)); then days=29; else days=28; fi ;;
    4 | 6 | 9 | 11) days=30 ;;
    *) days=31 ;;
  esac
  ((d <= days))
}

{
  (IFS=,; printf '%s\n' "${names[*]}")
  n=0
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    if ((LEVEL >= 2)); then line=${line%$'\r'}; fi
    [[ -z $line ]] && continue
    if ((LEVEL >= 3)) && [[ ${line:0:1} != D ]]; then continue; fi
    if ((${#line} != length)); then echo "$n length" >&2; continue; fi
    out="" bad=""
    for i in "${!names[@]}"; do
      v=${line:starts[i]-1:widths[i]}
      case ${kinds[i]} in
        text) v=${v#"${v%%[! ]*}"}; v=${v%"${v##*[! ]}"} ;;
        int) v=$((10#$v)) ;;
        money)
          if [[ ! $v =~ ^-?[0-9]+$ ]]; then bad=amount; break; fi
          cents=$((10#${v#-}))
          sign=""
          if [[ $v == -* ]] && ((cents)); then sign=-; fi
          printf -v v '%s%d.%02d' "$sign" $((cents / 100)) $((cents % 100)) ;;
        date)
          if ! valid_date "$v"; then bad=date; break; fi
          v=${v:0:4}-${v:4:2}-${v:6:2} ;;
      esac
      if [[ $v == *[,\"]* ]]; then v=\"${v//\"/\"\"}\"; fi
      if ((i > 0)); then out+=,; fi
      out+=$v
    done
    if [[ -n $bad ]]; then echo "$n $bad" >&2; continue; fi
    printf '%s\n' "$out"
  done < "$2"
} | iconv -f ISO-8859-1 -t UTF-8
