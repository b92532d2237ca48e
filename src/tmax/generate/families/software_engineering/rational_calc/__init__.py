"""Exact rational arithmetic (software_engineering.rational_calc)."""

from __future__ import annotations

from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    build_step,
    bullets,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    settings_lines,
    sha256_hex,
)
from tmax.generate.families.software_engineering._shared import renamer
from tmax.generate.family import Draft, Family, RenderContext, register


def rc_eval(text, limit=None):
    """Exact value of an expression as `p/q` / `p`, "ERROR" on division by zero.

    Values are (numerator, denominator) pairs in lowest terms with a positive denominator.
    With ``limit``, raise OverflowError when an intermediate value outgrows it."""
    import math

    tokens, i = [], 0
    while i < len(text):
        if text[i] == " ":
            i += 1
        elif text[i].isdigit():
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            tokens.append(text[i:j])
            i = j
        else:
            tokens.append(text[i])
            i += 1
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take():
        pos[0] += 1
        return tokens[pos[0] - 1]

    def make(n, d):
        if d == 0:
            raise ZeroDivisionError
        if d < 0:
            n, d = -n, -d
        g = math.gcd(n, d)
        n, d = n // g, d // g
        if limit and (abs(n) > limit or d > limit):
            raise OverflowError(text)
        return n, d

    def expr():
        a, b = term()
        while peek() in ("+", "-"):
            op, (c, d) = take(), term()
            a, b = make(a * d + c * b if op == "+" else a * d - c * b, b * d)
        return a, b

    def term():
        a, b = unary()
        while peek() in ("*", "/"):
            op, (c, d) = take(), unary()
            a, b = make(a * c, b * d) if op == "*" else make(a * d, b * c)
        return a, b

    def unary():
        if peek() == "-":
            take()
            a, b = unary()
            return -a, b
        return power()

    def power():
        a, b = atom()
        if peek() == "^":
            take()
            sign = -1 if peek() == "-" else 1
            if sign < 0:
                take()
            exponent = int(take())
            if sign < 0:
                a, b = make(b, a)
            return make(a**exponent, b**exponent)
        return a, b

    def atom():
        token = take()
        if token == "(":
            value = expr()
            take()
            return value
        return make(int(token), 1)

    try:
        n, d = expr()
    except ZeroDivisionError:
        return "ERROR"
    return str(n) if d == 1 else f"{n}/{d}"


def rc_expression(rng, level):
    """A random expression of the grammar of ``level`` whose values stay small."""

    def operand(depth):
        roll = rng.random()
        if level >= 2 and depth < 2 and roll < 0.25:
            text = "(" + chain(depth + 1) + ")"
        else:
            text = str(rng.randint(0, 30) if rng.random() < 0.9 else rng.randint(31, 999))
        if level >= 4 and rng.random() < 0.2:
            text += "^" + rng.choice(["2", "3", "1", "-1", "-2"])
        if level >= 3 and rng.random() < 0.15:
            text = "-" + text
        return text

    def chain(depth):
        count = rng.randint(2, 3 if depth else (4 if level == 1 else 5))
        parts = [operand(depth)]
        for _ in range(count - 1):
            parts += [rng.choice("+-*/"), operand(depth)]
        gap = rng.choice([" ", " ", ""])
        return gap.join(parts)

    while True:
        text = chain(0)
        try:
            rc_eval(text, 10**6)
        except OverflowError:
            continue
        return text


_RC_PY = (
    """#!/usr/bin/env python3
\"\"\"Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR.\"\"\"
import sys

"""
    + function_sources(rc_eval)
    + """


def main():
    for line in sys.stdin.read().splitlines():
        print(rc_eval(line))


if __name__ == "__main__":
    main()
"""
)

_RC_SH = r"""#!/bin/bash
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
"""

_RC_C = r"""/* Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    long long n, d;
} Q;

static const char *s;
static int failed;

static long long gcd(long long a, long long b) {
    if (a < 0) a = -a;
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static Q norm(long long n, long long d) {
    if (d < 0) n = -n, d = -d;
    long long g = gcd(n, d);
    if (g > 1) n /= g, d /= g;
    return (Q){n, d};
}

static void skip(void) {
    while (*s == ' ') s++;
}

static Q expr(void);

static Q atom(void) {
    skip();
    if (*s == '(') {
        s++;
        Q v = expr();
        skip();
        if (*s == ')') s++;
        return v;
    }
    long long v = 0;
    while (isdigit((unsigned char)*s)) v = v * 10 + (*s++ - '0');
    return (Q){v, 1};
}

static Q power(void) {
    Q base = atom();
    skip();
    if (*s != '^') return base;
    s++;
    skip();
    int sign = 1;
    if (*s == '-') sign = -1, s++;
    skip();
    long long e = 0;
    while (isdigit((unsigned char)*s)) e = e * 10 + (*s++ - '0');
    if (sign < 0) {
        if (base.n == 0) {
            failed = 1;
            return base;
        }
        base = norm(base.d, base.n);
    }
    Q out = {1, 1};
    for (long long k = 0; k < e; k++) out.n *= base.n, out.d *= base.d;
    return norm(out.n, out.d);
}

static Q unary(void) {
    skip();
    if (*s == '-') {
        s++;
        Q v = unary();
        v.n = -v.n;
        return v;
    }
    return power();
}

static Q term(void) {
    Q v = unary();
    for (;;) {
        skip();
        char op = *s;
        if (op != '*' && op != '/') return v;
        s++;
        Q r = unary();
        if (op == '*') {
            v = norm(v.n * r.n, v.d * r.d);
        } else {
            if (r.n == 0) {
                failed = 1;
                return v;
            }
            v = norm(v.n * r.d, v.d * r.n);
        }
    }
}

static Q expr(void) {
    Q v = term();
    for (;;) {
        skip();
        char op = *s;
        if (op != '+' && op != '-') return v;
        s++;
        Q r = term();
        long long n = op == '+' ? v.n * r.d + r.n * v.d : v.n * r.d - r.n * v.d;
        v = norm(n, v.d * r.d);
    }
}

int main(void) {
    static char line[65536];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        s = line;
        failed = 0;
        Q v = expr();
        if (failed) puts("ERROR");
        else if (v.d == 1) printf("%lld\n", v.n);
        else printf("%lld/%lld\n", v.n, v.d);
    }
    return 0;
}
"""


RC_OUT_DIRS = ("/app/out", "/app/exact", "/app/answers", "/app/calc_out")
RC_INPUT_DIRS = ("input", "incoming", "formulas", "queue")
RC_EXPR_FILES = ("exprs.txt", "expressions.txt", "lines.txt", "prices.txt")
RC_BATCH_PREFIXES = ("batch", "chunk", "part", "run")
RC_RESULT_FILES = ("results.txt", "values.txt", "exact.txt")
RC_ERROR_FILES = ("errors.txt", "failures.txt", "div_zero.txt")
RC_EXTREME_FILES = ("extremes.txt", "range.txt", "bounds.txt")
RC_SUMMARY_FILES = ("summary.json", "stats.json", "report.json")
RC_PROGRAMS = ("/app/ratcalc", "/app/exactcalc", "/app/fraccalc", "/app/rational")
RC_OPENERS = (
    "Our pricing engine kept drifting by fractions of a cent because it used floats, so "
    "we're moving to exact arithmetic.",
    "Floating-point rounding keeps making our price calculations disagree by tiny amounts, "
    "so from now on every formula gets evaluated exactly.",
    "We're taking float maths out of the code that computes our prices and charges: every "
    "result has to be an exact fraction from now on.",
    "A few totals came out a fraction of a cent off because the formulas were evaluated with "
    "floats; we want exact rational results instead.",
)
RC_CALLERS = ("Our pricing engine", "Our billing code", "The pricing service", "Our backend")
RC_ASKS = ("Please produce", "I need these files", "Write the following", "We need these outputs")


@register
class RationalCalc(Family):
    """Evaluate arithmetic expressions exactly as fractions in lowest terms; levels widen
    the grammar (parentheses, unary minus, integer powers) and add batches, error
    locations, extremes and a JSON summary. Code asks for a reusable calculator program that
    the tests fuzz against an exact oracle."""

    name = "software_engineering.rational_calc"
    domain = "software_engineering"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"leave `(?P<inp>/app/\w+)` as it is",),
             (r"def test_inputs_untouched\(", r'Path\("{inp}"\) / _name')),
        Rule("operators_precedence", (r"the operators `\+ - \* /` with the usual precedence",),
             (r'while peek\(\) in \("\*", "/"\):',)),
        Rule("spaces_optional", (r"spaces may appear between tokens or not",),
             (r'if text\[i\] == " ":',)),
        Rule("parentheses", (r"\n- parentheses\n",), (r'if token == "\(":',),
             levels=frozenset({2, 3, 4})),
        Rule("unary_minus", (r"unary minus, as in `-3`",), (r"return -a, b",),
             levels=frozenset({3, 4})),
        Rule("power", (r"`\^` with an integer exponent .+? so `-2\^2` is -4",),
             (r'if peek\(\) == "\^":',), levels=frozenset({4})),
        Rule("lowest_terms", (r"print it as `p/q` in lowest terms with q > 1 and the sign on p, "
                              r"or as the integer `p` when the value is whole",),
             (r"g = math\.gcd\(n, d\)", r'return str\(n\) if d == 1 else')),
        Rule("division_by_zero", (r"Dividing by zero anywhere .*?makes that line's result "
                                  r"`ERROR`",),
             (r'except ZeroDivisionError:\s+return "ERROR"',)),
        Rule("zero_base_negative_exponent", (r"including a zero base with a negative exponent",),
             (r"a, b = make\(b, a\)",), levels=frozenset({4})),
        Rule("results_file", (r"`(?P<out>/app/\w+)/(?P<res>\w+\.txt)`: the result of each "
                              r"expression",),
             (r'read\("{out}/{res}"\)',), levels=frozenset({1, 2})),
        Rule("batch_results", (r"`(?P<out>/app/\w+)/\w+-N\.txt` for each input batch",),
             (r'read\(f"{out}/\{{name\}}"\)',), levels=frozenset({3, 4})),
        Rule("errors_file", (r"`(?P<out>/app/\w+)/(?P<err>\w+\.txt)`: one `FILE:LINE` per "
                             r"ERROR result",),
             (r'read\("{out}/{err}"\)',), levels=frozenset({3, 4})),
        Rule("extremes", (r"`(?P<out>/app/\w+)/(?P<ext>\w+\.txt)`: two lines, `max V` and "
                          r"`min V`",),
             (r"def test_extremes\(", r'read\("{out}/{ext}"\)'), levels=frozenset({2, 3, 4})),
        Rule("summary", (r"`(?P<out>/app/\w+)/(?P<sum>\w+\.json)`: `expressions`",),
             (r"def test_summary\(", r'json\.loads\(read\("{out}/{sum}"\)\)'),
             levels=frozenset({4})),
        Rule("program", (r"will call a calculator program",),
             (r"def test_calculator_on_fresh_expressions\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[dict[str, str]] = {
        "implement rational number arithmetic with automatic normalization": "lowest_terms",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        out, in_dir, expr_file, prefix, res_file, err_file, ext_file, sum_file = (
            rng.choice(options)
            for options in (
                RC_OUT_DIRS,
                RC_INPUT_DIRS,
                RC_EXPR_FILES,
                RC_BATCH_PREFIXES,
                RC_RESULT_FILES,
                RC_ERROR_FILES,
                RC_EXTREME_FILES,
                RC_SUMMARY_FILES,
            )
        )
        stem, opener, caller, ask = (
            rng.choice(options) for options in (RC_PROGRAMS, RC_OPENERS, RC_CALLERS, RC_ASKS)
        )
        files: dict[str, str | bytes] = {}
        if level <= 2:
            inputs = [expr_file]
            sizes = [20 if level == 1 else 30]
        else:
            inputs = [f"{prefix}-{i}.txt" for i in range(1, 4 if level == 3 else 5)]
            sizes = [20] * len(inputs)
        exprs = [[rc_expression(rng, level) for _ in range(size)] for size in sizes]
        # random expressions often divide by nothing that is zero: plant one that does
        zero = f"{rng.randint(1, 30)} / 0" if level < 4 else f"{rng.randint(1, 30)} + 0^-1"
        exprs[rng.randrange(len(exprs))].insert(rng.randint(0, sizes[0]), zero)
        for name, lines in zip(inputs, exprs, strict=True):
            files[f"{in_dir}/{name}"] = "\n".join(lines) + "\n"
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        grammar = [
            "non-negative integer literals and the operators `+ - * /` with the usual "
            "precedence (`*` and `/` before `+` and `-`, otherwise left to right); spaces may "
            "appear between tokens or not"
        ]
        if level >= 2:
            grammar.append("parentheses")
        if level >= 3:
            grammar.append("unary minus, as in `-3`, `-(1+2)` or `2 * -3`")
        if level >= 4:
            grammar.append(
                "`^` with an integer exponent written as a literal, possibly negative (`x^2`, "
                "`(1/2)^-3`); it binds tighter than unary minus, so `-2^2` is -4"
            )
        where = (
            f"`/app/{in_dir}/{expr_file}` has one expression per line."
            if level <= 2
            else f"The expressions come in batches, `/app/{in_dir}/{prefix}-1.txt` ... "
            f"`{prefix}-{len(inputs)}.txt`, one per line."
        )
        body = [
            f"{opener} {where} Expressions use:\n"
            + bullets(grammar)
            + "\n\nA result is exact: print it as `p/q` in lowest terms with q > 1 and the sign "
            "on p, or as the integer `p` when the value is whole. Dividing by zero anywhere "
            + ("(including a zero base with a negative exponent) " if level >= 4 else "")
            + "makes that line's result `ERROR`."
        ]
        deliverables = []
        if level <= 2:
            deliverables.append(f"`{out}/{res_file}`: the result of each expression, line by line.")
        else:
            deliverables.append(
                f"`{out}/{prefix}-N.txt` for each input batch: the result of each of its "
                "expressions, line by line."
            )
            deliverables.append(
                f"`{out}/{err_file}`: one `FILE:LINE` per ERROR result (FILE is the batch "
                "file name, LINE 1-based), batches in order."
            )
        if level >= 2:
            deliverables.append(
                f"`{out}/{ext_file}`: two lines, `max V` and `min V`, the largest and "
                "smallest results (ERROR lines excluded), written like the results."
            )
        if level >= 4:
            deliverables.append(
                f"`{out}/{sum_file}`: `expressions` (all lines), `errors`, `integers` "
                "(results that are whole numbers) and `max` / `min` (as strings like in "
                f"{ext_file})."
            )
        body.append(f"{ask} (leave `/app/{in_dir}` as it is):\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, stem)
            body.append(
                f"{caller} will call a calculator program: it reads expressions from standard "
                "input, one per line, and prints one result line for each. "
                + program_sentence(language, program)
                + " It will be compared with our reference on many expressions it has not seen."
            )
        instruction = "\n\n".join(body)

        # the reference steps and the tests are written for the default names
        named = renamer(
            {
                "/app/out": out,
                "/app/input": f"/app/{in_dir}",
                "results.txt": res_file,
                "errors.txt": err_file,
                "extremes.txt": ext_file,
                "summary.json": sum_file,
            }
        )
        steps = ["mkdir -p /app/out"]
        if language:
            source = {"python": _RC_PY, "bash": _RC_SH, "c": _RC_C}[language]
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            calc = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/ratcalc.sh", _RC_SH))
            calc = "bash /tmp/ratcalc.sh"
        steps.append(f"test \"$(echo '1/2 + 1/3 * 2' | {calc})\" = 7/6")
        if level <= 2:
            steps.append(f"{calc} < /app/input/{expr_file} > /app/out/results.txt")
            outputs = ["/app/out/results.txt"]
        else:
            outputs = []
            for name in inputs:
                steps.append(f"{calc} < /app/input/{name} > /app/out/{name}")
                outputs.append(f"/app/out/{name}")
            numbers = " ".join(str(i) for i in range(1, len(inputs) + 1))
            steps.append(
                f"for b in {numbers}; do awk -v f={prefix}-$b.txt"
                ' \'$0 == "ERROR" {print f ":" NR}\''
                f" /app/out/{prefix}-$b.txt; done > /app/out/errors.txt"
            )
        if level >= 2:
            steps.append(f"cat {' '.join(outputs)} > /tmp/all_results.txt")
            steps.append(
                'awk -F/ \'$0 != "ERROR" {n = $1 + 0; d = (NF > 1) ? $2 + 0 : 1;'
                " if (!seen || n * bd > bn * d) {bn = n; bd = d; big = $0}"
                " if (!seen || n * sd < sn * d) {sn = n; sd = d; small = $0} seen = 1}"
                ' END {print "max " big; print "min " small}\' /tmp/all_results.txt'
                " > /app/out/extremes.txt"
            )
        if level >= 4:
            steps += [
                "total=$(wc -l < /tmp/all_results.txt)",
                "errors=$(grep -c '^ERROR$' /tmp/all_results.txt || true)",
                "integers=$(grep -c '^-*[0-9][0-9]*$' /tmp/all_results.txt || true)",
                "max=$(awk '$1 == \"max\" {print $2}' /app/out/extremes.txt)",
                "min=$(awk '$1 == \"min\" {print $2}' /app/out/extremes.txt)",
                'printf \'{"expressions": %d, "errors": %d, "integers": %d, "max": "%s",'
                ' "min": "%s"}\\n\' "$total" "$errors" "$integers" "$max" "$min"'
                " > /app/out/summary.json",
            ]
        solution = named("\n".join(s for s in steps if s))

        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "inputs": inputs,
            "fuzz": {1: 40, 2: 80, 3: 120, 4: 160}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(rc_eval, rc_expression)
            + "\n\n"
            + settings_lines(params)
            + named(_RC_TESTS)
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_RC_TESTS = """
from fractions import Fraction

LEVEL = CFG["level"]
RESULTS = {}
for _name in CFG["inputs"]:
    _path = Path("/app/input") / _name
    RESULTS[_name] = [rc_eval(e) for e in _path.read_text().splitlines()] if _path.is_file() else []


def lines(items):
    return "".join(f"{i}\\n" for i in items)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_results():
    if LEVEL <= 2:
        (only,) = RESULTS.values()
        assert read("/app/out/results.txt") == lines(only), "results.txt is wrong"
        return
    for name, results in RESULTS.items():
        assert read(f"/app/out/{name}") == lines(results), f"/app/out/{name} is wrong"
    errors = [f"{n}:{i}" for n, rs in RESULTS.items() for i, r in enumerate(rs, 1) if r == "ERROR"]
    assert read("/app/out/errors.txt") == lines(errors), "errors.txt is wrong"


def good():
    return [r for rs in RESULTS.values() for r in rs if r != "ERROR"]


def test_extremes():
    if CFG["level"] >= 2:
        values = good()
        big, small = max(values, key=Fraction), min(values, key=Fraction)
        want = f"max {big}\\nmin {small}\\n"
        assert read("/app/out/extremes.txt") == want, "extremes.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        values = good()
        everything = [r for rs in RESULTS.values() for r in rs]
        want = {
            "expressions": len(everything),
            "errors": everything.count("ERROR"),
            "integers": sum("/" not in v for v in values),
            "max": max(values, key=Fraction),
            "min": min(values, key=Fraction),
        }
        data = json.loads(read("/app/out/summary.json"))
        for key, value in want.items():
            assert data.get(key) == value, f"summary.json {key}: {data.get(key)!r} != {value!r}"


def test_calculator_on_fresh_expressions():
    if not CFG["code"]:
        return
    rng = random.Random(65537)
    exprs = [rc_expression(rng, LEVEL) for _ in range(CFG["fuzz"])]
    exprs += ["7", "1/0", "0/5", "6/4", "10 / 4 * 2 - 5"]
    if CFG["level"] >= 4:
        exprs += ["2 - 0^-1", "(1/2)^-3"]
    done = run([], stdin=lines(exprs))
    assert done.returncode == 0, f"the calculator failed: {done.stderr[-1500:]}"
    got = done.stdout.splitlines()
    want = [rc_eval(e) for e in exprs]
    assert len(got) == len(exprs), f"{len(got)} result lines for {len(exprs)} expressions"
    wrong = [(e, g, w) for e, g, w in zip(exprs, got, want) if g.strip() != w]
    assert not wrong, f"{len(wrong)} wrong results (expression, got, expected): {wrong[:5]}"
"""
