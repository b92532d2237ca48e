#!/bin/bash
# Pick versions: `pick INDEX` reads `package constraint` lines on stdin and prints
# `package version` (or `package NONE`); `pick --sort INDEX` lists each package's versions.
export LC_ALL=C
LEVEL={{ level }}
declare -A VERS=()

ident_cmp() {
  if [[ $1 == "$2" ]]; then R=0; return; fi
  local an=0 bn=0
  [[ $1 =~ ^[0-9]+$ ]] && an=1
  [[ $2 =~ ^[0-9]+$ ]] && bn=1
  if ((an && bn)); then
    if ((10#$1 < 10#$2)); then R=-1; else R=1; fi
  elif ((an)); then R=-1
  elif ((bn)); then R=1
  elif [[ $1 < $2 ]]; then R=-1
  else R=1
  fi
}

ver_cmp() {  # precedence of $1 against $2 in R (-1, 0, 1)
  local a=$1 b=$2 ap="" bp="" i IFS=.
  if [[ $a == *-* ]]; then ap=${a#*-}; a=${a%%-*}; fi
  if [[ $b == *-* ]]; then bp=${b#*-}; b=${b%%-*}; fi
  local -a x=($a) y=($b)
  for i in 0 1 2; do
    if ((10#${x[i]} != 10#${y[i]})); then
      if ((10#${x[i]} < 10#${y[i]})); then R=-1; else R=1; fi
      return
    fi
  done
  if [[ -z $ap && -z $bp ]]; then R=0; return; fi
  if [[ -z $ap ]]; then R=1; return; fi
  if [[ -z $bp ]]; then R=-1; return; fi
  x=($ap) y=($bp)
  for ((i = 0; i < ${#x[@]} && i < ${#y[@]}; i++)); do
    ident_cmp "${x[i]}" "${y[i]}"
    ((R != 0)) && return
  done
  if ((${#x[@]} < ${#y[@]})); then R=-1; elif ((${#x[@]} > ${#y[@]})); then R=1; else R=0; fi
}

satisfies() {  # version $1, constraint $2: exit status 0 when it matches
  local version=$1 rest="$2||" alt tok op target core major minor patch upper k ok
  local re='^(>=|<=|>|<|=|\^|~)?(.+)$'
  while [[ $rest == *"||"* ]]; do
    alt=${rest%%"||"*}
    rest=${rest#*"||"}
    local -a ops=() targets=()
    for tok in $alt; do
      [[ $tok =~ $re ]] || continue
      op=${BASH_REMATCH[1]:-=}
      target=${BASH_REMATCH[2]}
      core=${target%%-*}
      major=${core%%.*}; minor=${core#*.}; patch=${minor#*.}; minor=${minor%%.*}
      case $op in
        ^)
          if ((major)); then upper=$((major + 1)).0.0
          elif ((minor)); then upper=0.$((minor + 1)).0
          else upper=0.0.$((patch + 1))
          fi
          ops+=(">=" "<"); targets+=("$target" "$upper") ;;
        "~") ops+=(">=" "<"); targets+=("$target" "$major.$((minor + 1)).0") ;;
        *) ops+=("$op"); targets+=("$target") ;;
      esac
    done
    ((${#ops[@]})) || continue
    ok=1
    for k in "${!ops[@]}"; do
      ver_cmp "$version" "${targets[k]}"
      case ${ops[k]} in
        ">=") ((R >= 0)) || ok=0 ;;
        "<=") ((R <= 0)) || ok=0 ;;
        ">") ((R > 0)) || ok=0 ;;
        "<") ((R < 0)) || ok=0 ;;
        *) ((R == 0)) || ok=0 ;;
      esac
      ((ok)) || break
    done
    if ((ok && LEVEL >= 3)) && [[ $version == *-* ]]; then
      ok=0
      for target in "${targets[@]}"; do
        if [[ $target == *-* && ${target%%-*} == "${version%%-*}" ]]; then ok=1; fi
      done
    fi
    ((ok)) && return 0
  done
  return 1
}

load_index() {
  local package version rest
  while read -r package version rest || [[ -n $package ]]; do
    [[ -z $package || -z $version || $package == \#* ]] && continue
    VERS[$package]+="$version "
  done < "$1"
}

if [[ $1 == --sort ]]; then
  load_index "$2"
  for package in $(printf '%s\n' "${!VERS[@]}" | sort); do
    sorted=()
    for v in ${VERS[$package]}; do
      i=${#sorted[@]}
      sorted+=("$v")
      while ((i > 0)); do
        ver_cmp "${sorted[i - 1]}" "$v"
        ((R > 0)) || break
        sorted[i]=${sorted[i - 1]}
        i=$((i - 1))
      done
      sorted[i]=$v
    done
    echo "$package ${sorted[*]}"
  done
  exit 0
fi

load_index "$1"
declare -A CONS=()
order=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line#"${line%%[![:space:]]*}"}
  [[ -z $line || $line == \#* ]] && continue
  package=${line%% *}
  constraint=${line#"$package"}
  constraint=${constraint# }
  if [[ -z ${CONS[$package]+x} ]]; then order+=("$package"); CONS[$package]=""; fi
  CONS[$package]+="$constraint"$'\n'
done
for package in "${order[@]}"; do
  best=""
  for v in ${VERS[$package]-}; do
    good=1
    while IFS= read -r constraint; do
      [[ -z $constraint ]] && continue
      satisfies "$v" "$constraint" || { good=0; break; }
    done <<< "${CONS[$package]}"
    ((good)) || continue
    if [[ -z $best ]]; then best=$v; else ver_cmp "$v" "$best"; ((R > 0)) && best=$v; fi
  done
  echo "$package ${best:-NONE}"
done
