#!/bin/bash
# Usage: failures.sh LOG... -> "COUNT IP" per source of failed SSH passwords
set -euo pipefail
cat "$@" | LC_ALL=C sed -n -E \
  's/.*sshd\[[0-9]+\]: Failed password for (invalid user )?[^ ]+ from ([^ ]+) port [0-9]+.*/\2/p' \
  | LC_ALL=C sort | uniq -c | awk '{print $1, $2}' | LC_ALL=C sort -k1,1nr -k2,2
