#!/bin/bash
# Upload-name gate: one verdict line (ACCEPT / REJECT RULE) per name read on stdin.
export LC_ALL=C
{{ consts }}

decode_once() {  # percent-decode $1 once into OUT; return 1 on a non-printable byte
  local s=$1 i=0 n=${#1} hex v ch
  OUT=""
  while ((i < n)); do
    ch=${s:i:1}
    hex=${s:i+1:2}
    if [[ $ch == % && $hex =~ ^[0-9A-Fa-f][0-9A-Fa-f]$ ]]; then
      v=$((16#$hex))
      if ((v < 32 || v > 126)); then return 1; fi
      printf -v ch "\\x$hex"
      OUT+=$ch
      i=$((i + 3))
    else
      OUT+=$ch
      i=$((i + 1))
    fi
  done
  return 0
}

verdict() {
  local name=$1 prev seg last ext stem rest
  local -a segs=()
  if ((LEVEL >= 2)); then
    while :; do
      decode_once "$name" || { echo badbyte; return; }
      prev=$name
      name=$OUT
      if ((LEVEL < 3)) || [[ $name == "$prev" ]]; then break; fi
    done
  fi
  if ((LEVEL >= 3 && ${#name} > MAXLEN)); then echo length; return; fi
  if ((LEVEL >= 2)); then name=${name//\\//}; fi
  if [[ $name == /* ]]; then echo absolute; return; fi
  if ((LEVEL >= 3)) && [[ $name =~ ^[A-Za-z]: ]]; then echo drive; return; fi
  rest="$name/"
  while [[ -n $rest ]]; do
    segs+=("${rest%%/*}")
    rest=${rest#*/}
  done
  for seg in "${segs[@]}"; do
    if [[ $seg == .. ]]; then echo traversal; return; fi
  done
  if ((LEVEL >= 4)); then
    for seg in "${segs[@]}"; do [[ -z $seg ]] && { echo empty; return; }; done
    for seg in "${segs[@]}"; do [[ $seg == .* ]] && { echo hidden; return; }; done
    for seg in "${segs[@]}"; do
      [[ $seg == *. || $seg == *" " ]] && { echo trailing; return; }
    done
    for seg in "${segs[@]}"; do
      stem=${seg%%.*}
      case ${stem^^} in
        CON | PRN | AUX | NUL | COM[1-9] | LPT[1-9]) echo reserved; return ;;
      esac
    done
  fi
  if ((LEVEL >= 3)); then
    last=${segs[-1]}
    if [[ $last != *.* ]]; then echo extension; return; fi
    ext=${last##*.}
    if [[ " $ALLOWED " != *" ${ext,,} "* ]]; then echo extension; return; fi
  fi
  echo ok
}

while IFS= read -r line || [[ -n $line ]]; do
  rule=$(verdict "$line")
  if [[ $rule == ok ]]; then echo ACCEPT; else echo "REJECT $rule"; fi
done
