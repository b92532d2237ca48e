#!/bin/bash
# Usage: triage.sh <dir> [status|first]
export LC_ALL=C
dir=$1
mode=${2:-status}
if [ "$mode" = status ]; then echo "file,status"; else echo "file,line"; fi
for path in "$dir"/*; do
  name=$(basename "$path")
  set +e
  out=$({{ binary }} < "$path" 2>/dev/null)
  rc=$?
  set -e
  if [ -z "$out" ]; then lines=0; else lines=$(printf '%s\n' "$out" | wc -l); fi
  if [ "$rc" -gt 128 ]; then status="signal:SIG$(kill -l $((rc - 128)))"
  elif [ "$rc" -gt 0 ]; then status="exit:$rc"
  else status=ok; fi
  if [ "$mode" = status ]; then echo "$name,$status"
  elif [ "$status" != ok ]; then echo "$name,$((lines + 1))"; fi
done
