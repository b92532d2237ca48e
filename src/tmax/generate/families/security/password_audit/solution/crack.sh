#!/bin/bash
# Crack a credential dump with a wordlist: prints user:password lines, sorted by user.
# usage: crack.sh DUMP WORDLIST
set -euo pipefail
export LC_ALL=C
LEVEL={{ level }}
dump=$1
wordlist=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

leet() {
  local s=$1
  s=${s//a/4}; s=${s//e/3}; s=${s//i/1}; s=${s//o/0}; s=${s//s/5}
  REPLY=$s
}
reverse() {
  local s=$1 out="" i
  for ((i = ${#s} - 1; i >= 0; i--)); do out+=${s:i:1}; done
  REPLY=$out
}

suffixes=("")
if ((LEVEL >= 2)); then suffixes+=(0 1 2 3 4 5 6 7 8 9); fi
if ((LEVEL >= 3)); then
  count=${#suffixes[@]}
  for ((k = 0; k < count; k++)); do suffixes+=("${suffixes[k]}!"); done
fi

declare -A seen=()
candidates=()
while IFS= read -r word || [[ -n $word ]]; do
  word=${word%$'\r'}
  [[ -z $word ]] && continue
  forms=("$word")
  if ((LEVEL >= 2)); then forms+=("${word^}"); fi
  if ((LEVEL >= 3)); then leet "$word"; forms+=("$REPLY" "${REPLY^}"); fi
  if ((LEVEL >= 4)); then reverse "$word"; forms+=("$REPLY" "${REPLY^}"); fi
  for form in "${forms[@]}"; do
    for suffix in "${suffixes[@]}"; do
      candidate=$form$suffix
      [[ -n ${seen[$candidate]+x} ]] && continue
      seen[$candidate]=1
      candidates+=("$candidate")
    done
  done
done < "$wordlist"
printf '%s\n' "${candidates[@]}" > "$work/candidates"

# one file per candidate (its name is the candidate's index), hashed by one process per tool
write_all() {  # $1 directory, $2 prefix (salt)
  local i
  mkdir -p "$1"
  for i in "${!candidates[@]}"; do printf '%s%s' "$2" "${candidates[i]}" > "$1/$i"; done
}
hash_dir() {  # $1 directory, $2 tool; prints "digest index"
  (cd "$1" && find . -type f -printf '%P\0' | xargs -0 "$2") | awk '{print $1, $2}'
}

: > "$work/found"
written=0
for alg in md5 sha1 sha256; do
  if grep -q ":\\\$$alg\\\$" "$dump"; then
    if ((!written)); then write_all "$work/plain" ""; written=1; fi
    hash_dir "$work/plain" "${alg}sum" > "$work/table.$alg"
    awk -F'$' -v alg="$alg" 'NR == FNR { split($0, p, " "); idx[p[1]] = p[2]; next }
      $2 == alg && ($3 in idx) { sub(/:$/, "", $1); print $1, idx[$3] }' \
      "$work/table.$alg" "$dump" >> "$work/found"
  fi
done
n=0
while IFS='$' read -r user alg salt digest; do
  [[ $alg == sha256s ]] || continue
  user=${user%:}
  n=$((n + 1))
  write_all "$work/salted$n" "$salt"
  hash_dir "$work/salted$n" sha256sum | awk -v d="$digest" -v u="$user" '$1 == d {print u, $2}' \
    >> "$work/found"
  rm -rf "$work/salted$n"
done < "$dump"
awk 'NR == FNR { c[NR - 1] = $0; next } { print $1 ":" c[$2] }' "$work/candidates" "$work/found" \
  | sort -t: -k1,1
