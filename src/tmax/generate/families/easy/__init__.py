"""The easy tier (``generation.tier: easy``): one- and two-command file tasks for models
of a few million parameters, so that the embedded default's miniature can show SFT and
RL doing something measurable in minutes.

Three families, each for three of the nine domains: :class:`FileBasics` (file
operations, software engineering, scientific computing: write, count, sort, head,
tail, grep, copy, mkdir), :class:`LogLines` (security, system administration,
debugging: select, count and drop the lines of a log that name a word) and
:class:`Columns` (data processing, querying and science: cut a column, sort by the
number, count the records). Each task still comes from a spec of the 9-axis sampler:
the domain picks the family and the words of the input file (``/app/input.txt``), the
persona opens the request, and task complexity sets how many steps there are (one for
short and moderate, two for complex and intricate). What the tier cannot honour
(code, services, fixtures other than text, verifiers other than exact text) is
recorded as realised differently, like any family's. The reference solution is one
shell command per step; the tests compare each deliverable with the answer computed
here, so a no-op scores 0 and the oracle 1.

The task's files are the templates beside this module (``instruction.md``,
``solution/solve.sh``, ``tests/test_task.py``; tmax.generate.templates): the module draws
the steps, the templates say how a task writes them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from tmax.generate.audit import Rule, Units
from tmax.generate.family import Draft, Family, RenderContext
from tmax.generate.templates import templates

VOCABULARY: dict[str, tuple[str, ...]] = {
    # domain: the words its input file holds
    "security": ("root", "guest", "admin", "token", "denied", "allowed", "firewall", "audit"),
    "software_engineering": ("parser", "lexer", "router", "cache", "worker", "client",
                             "server", "build"),
    "file_operations": ("photo", "music", "backup", "archive", "draft", "notes", "video",
                        "scan"),
    "data_querying": ("north", "south", "east", "west", "retail", "online", "pending",
                      "shipped"),
    "data_science": ("mean", "median", "outlier", "train", "valid", "forest", "linear",
                     "kernel"),
    "debugging": ("segfault", "timeout", "overflow", "nullptr", "deadlock", "leak", "panic",
                  "assert"),
    "scientific_computing": ("photon", "neutron", "proton", "lattice", "tensor", "vector",
                             "matrix", "quark"),
    "data_processing": ("invoice", "refund", "credit", "debit", "payment", "receipt",
                        "balance", "charge"),
    "system_administration": ("nginx", "sshd", "docker", "kernel", "systemd", "rsyslog",
                              "chrony", "postfix"),
}  # fmt: skip
INPUT = "input"
"""Every task's input file is ``/app/input.txt``: a model of a few million parameters
learns to read which operation is asked long before it learns to copy file names
(``benchmarks/sft_reading.py``), so the names are fixed and the words vary."""
OUTPUTS = ("answer", "result")
"""The deliverables' names (``/app/answer.txt``, and ``/app/result.txt`` for a second
step)."""


@dataclass(frozen=True)
class Step:
    """One deliverable: the sentence asking for it, the command that makes it, and
    what the tests expect (``expected`` None: ``path`` must be a directory)."""

    sentence: str
    command: str
    path: str
    expected: str | None


@dataclass(frozen=True)
class Inputs:
    rng: random.Random
    stem: str
    lines: tuple[str, ...]
    words: tuple[str, ...]
    output: str

    @property
    def source(self) -> str:
        """The input file."""
        return f"/app/{self.stem}.txt"

    @property
    def target(self) -> str:
        """The deliverable."""
        return f"/app/{self.output}.txt"


def _lines(text: list[str] | tuple[str, ...]) -> str:
    return "".join(line + "\n" for line in text)


def write_word(x: Inputs) -> Step:
    word = x.rng.choice(x.words)
    return Step(f"Write the word `{word}` to `{x.target}`.", f"echo {word} > {x.target}",
                x.target, word + "\n")  # fmt: skip


def count_lines(x: Inputs) -> Step:
    return Step(f"Count the lines of `{x.source}` and write the number to `{x.target}`.",
                f"wc -l < {x.source} > {x.target}", x.target, f"{len(x.lines)}\n")  # fmt: skip


def sort_lines(x: Inputs) -> Step:
    return Step(f"Sort the lines of `{x.source}` into `{x.target}`.",
                f"sort {x.source} > {x.target}", x.target, _lines(sorted(x.lines)))  # fmt: skip


def first_lines(x: Inputs) -> Step:
    n = x.rng.randint(1, len(x.lines) - 1)
    return Step(f"Put the first {n} lines of `{x.source}` in `{x.target}`.",
                f"head -n {n} {x.source} > {x.target}", x.target, _lines(x.lines[:n]))  # fmt: skip


def last_lines(x: Inputs) -> Step:
    n = x.rng.randint(1, len(x.lines) - 1)
    return Step(f"Put the last {n} lines of `{x.source}` in `{x.target}`.",
                f"tail -n {n} {x.source} > {x.target}", x.target, _lines(x.lines[-n:]))  # fmt: skip


def matching_lines(x: Inputs) -> Step:
    word = x.rng.choice(sorted({line.split()[0] for line in x.lines}))
    return Step(f"Copy the lines of `{x.source}` that contain `{word}` to `{x.target}`.",
                f"grep {word} {x.source} > {x.target}", x.target,
                _lines([line for line in x.lines if word in line]))  # fmt: skip


def copy_file(x: Inputs) -> Step:
    return Step(f"Make a copy of `{x.source}` named `{x.target}`.",
                f"cp {x.source} {x.target}", x.target, _lines(x.lines))  # fmt: skip


def make_folder(x: Inputs) -> Step:
    name = x.rng.choice(x.words)
    return Step(f"Create the folder `/app/{name}`.", f"mkdir -p /app/{name}", f"/app/{name}", None)


def _word_in_lines(x: Inputs) -> str:
    return x.rng.choice(sorted({line.split()[0] for line in x.lines}))


def count_matching(x: Inputs) -> Step:
    word = _word_in_lines(x)
    count = sum(word in line for line in x.lines)
    return Step(f"Count the lines of `{x.source}` that contain `{word}` and write the number "
                f"to `{x.target}`.", f"grep -c {word} {x.source} > {x.target}", x.target,
                f"{count}\n")  # fmt: skip


def other_lines(x: Inputs) -> Step:
    word = _word_in_lines(x)
    kept = [line for line in x.lines if word not in line]
    if not kept:  # grep -v would select nothing and fail: ask for the matching ones
        return matching_lines(x)
    return Step(f"Copy the lines of `{x.source}` that do not contain `{word}` to `{x.target}`.",
                f"grep -v {word} {x.source} > {x.target}", x.target, _lines(kept))  # fmt: skip


def first_column(x: Inputs) -> Step:
    return Step(f"Write the first column of `{x.source}` to `{x.target}`.",
                f"cut -d' ' -f1 {x.source} > {x.target}", x.target,
                _lines([line.split()[0] for line in x.lines]))  # fmt: skip


def second_column(x: Inputs) -> Step:
    return Step(f"Write the second column of `{x.source}` to `{x.target}`.",
                f"cut -d' ' -f2 {x.source} > {x.target}", x.target,
                _lines([line.split()[1] for line in x.lines]))  # fmt: skip


def sort_by_number(x: Inputs) -> Step:
    # GNU sort's last resort on equal numbers compares whole lines (bytes in the C locale
    # the sandbox runs; the words are lowercase ASCII, none a prefix of another).
    ordered = sorted(x.lines, key=lambda line: (int(line.split()[1]), line))
    return Step(f"Sort the lines of `{x.source}` by their number into `{x.target}`.",
                f"sort -n -k2 {x.source} > {x.target}", x.target, _lines(ordered))  # fmt: skip


FILE_OPERATIONS: tuple[Callable[[Inputs], Step], ...] = (
    write_word, count_lines, sort_lines, first_lines, last_lines, matching_lines, copy_file,
    make_folder,
)  # fmt: skip
LOG_OPERATIONS: tuple[Callable[[Inputs], Step], ...] = (
    matching_lines, count_matching, other_lines, first_lines, last_lines,
)  # fmt: skip
COLUMN_OPERATIONS: tuple[Callable[[Inputs], Step], ...] = (
    first_column, second_column, sort_by_number, count_lines, sort_lines,
)  # fmt: skip
OPERATIONS: tuple[Callable[[Inputs], Step], ...] = tuple(
    dict.fromkeys((*FILE_OPERATIONS, *LOG_OPERATIONS, *COLUMN_OPERATIONS))
)
"""Every operation of the tier, each once."""

_TARGET = r"`(?P<path>/app/\w+\.txt)`"
_SOURCE = r"`/app/input\.txt`"
_LINES = r"(?:\w+ \d+\\n)"
"""One line of the input file as it appears in the tests' EXPECTED (``repr``)."""
RULES: tuple[Rule, ...] = tuple(
    Rule(operation, (stated,), (tested,), drawn=True)
    for operation, stated, tested in (
        ("write_word", rf"Write the word `(?P<word>\w+)` to {_TARGET}\.", r"'{path}': '{word}\\n'"),
        ("count_lines", rf"Count the lines of {_SOURCE} and write the number to {_TARGET}\.",
         r"'{path}': '\d+\\n'"),
        ("sort_lines", rf"Sort the lines of {_SOURCE} into {_TARGET}\.",
         rf"'{{path}}': '{_LINES}+'"),
        ("first_lines", rf"Put the first (?P<n>\d+) lines of {_SOURCE} in {_TARGET}\.",
         rf"'{{path}}': '{_LINES}{{{{{{n}}}}}}'"),
        ("last_lines", rf"Put the last (?P<n>\d+) lines of {_SOURCE} in {_TARGET}\.",
         rf"'{{path}}': '{_LINES}{{{{{{n}}}}}}'"),
        ("matching_lines",
         rf"Copy the lines of {_SOURCE} that contain `(?P<word>\w+)` to {_TARGET}\.",
         r"'{path}': '(?:\w*{word}\w* \d+\\n)+'"),
        ("copy_file", rf"Make a copy of {_SOURCE} named {_TARGET}\.", rf"'{{path}}': '{_LINES}+'"),
        ("make_folder", r"Create the folder `(?P<path>/app/\w+)`\.", r"'{path}': None"),
        ("count_matching",
         rf"Count the lines of {_SOURCE} that contain `(?P<word>\w+)` and write the number "
         rf"to {_TARGET}\.", r"'{path}': '\d+\\n'"),
        ("other_lines",
         rf"Copy the lines of {_SOURCE} that do not contain `(?P<word>\w+)` to {_TARGET}\.",
         rf"'{{path}}': '{_LINES}+'"),
        ("first_column", rf"Write the first column of {_SOURCE} to {_TARGET}\.",
         r"'{path}': '(?:[a-z]+\\n)+'"),
        ("second_column", rf"Write the second column of {_SOURCE} to {_TARGET}\.",
         r"'{path}': '(?:\d+\\n)+'"),
        ("sort_by_number", rf"Sort the lines of {_SOURCE} by their number into {_TARGET}\.",
         rf"'{{path}}': '{_LINES}+'"),
    )
)  # fmt: skip
"""Each operation is one rule, drawn at random: its sentence must come with an entry of
the tests' EXPECTED for the path it names, holding what the operation makes (a folder:
None; the first/last n lines: n lines)."""


def _rules(operations: tuple[Callable[[Inputs], Step], ...]) -> tuple[Rule, ...]:
    names = {operation.__name__ for operation in operations}
    return tuple(rule for rule in RULES if rule.id in names)


class EasyFamily(Family):
    """One or two of the family's ``operations`` on a small text file of the domain's
    words, for the specs of its ``domains``; see the module docstring."""

    tier: ClassVar[str] = "easy"
    domains: ClassVar[frozenset[str]]
    """The spec domains this family renders (the tier's families split the nine)."""
    operations: ClassVar[tuple[Callable[[Inputs], Step], ...]]
    languages = frozenset({"bash"})
    units = Units(r"'(/app/[^']+)': ")  # each entry of EXPECTED is one check

    def render(self, ctx: RenderContext) -> Draft:
        rng = ctx.rng
        words = VOCABULARY.get(ctx.spec.domain, VOCABULARY["file_operations"])
        steps_wanted = 1 if ctx.level <= 2 else 2
        operations = rng.sample(self.operations, steps_wanted)
        outputs = OUTPUTS[:steps_wanted]
        stem = INPUT
        lines = tuple(f"{rng.choice(words)} {rng.randint(1, 99)}"
                      for _ in range(rng.randint(3, 8)))  # fmt: skip
        steps: list[Step] = []
        for operation, output in zip(operations, outputs, strict=True):
            step = operation(Inputs(rng, stem, lines, words, output))
            if any(s.path == step.path for s in steps):  # two folders of the same name
                step = write_word(Inputs(rng, stem, lines, words, output))
            steps.append(step)
        uses_input = any(f" /app/{stem}.txt" in s.command for s in steps)
        files = templates(__name__)
        expected = {s.path: s.expected for s in steps}
        return Draft(
            instruction=files.render("instruction.md", steps=steps),
            solution=files.render("solution/solve.sh", steps=steps),
            tests={"test_task.py": files.render("tests/test_task.py", expected=expected)},
            files={f"{stem}.txt": _lines(lines)} if uses_input else {},
            agent_timeout_sec=120.0,
            verifier_timeout_sec=60.0,
        )


class FileBasics(EasyFamily):
    """Write, count, sort, head, tail, grep, copy and mkdir."""

    name = "easy.file_basics"
    domain = "file_operations"
    domains = frozenset({"file_operations", "software_engineering", "scientific_computing"})
    operations = FILE_OPERATIONS
    rules = _rules(FILE_OPERATIONS)


class LogLines(EasyFamily):
    """A log's lines that name a word: copied, counted or dropped; its first or last."""

    name = "easy.log_lines"
    domain = "security"
    domains = frozenset({"security", "system_administration", "debugging"})
    operations = LOG_OPERATIONS
    rules = _rules(LOG_OPERATIONS)


class Columns(EasyFamily):
    """Records of a word and a number: one column cut out, sorted by the number, counted."""

    name = "easy.columns"
    domain = "data_processing"
    domains = frozenset({"data_processing", "data_querying", "data_science"})
    operations = COLUMN_OPERATIONS
    rules = _rules(COLUMN_OPERATIONS)


EASY_FAMILIES: tuple[EasyFamily, ...] = (FileBasics(), LogLines(), Columns())
"""The easy tier's families, which between them render every domain; not in
:data:`FAMILIES`, so the full tier's choice is unchanged."""


def easy_family_for(domain: str) -> EasyFamily:
    """The easy family that renders specs of ``domain``."""
    for family in EASY_FAMILIES:
        if domain in family.domains:
            return family
    raise KeyError(f"no easy-tier family renders the domain {domain!r}")
