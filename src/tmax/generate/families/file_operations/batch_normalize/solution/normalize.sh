#!/bin/bash
# Usage: normalize.sh FILE -> the file as UTF-8 with LF line endings on stdout
set -euo pipefail
if iconv -f UTF-8 -t UTF-8 "$1" > /dev/null 2>&1; then
  cat -- "$1"
else
  iconv -f LATIN1 -t UTF-8 "$1"
fi | LC_ALL=C sed -e '1s/^\xEF\xBB\xBF//' -e 's/\r$//'
