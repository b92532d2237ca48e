#!/bin/bash
# Usage: logistic.sh CASES  -> "name y_final" for every case (RK4, fixed step)
set -euo pipefail
awk -v mode={{ mode }} '
function f(y) { return r * y * (1 - y / k) }
/^#/ || NF < 6 { next }
{ name = $1; r = $2; k = $3; y = $4; h = $5; n = $6
  if (mode == "metric") { printf "%s %.10g\n", name, k / (1 + (k - y) / y * exp(-r * h * n)); next }
  for (i = 0; i < n; i++) {
    f1 = f(y); f2 = f(y + h / 2 * f1); f3 = f(y + h / 2 * f2); f4 = f(y + h * f3)
    y = y + h / 6 * (f1 + 2 * f2 + 2 * f3 + f4) }
  printf "%s %.6f\n", name, y }' "$1"
