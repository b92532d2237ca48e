"""Exact rational arithmetic (software_engineering.rational_calc).

The task's files are the templates beside this module, written with placeholders for
the drawn names (folders and files); the reference calculator in Python, Bash and C is
``solution/ratcalc.*``."""

from __future__ import annotations

from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    fixture_test_head,
    function_sources,
    invoke,
    program_path,
    program_sentence,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


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

        program = program_path(language, stem) if language else None
        calc = invoke(language, program) if language else "bash /tmp/ratcalc.sh"
        folder = templates(__name__)
        extension = {"python": "py", "bash": "sh", "c": "c"}[language or "bash"]
        source = folder.render(f"solution/ratcalc.{extension}", functions=function_sources(rc_eval))
        values = {
            "level": level,
            "language": language,
            "opener": opener,
            "caller": caller,
            "ask": ask,
            "out": out,
            "in_dir": in_dir,
            "expr_file": expr_file,
            "prefix": prefix,
            "res_file": res_file,
            "err_file": err_file,
            "ext_file": ext_file,
            "sum_file": sum_file,
            "inputs": inputs,
            "outputs": [f"{out}/{res_file}"] if level <= 2 else [f"{out}/{n}" for n in inputs],
            "program": program,
            "program_dir": program.rsplit("/", 1)[0] if program else None,
            "program_sentence": program_sentence(language, program) if language else None,
            "source": source.strip(),
            "calc": calc,
        }
        params = {
            "level": level,
            "code": language is not None,
            "hashes": hashes,
            "inputs": inputs,
            "fuzz": {1: 40, 2: 80, 3: 120, 4: 160}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = folder.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            functions=function_sources(rc_eval, rc_expression),
            settings=settings_lines(params),
            **values,
        )
        return Draft(
            instruction=folder.render("instruction.md", **values),
            # the steps are lines joined by newlines: none after the last
            solution=folder.render("solution/solve.sh", **values).rstrip("\n"),
            tests={"test_task.py": tests},
            files=files,
        )
