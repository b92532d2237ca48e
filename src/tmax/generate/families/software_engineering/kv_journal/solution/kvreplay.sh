#!/bin/bash
# Replay key-value journals given as arguments; print the final state (key=value, by key).
# Counters go to standard error. At level 4 a first argument ending in .kv is a snapshot.
export LC_ALL=C
LEVEL={{ level }}
declare -A S=()
applied=0 errors=0 rolled=0

kv_op() {
  local line=$1 op rest key arg current
  op=${line%% *}
  rest=${line#* }
  key=${rest%% *}
  if [[ $rest == *" "* ]]; then arg=${rest#* }; else arg=""; fi
  case $op in
    SET) S[$key]=$arg ;;
    DEL) unset 'S[$key]' ;;
    INCR)
      current=${S[$key]-0}
      if [[ ! $current =~ ^-?[0-9]+$ ]]; then
        errors=$((errors + 1))
        return
      fi
      S[$key]=$((current + arg))
      ;;
    APPEND) S[$key]=${S[$key]-}$arg ;;
    *) return ;;
  esac
  applied=$((applied + 1))
}

if ((LEVEL >= 4)) && [[ ${1-} == *.kv ]]; then
  while IFS= read -r line || [[ -n $line ]]; do
    [[ -z $line || $line == \#* ]] && continue
    S[${line%%=*}]=${line#*=}
  done < "$1"
  shift
fi

for journal in "$@"; do
  intx=0
  pending=()
  while IFS= read -r line || [[ -n $line ]]; do
    [[ -z ${line// /} || $line == \#* ]] && continue
    word=${line%% *}
    if ((LEVEL >= 3)); then
      case $word in
        BEGIN) intx=1; pending=(); continue ;;
        COMMIT)
          for queued in "${pending[@]}"; do kv_op "$queued"; done
          intx=0; pending=(); continue ;;
        ROLLBACK) rolled=$((rolled + 1)); intx=0; pending=(); continue ;;
      esac
    fi
    if ((intx)); then pending+=("$line"); else kv_op "$line"; fi
  done < "$journal"
  if ((intx)); then rolled=$((rolled + 1)); fi
done

for key in "${!S[@]}"; do printf '%s=%s\n' "$key" "${S[$key]}"; done | sort -t= -k1,1
{
  echo "applied $applied"
  echo "errors $errors"
  if ((LEVEL >= 3)); then echo "rolled_back $rolled"; fi
  echo "keys ${#S[@]}"
} >&2
