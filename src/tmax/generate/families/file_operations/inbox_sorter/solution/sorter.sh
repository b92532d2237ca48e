#!/bin/bash
# Usage: sorter.sh RULES SRC DEST -> moves every file, prints "SOURCE<TAB>DESTINATION"
set -euo pipefail
rules=$1 src=$2 dest=$3
declare -A category=()
while read -r ext cat rest; do
  [[ -z $ext || $ext == \#* || -z $cat || -n $rest ]] && continue
  category[${ext,,}]=$cat
done < "$rules"
find "$src" -type f -printf '%P\0' | LC_ALL=C sort -z | while IFS= read -r -d '' rel; do
  name=${rel##*/}
  base=${name#.}
  ext=""
  [[ $base == *.* ]] && ext=${base##*.} && ext=${ext,,}
  cat=misc
  [[ -n $ext && -n ${category[$ext]+set} ]] && cat=${category[$ext]}
  year=undated
  [[ $name =~ ([0-9]{4})-[0-9]{2}-[0-9]{2} ]] && year=${BASH_REMATCH[1]}
  mkdir -p -- "$dest/$cat/$year"
  mv -- "$src/$rel" "$dest/$cat/$year/$name"
  printf '%s\t%s\n' "$rel" "$cat/$year/$name"
done
