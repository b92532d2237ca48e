#!/bin/bash
LEVEL={{ level }}
check() {
  local line=$1 name uid email shell extra local_part domain
  [[ $line == *:*:*:* ]] || return 1
  IFS=: read -r name uid email shell extra <<< "$line"
  [[ $(tr -cd ':' <<< "$line" | wc -c) -eq 3 ]] || return 1
  [[ $name =~ ^[a-z][a-z0-9_]{2,15}$ ]] || return 1
  [[ $uid =~ ^[1-9][0-9]*$ ]] || return 1
  [ "${#uid}" -le 5 ] && [ "$uid" -ge 1000 ] && [ "$uid" -le 60000 ] || return 1
  if [ "$LEVEL" -ge 2 ]; then
    [[ $email =~ ^[A-Za-z0-9._+-]+@[A-Za-z0-9.-]+$ ]] || return 1
    domain=${email#*@}
    [[ $domain == *.* && $domain != .* && $domain != *. && $domain != *..* ]] || return 1
  fi
  if [ "$LEVEL" -ge 3 ]; then
    case $shell in /bin/bash|/bin/sh|/usr/sbin/nologin) ;; *) return 1 ;; esac
  fi
  if [ "$LEVEL" -ge 4 ]; then
    case $name in root|admin|daemon|nobody) return 1 ;; esac
    [ "${#line}" -le 80 ] || return 1
  fi
  return 0
}
bad=0
while IFS= read -r record || [ -n "$record" ]; do
  if check "$record"; then echo VALID; else echo INVALID; bad=1; fi
done
exit $bad
