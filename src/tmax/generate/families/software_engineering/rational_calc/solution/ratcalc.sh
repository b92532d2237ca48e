#!/bin/bash
# Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR.
export LC_ALL=C

norm() {  # reduce N/D, sign on N
  local a b t
  if ((D < 0)); then N=$((-N)); D=$((-D)); fi
  a=${N#-} b=$D
  while ((b)); do t=$((a % b)); a=$b; b=$t; done
  if ((a > 1)); then N=$((N / a)); D=$((D / a)); fi
}

expr() {
  term || return 1
  local n=$N d=$D op
  while [[ ${T[P]-} == [-+] ]]; do
    op=${T[P]}; P=$((P + 1))
    term || return 1
    if [[ $op == + ]]; then N=$((n * D + N * d)); else N=$((n * D - N * d)); fi
    D=$((d * D)); norm
    n=$N d=$D
  done
  N=$n D=$d
}

term() {
  unary || return 1
  local n=$N d=$D op
  while [[ ${T[P]-} == [*/] ]]; do
    op=${T[P]}; P=$((P + 1))
    unary || return 1
    if [[ $op == '*' ]]; then
      N=$((n * N)); D=$((d * D))
    else
      ((N == 0)) && return 1
      local nn=$((n * D)) dd=$((d * N))
      N=$nn D=$dd
    fi
    norm
    n=$N d=$D
  done
  N=$n D=$d
}

unary() {
  if [[ ${T[P]-} == - ]]; then
    P=$((P + 1))
    unary || return 1
    N=$((-N))
    return 0
  fi
  power
}

power() {
  atom || return 1
  [[ ${T[P]-} == '^' ]] || return 0
  P=$((P + 1))
  local sign=1 e k bn bd
  if [[ ${T[P]-} == - ]]; then sign=-1; P=$((P + 1)); fi
  e=$((10#${T[P]})); P=$((P + 1))
  if ((sign < 0)); then
    ((N == 0)) && return 1
    bn=$D bd=$N
  else
    bn=$N bd=$D
  fi
  N=1 D=1
  for ((k = 0; k < e; k++)); do N=$((N * bn)); D=$((D * bd)); done
  norm
}

atom() {
  if [[ ${T[P]-} == '(' ]]; then
    P=$((P + 1))
    expr || return 1
    P=$((P + 1))
    return 0
  fi
  N=$((10#${T[P]})) D=1
  P=$((P + 1))
}

while IFS= read -r line || [[ -n $line ]]; do
  T=()
  rest=$line
  while [[ -n $rest ]]; do
    if [[ $rest =~ ^[0-9]+ ]]; then
      T+=("${BASH_REMATCH[0]}")
      rest=${rest:${#BASH_REMATCH[0]}}
    else
      [[ ${rest:0:1} != " " ]] && T+=("${rest:0:1}")
      rest=${rest:1}
    fi
  done
  P=0
  if expr; then
    if ((D == 1)); then echo "$N"; else echo "$N/$D"; fi
  else
    echo ERROR
  fi
done
