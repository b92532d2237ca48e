"""Cells, rounding, the three renderings and the comparison with the paper."""

from __future__ import annotations

import csv
import io

import pytest

from tests.report.conftest import markdown_rows
from tmax.report.tables import (
    NOT_REPORTED,
    Cell,
    Table,
    compare,
    format_number,
    load_paper_values,
    parse_paper_values,
    round_half_up,
    to_csv,
    to_latex,
    to_markdown,
    write_table,
)


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (2.25, 1, 2.3),
        (0.05, 1, 0.1),
        (-0.05, 1, -0.1),
        (66.6666, 1, 66.7),
        (0.9975, 3, 0.998),
        (14600, 0, 14600.0),
    ],
)
def test_rounding_is_half_away_from_zero(value: float, digits: int, expected: float) -> None:
    assert round_half_up(value, digits) == expected


def test_a_negative_number_that_rounds_to_zero_prints_without_sign() -> None:
    assert format_number(-0.04, 1) == "0.0"
    assert format_number(-0.04, 1, signed=True) == "+0.0"
    assert format_number(-1.25, 1, signed=True) == "-1.3"


def test_cell_prints_mean_std_and_its_sample() -> None:
    cell = Cell(value=50.0, std=23.5702, n_tasks=3, n_runs=2, n_infra=1)
    assert cell.text == "50.0 ± 23.6 (n=3×2, 1 infra)"
    assert Cell(value=0.9876, digits=3, n_tasks=40).text == "0.988 (n=40)"
    assert Cell(value=14600, digits=0).text == "14600"


def test_a_cell_without_a_value_must_say_why() -> None:
    with pytest.raises(ValueError, match="must say why"):
        Cell()
    assert Cell(missing="not run").text == "not run"


def small_table() -> Table:
    return Table(
        name="cross_size",
        title="Cross-size",
        corner="model",
        rows=["qwen3.5-9b", "tiny"],
        columns=["tb-lite/base", "tb-lite/tmax"],
        cells={
            ("qwen3.5-9b", "tb-lite/base"): Cell(
                value=50.0, std=23.57, n_tasks=3, n_runs=2, n_infra=1, sources=("eval/x",)
            ),
            ("tiny", "tb-lite/tmax"): Cell(value=0.0, std=0.0, n_tasks=3, n_runs=2),
        },
        labels={"qwen3.5-9b": "Qwen3.5-9B", "tb-lite": "TB-Lite", "tmax": "TMAX"},
    )


def test_missing_cells_say_not_run_in_every_format_never_blank_or_zero() -> None:
    table = small_table()
    rows = markdown_rows(to_markdown(table))
    assert rows == [
        ["model", "TB-Lite · base", "TB-Lite · TMAX"],
        ["Qwen3.5-9B", "50.0 ± 23.6 (n=3×2, 1 infra)", "not run"],
        ["tiny", "not run", "0.0 ± 0.0 (n=3×2)"],
    ]
    assert all(cell for row in rows for cell in row)
    records = list(csv.DictReader(io.StringIO(to_csv(table))))
    assert len(records) == 4
    missing = [r for r in records if r["missing"]]
    assert [(r["row"], r["column"], r["text"], r["value"]) for r in missing] == [
        ("qwen3.5-9b", "tb-lite/tmax", "not run", ""),
        ("tiny", "tb-lite/base", "not run", ""),
    ]
    latex = to_latex(table)
    assert r"Qwen3.5-9B & 50.0 ± 23.6 {\scriptsize (n=3×2, 1 infra)} & not run \\" in latex
    assert r"tiny & not run & 0.0 ± 0.0 {\scriptsize (n=3×2)} \\" in latex


def test_every_format_keeps_the_title_and_the_notes() -> None:
    table = small_table()
    table.notes = ["pass@1 in %.", "statistics: paper."]
    markdown = to_markdown(table)
    assert markdown.startswith("## Cross-size\n\n| model")
    assert markdown.endswith("\n\n- pass@1 in %.\n- statistics: paper.\n")
    latex = to_latex(table)
    assert latex.startswith("% Cross-size\n\\begin{tabular}{lcc}\n\\toprule\n")
    assert latex.endswith("\\bottomrule\n\\end{tabular}\n% pass@1 in %.\n% statistics: paper.\n")
    # the CSV names the convention on every line instead
    table.statistics = "paper"
    assert {r["statistics"] for r in csv.DictReader(io.StringIO(to_csv(table)))} == {"paper"}


def test_a_pipe_in_a_markdown_cell_does_not_split_it() -> None:
    table = small_table()
    table.labels["tiny"] = "tiny | 1.4M"
    (row,) = [r for r in markdown_rows(to_markdown(table)) if r[0].startswith("tiny")]
    assert row == [r"tiny \| 1.4M", "not run", "0.0 ± 0.0 (n=3×2)"]


def test_csv_keeps_n_infra_and_sources_per_cell() -> None:
    (first, *_) = csv.DictReader(io.StringIO(to_csv(small_table())))
    assert first["text"] == "50.0 ± 23.6"
    assert (first["value"], first["std"]) == ("50.0", "23.6")
    assert (first["n_tasks"], first["n_runs"], first["n_infra"]) == ("3", "2", "1")
    assert first["sources"] == "eval/x"


def test_latex_is_booktabs_and_escapes_specials() -> None:
    table = small_table()
    table.labels["tiny"] = "tiny_model 100%"
    latex = to_latex(table)
    assert r"50.0 ± 23.6 {\scriptsize (n=3×2, 1 infra)}" in latex
    assert r"tiny\_model 100\%" in latex
    assert r"model & TB-Lite · base & TB-Lite · TMAX \\" in latex
    assert [line for line in latex.splitlines() if line.endswith("rule")] == [
        r"\toprule", r"\midrule", r"\bottomrule",
    ]  # fmt: skip
    assert latex.count(r"\\") == 3  # header + two rows


def test_write_table_writes_each_requested_format(tmp_path) -> None:
    paths = write_table(small_table(), tmp_path, ["md", "tex"])
    assert sorted(p.name for p in paths) == ["cross_size.md", "cross_size.tex"]
    with pytest.raises(ValueError, match="unknown table format"):
        write_table(small_table(), tmp_path, ["html"])


def test_comparison_gives_the_difference_of_the_printed_numbers() -> None:
    paper = parse_paper_values(
        {
            "tables": {
                "cross_size": {
                    "source": "Table 2",
                    "cells": {"qwen3.5-9b": {"tb-lite/base": 41.9, "tb-lite/tmax": 57.2}},
                }
            }
        }
    )
    view = compare(small_table(), paper)
    rows = {row: [view.cell(row, c).text for c in view.columns] for row in view.rows}
    assert rows["qwen3.5-9b/tb-lite/base"] == [
        "50.0 ± 23.6 (n=3×2, 1 infra)",
        "41.9",
        "+8.1 (n=3×2, 1 infra)",
    ]
    assert rows["qwen3.5-9b/tb-lite/tmax"] == ["not run", "57.2", "not run here"]
    assert rows["tiny/tb-lite/tmax"] == ["0.0 ± 0.0 (n=3×2)", NOT_REPORTED, "not reported in paper"]
    assert "tiny/tb-lite/base" not in rows  # neither side has it


def test_paper_values_file_holds_the_published_numbers() -> None:
    paper = load_paper_values()
    assert paper.cell("cross_size", "qwen3.5-2b", "terminal-bench-2.0/base").value == 2.3
    assert paper.cell("cross_size", "qwen3.6-27b", "terminal-bench-2.0/tmax").value == 42.7
    assert paper.cell("cross_size", "qwen3.5-9b", "terminal-bench-2.0/tmax").n_runs == 5
    assert paper.cell("cross_harness", "openhands", "tb-lite/tmax").value == 46.9
    assert paper.cell("dataset_ablation", "tmax-15k", "terminal-bench-2.1").value == 28.8
    assert paper.cell("dataset_comparison", "tmax-15k", "pass_at_8").value == 53
    assert paper.cell("cross_task", "aime", "tmax").value == 91.1
    assert paper.cell("cross_size", "qwen3.5-2b", "tb-lite/base").missing == NOT_REPORTED
    for name, table in paper.tables.items():
        assert table["source"].strip(), name


def test_a_malformed_paper_file_names_the_bad_key() -> None:
    with pytest.raises(ValueError, match=r"cross_size\.qwen3\.5-9b\.tb-lite is 'n/a'"):
        parse_paper_values(
            {"tables": {"cross_size": {"source": "x", "cells": {"qwen3.5-9b": {"tb-lite": "n/a"}}}}}
        )
    with pytest.raises(ValueError, match="needs a 'source' note"):
        parse_paper_values({"tables": {"t": {"cells": {}}}})
