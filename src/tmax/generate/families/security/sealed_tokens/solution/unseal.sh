#!/bin/bash
# Decode sealer tokens read on stdin (one per line) back to their plaintexts.
export LC_ALL=C
{{ consts }}
nkey=${#KEY[@]}
while IFS= read -r token || [[ -n $token ]]; do
  token=${token%$'\r'}
  body=$token
  if ((LEVEL >= 4)); then
    if [[ ! $token =~ ^v2:(([0-9a-f][0-9a-f])+):([0-9a-f][0-9a-f])$ ]]; then
      echo INVALID
      continue
    fi
    body=${BASH_REMATCH[1]}
    check=$((16#${BASH_REMATCH[3]}))
  fi
  text="" sum=0 bad=0
  for ((i = 0; i < ${#body} / 2; i++)); do
    v=$((16#${body:2*i:2}))
    if ((LEVEL >= 3)); then v=$(((v - STEP * i) & 255)); fi
    v=$((v ^ KEY[i % nkey]))
    if ((v < 32 || v > 126)); then bad=1; fi
    sum=$((sum + v))
    printf -v hx '%02x' "$v"
    printf -v ch "\\x$hx"
    text+=$ch
  done
  if ((LEVEL >= 4)); then
    n=$((${#body} / 2))
    if ((bad || (((sum + n) & 255) ^ KEY[0]) != check)); then
      echo INVALID
      continue
    fi
  fi
  printf '%s\n' "$text"
done
