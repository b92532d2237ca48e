"""What a change reruns, at the embedded default's scale and the paper's: every row of
tests/workflow/rerun_matrix.py planned (and, where a checkpoint writes what it wrote
before, run with --touch) against a finished run of each config."""

from __future__ import annotations

from typing import Any

import pytest

from tests.workflow.rerun_matrix import (
    EMBEDDED,
    PAPER,
    ROOT,
    ROWS,
    SCALES,
    SPELLINGS,
    Row,
    Tree,
    markdown,
    measure_all,
)

pytestmark = pytest.mark.slow

START, END = "<!-- rerun-matrix:start -->", "<!-- rerun-matrix:end -->"


@pytest.fixture(scope="session")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every row measured against a finished (touched) run of each scale, built once."""
    results = {}
    for name, scale in SCALES.items():
        root = tmp_path_factory.mktemp(f"rerun-{name}")
        tree = Tree.build(root / "run", scale)
        results[name] = measure_all(tree, root / "rows")
    return results


@pytest.mark.parametrize("scale", [EMBEDDED, PAPER])
@pytest.mark.parametrize("row", ROWS, ids=[row.change for row in ROWS])
def test_a_change_reruns_what_it_needs(
    measured: dict[str, dict[str, Any]], row: Row, scale: str
) -> None:
    planned, ran = measured[scale][row.change]
    assert planned == row.planned[scale], f"{row.change}: planned {planned}"
    if row.same_products:
        assert ran == row.run[scale], f"{row.change}: ran {ran}"


@pytest.mark.parametrize("scale", [EMBEDDED, PAPER])
@pytest.mark.parametrize("row", SPELLINGS, ids=[row.change for row in SPELLINGS])
def test_another_spelling_of_the_same_config_reruns_nothing(
    measured: dict[str, dict[str, Any]], row: Row, scale: str
) -> None:
    """Key order, number spelling, YAML style, defaults written out and --config: the
    same settings plan nothing, and a real change spelled otherwise plans what it
    touches, at both scales."""
    planned, _ = measured[scale][row.change]
    assert planned == row.planned[scale], f"{row.change}: planned {planned}"


def test_the_matrix_covers_every_stage() -> None:
    """At least 15 changes, and each stage's knobs among them."""
    assert len(ROWS) >= 15
    text = " ".join(row.change for row in ROWS)
    for knob in ("sampler.", "generation.", "sandbox.", "Dockerfile", "validate",
                 "decontamination.", "rl.", "own `rl.", "evaluation.", "labelling.", "report.",
                 "Slurm profile"):  # fmt: skip
        assert knob in text, knob
    assert sum(not jobs for row in ROWS for jobs in row.planned.values()) >= 10


def test_the_docs_show_the_matrix() -> None:
    """docs/reruns.md's rerun table is this matrix (regenerate it with
    `python -m tests.workflow.rerun_matrix`)."""
    page = (ROOT / "docs" / "reruns.md").read_text()
    assert START in page and END in page
    shown = page.split(START, 1)[1].split(END, 1)[0].strip()
    assert shown == markdown().strip(), "python -m tests.workflow.rerun_matrix"
    start, end = "<!-- rerun-spellings:start -->", "<!-- rerun-spellings:end -->"
    shown = page.split(start, 1)[1].split(end, 1)[0].strip()
    assert shown == markdown(SPELLINGS).strip(), "python -m tests.workflow.rerun_matrix"
