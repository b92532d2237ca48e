"""Parse FASTA files into per-record tables, or validate them (the task's files are the
templates beside this module; the reference table program and validator are
``solution/fasta.py`` (both, in Python), ``solution/fasta_table.sh`` and
``solution/fasta_check.sh``; the oracle the tests and the Python program share is
``tests/oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    language_or_bash,
    manifest_test_file,
    program_path,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_SOURCES = {
    ("table", "python"): "fasta.py",
    ("check", "python"): "fasta.py",
    ("table", "bash"): "fasta_table.sh",
    ("check", "bash"): "fasta_check.sh",
}
"""The reference program of each mode and language, under ``solution/``."""


def _fasta_text(rng, records: int, bad: str | None = None, masked: bool = False) -> str:
    """FASTA text; ``masked`` soft-masks (lower-cases) the tail of every record."""
    out = []
    for i in range(records):
        out.append(
            f">{rng.choice(['contig', 'read', 'scaffold'])}_{i}_{rng.randint(100, 999)}"
            f" sample={rng.choice(['lake', 'soil', 'gut'])}"
        )
        seq = "".join(rng.choice("ACGTACGTGCN") for _ in range(rng.randint(20, 170)))
        if masked:
            cut = rng.randint(0, len(seq))
            seq = seq[:cut] + seq[cut:].lower()
        out += [seq[j : j + 60] for j in range(0, len(seq), 60)]
    if bad == "residue":
        out.insert(2, "ACGTXXACGT")
    elif bad == "blank":
        out.insert(len(out) - 1, "")
    elif bad == "orphan":
        out.insert(0, "ACGT")
    return "\n".join(out) + "\n"


@register
class FastaRecords(Family):
    """Parse FASTA sequencing files into per-record tables, or write a FASTA validator that
    hidden malformed files must fail; level adds files, columns, rules and summaries."""

    name = "scientific_computing.fasta_records"
    domain = "scientific_computing"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        # table mode: per-record tables
        Rule("table_rows", (r"`/app/out/runK\.tsv` with one tab-separated line per record in "
                            r"file order: record id \(header text up to the first whitespace\), "
                            r"sequence length, number of G\+C",),
             (r"def test_table\(", r'seq\.count\("G"\) \+ seq\.count\("C"\)'),
             when={"mode": "table"}),
        Rule("case_insensitive", (r"bases counted case-insensitively",), (r"seq = seq\.upper\(\)",),
             when={"mode": "table"}),
        Rule("n_column", (r"number of G\+C, number of N",),
             (r'row\.append\(str\(seq\.count\("N"\)\)\)',), levels=frozenset({2, 3, 4}),
             when={"mode": "table"}),
        Rule("min_length", (r"leave out records shorter than \d+ bases",),
             (r'>= CFG\["min_len"\]',), levels=frozenset({3, 4}), when={"mode": "table"}),
        Rule("longest", (r"`/app/out/longest\.txt`: id of the longest record kept",),
             (r'read\("/app/out/longest\.txt"\)',), levels=frozenset({4}), when={"mode": "table"}),
        Rule("table_summary",
             (r'`/app/out/summary\.json`: `\{"records": R, "bases": B, "gc": G\}`',),
             (r'assert summary == \{{"records"',), levels=frozenset({4}), when={"mode": "table"}),
        Rule("table_checksums", (r"`/app/out/checksums\.sha256`: sha256sum lines for the \.tsv",),
             (r'check_manifest\("/app/out/checksums\.sha256", \[out for',),
             levels=frozenset({4}), when={"mode": "table"}),
        Rule("table_program", (r"reusable .+? program at `/app/fasta_table",),
             (r"def test_program\(",), when={"mode": "table", "code": True}),
        # check mode: a validator that files kept back must fail
        Rule("validator", (r"I want a validator at `/app/fasta_check",
                           r"exits 0 when the file is valid, non-zero otherwise"),
             (r"def test_program\(", r"assert not missed", r"assert not rejected"),
             when={"mode": "check"}),
        Rule("valid_newlines", (r"the file is non-empty and ends with a newline; lines end in a "
                                r"bare LF",),
             (r'kind == "nonewline"', r'kind == "empty"', r'kind == "crlf"'),
             when={"mode": "check"}),
        Rule("valid_headers", (r"every record starts with a header line `>ID`",),
             (r'kind == "emptyhdr"', r'kind == "spacehdr"', r'kind == "tabhdr"'),
             when={"mode": "check"}),
        Rule("valid_residues", (r"sequence lines contain only the uppercase letters A, C, G, T, N; "
                                r"no blank lines anywhere",),
             (r'kind == "badres"', r'kind == "lower"', r'kind == "blank"'),
             when={"mode": "check"}),
        Rule("valid_records", (r"every record has at least one base; no sequence before the "
                               r"first header",),
             (r'kind == "emptyrec"', r'kind == "noheader"'), when={"mode": "check"}),
        Rule("unique_ids", (r"record IDs are unique within the file",),
             (r'kinds\.append\("dup"\)',), levels=frozenset({2, 3, 4}), when={"mode": "check"}),
        Rule("line_length", (r"sequence lines are at most 60 characters",),
             (r'kinds\.append\("long"\)',), levels=frozenset({3, 4}), when={"mode": "check"}),
        Rule("verdicts", (r"`/app/out/verdicts\.txt` with lines `FILENAME OK` or `FILENAME BAD`",),
             (r'read\("/app/out/verdicts\.txt"\)',), when={"mode": "check"}),
        Rule("accepted", (r"copy every accepted file, unchanged, into `/app/out/accepted/`",),
             (r'folder = "/app/out/accepted"',), levels=frozenset({3, 4}), when={"mode": "check"}),
        Rule("verdict_summary", (r'`/app/out/summary\.json` as `\{"ok": N, "bad": M\}`',),
             (r'assert summary == \{{"ok"',), levels=frozenset({4}), when={"mode": "check"}),
        Rule("verdict_checksums", (r"`/app/out/checksums\.sha256` \(sha256sum format\) covering "
                                   r"verdicts\.txt and summary\.json",),
             (r'\["/app/out/verdicts\.txt", "/app/out/summary\.json"\]',),
             levels=frozenset({4}), when={"mode": "check"}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "parse FASTA sequence files into structured records": "table_rows"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "check" if ctx.verifier_kind == "adversarial_corpus" else "table"
        lang = language_or_bash(ctx)
        code = ctx.needs_code or ctx.verifier_kind != "exact_text"
        app_files: dict[str, str | bytes] = {}
        min_len = rng.choice([40, 60, 80])
        pairs, samples = [], []
        if mode == "table":
            for f in range(level):
                app_files[f"seqs/run{f + 1}.fa"] = _fasta_text(rng, 2 + 2 * level, masked=True)
                pairs.append([f"/app/seqs/run{f + 1}.fa", f"/app/out/run{f + 1}.tsv"])
            prog = program_path(lang, "/app/fasta_table")
        else:
            kinds = [None, "residue", None, "blank", "orphan", None][: 2 + level]
            for i, bad in enumerate(kinds):
                app_files[f"incoming/sample{i + 1}.fa"] = _fasta_text(rng, 2 + level, bad)
                samples.append(f"/app/incoming/sample{i + 1}.fa")
            prog = program_path(lang, "/app/fasta_check")
        cfg = {
            "level": level,
            "mode": mode,
            "table": mode == "table",
            "check": mode == "check",
            "pairs": pairs,
            "samples": samples,
            "lang": lang,
            "program": prog,
            "code": code,
            "min_len": min_len,
            "fresh": {1: 12, 2: 16, 3: 24, 4: 32}[level] if code else 0,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/fasta_table.sh"
        values = {
            "level": level,
            "mode": mode,
            "min_len": min_len,
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "pairs": pairs,
            "tables": [out.rsplit("/", 1)[1] for _, out in pairs],
            "tool": tool,
            "run": f"python3 {tool}" if lang == "python" else f"bash {tool}",
            "source": files.render(
                f"solution/{_SOURCES[mode, lang]}", oracle=oracle, level=level, mode=mode
            ).strip(),
        }
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), oracle=oracle
                )
            },
            files=app_files,
        )
