#!/bin/bash
# Convert one vendor text file to clean UTF-8 on standard output (--detect FILE: its encoding).
export LC_ALL=C
LEVEL={{ level }}

detect() {
  local head
  head=$(head -c 3 "$1" | od -An -tx1 | tr -d ' \n')
  case $head in
    efbbbf) echo utf-8-bom ;;
    fffe*) echo utf-16le ;;
    feff*) echo utf-16be ;;
    *)
      if iconv -f UTF-8 -t UTF-8 "$1" > /dev/null 2>&1; then echo utf-8
      elif [[ $(tr -d '\000-\177\240-\377' < "$1" | head -c 1 | wc -c) -gt 0 ]]; then
        echo windows-1252
      else echo latin-1
      fi ;;
  esac
}

if [[ $1 == --detect ]]; then detect "$2"; exit 0; fi
kind=$(detect "$1")
case $kind in
  utf-8-bom) skip=3 from=UTF-8 ;;
  utf-16le) skip=2 from=UTF-16LE ;;
  utf-16be) skip=2 from=UTF-16BE ;;
  utf-8) skip=0 from=UTF-8 ;;
  windows-1252) skip=0 from=WINDOWS-1252 ;;
  *) skip=0 from=ISO-8859-1 ;;
esac
work=$(mktemp)
trap 'rm -f "$work"' EXIT
tail -c +$((skip + 1)) "$1" | iconv -f "$from" -t UTF-8 > "$work"
if ((LEVEL >= 2)); then sed -i 's/\r$//' "$work"; fi
if ((LEVEL >= 3)) && [[ $(tail -c 1 "$work" | od -An -tx1 | tr -d ' \n') == 1a ]]; then
  head -c -1 "$work"
else
  cat "$work"
fi
