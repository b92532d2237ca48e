"""Figures come out as real PNG and PDF files, including the ones without data, and
the provenance record names the commit, config and packages."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.report.conftest import CURVE, DECONTAM_REPORT, TASKS_REPORT
from tmax.config import config_hash
from tmax.io import file_digest
from tmax.report.figures import write_figures
from tmax.report.provenance import git_state, provenance
from tmax.report.stage import FIGURE_NAMES


def test_every_figure_is_a_non_empty_png_and_pdf(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="tmax.report")
    paths = write_figures(
        tmp_path,
        curves={"tiny-a": CURVE["curve"], "tiny-b": CURVE["curve"][:2]},
        rl_settings={
            "tiny-a": {"loss": "dppo", "group_size": 8},
            "tiny-b": {"loss": "grpo", "group_size": 8},
        },
        domain_counts=TASKS_REPORT["axes"]["domain"],
        decontam_report=DECONTAM_REPORT,
    )
    assert sorted(p.name for p in paths) == sorted(
        f"{name}.{fmt}" for name in FIGURE_NAMES for fmt in ("png", "pdf")
    )
    for path in paths:
        head = path.read_bytes()[:8]
        assert head.startswith(b"\x89PNG" if path.suffix == ".png" else b"%PDF"), path
    # one group size only: that figure says why instead of plotting
    assert "every RL run used group_size = 8" in caplog.text
    assert "every RL run used loss" not in caplog.text


def test_figures_without_any_data_still_come_out(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="tmax.report")
    paths = write_figures(
        tmp_path,
        curves={},
        rl_settings={},
        domain_counts=None,
        decontam_report={"benchmarks": {"tb-lite": {}}, "summary": []},
    )
    assert len(paths) == 2 * len(FIGURE_NAMES)
    assert all(p.stat().st_size > 0 for p in paths)
    assert "no model was trained with RL" in caplog.text
    assert "no benchmark was loaded (tb-lite)" in caplog.text


def test_provenance_names_commit_config_and_packages(tmp_path: Path, config) -> None:
    result = tmp_path / "table.csv"
    result.write_text("a,b\n")
    record = provenance(config, root=ROOT, results=[result], inputs=[tmp_path / "absent"])
    assert record["config_hash"] == config_hash(config)
    assert record["config"]["seed"] == config["seed"]
    assert record["packages"]["matplotlib"] != "not installed"
    assert set(record["packages"]) >= {"tmax", "snakemake", "torch"}
    assert record["results"] == {str(result): file_digest(result)}
    assert record["inputs"] == {}
    commit = record["git"]["commit"]
    assert commit is None or len(commit) == 40
    json.dumps(record)  # serialisable as written


def test_outside_a_git_checkout_provenance_says_so(tmp_path: Path) -> None:
    state = git_state(tmp_path)
    assert state["commit"] is None
    assert "not a git checkout" in state["reason"]


def test_directory_digest_changes_with_content(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1")
    before = file_digest(tmp_path)
    (tmp_path / "a.txt").write_text("2")
    assert file_digest(tmp_path) != before


def test_training_curves_mark_the_step_selection_kept(tmp_path: Path) -> None:
    from tmax.report.figures import read_chosen_steps, training_curves

    (tmp_path / "a.json").write_text(json.dumps({"chosen_step": 2, "selected_on": {"x": 1}}))
    (tmp_path / "b.json").write_text(json.dumps({"chosen_step": 3, "selected_on": None}))
    chosen = read_chosen_steps({"tiny-a": tmp_path / "a.json", "tiny-b": tmp_path / "b.json"})
    assert chosen == {"tiny-a": 2}  # tiny-b did not select: it kept its last step
    figure = training_curves({"tiny-a": CURVE["curve"], "tiny-b": CURVE["curve"]}, chosen)
    axis = figure.axes[0]
    labels = [line.get_label() for line in axis.get_lines()]
    assert "tiny-a (kept step 2)" in labels and "tiny-b" in labels
    markers = [line for line in axis.get_lines() if line.get_linestyle() == ":"]
    assert [list(line.get_xdata()) for line in markers] == [[2, 2]]


def test_the_reward_panel_shows_the_trend_and_the_starting_policys_level() -> None:
    from tmax.report.figures import smoothed, start_level, training_curves

    assert smoothed([0, 3, 0, 3, 0, 3]) == [1.5, 1.0, 2.0, 1.0, 2.0, 1.5]
    assert smoothed([1.0, 2.0]) == [1.5, 1.5]
    curve = [
        {"step": 0, "reward_mean": 0.2, "reward_start_policy_mean": 0.25,
         "episodes_start_policy": 16},
        {"step": 1, "reward_mean": 0.3, "reward_start_policy_mean": 0.5,
         "episodes_start_policy": 4},
        {"step": 2, "reward_mean": 0.6, "reward_start_policy_mean": None,
         "episodes_start_policy": 0},
        {"step": 3, "reward_mean": 0.7},
    ]  # fmt: skip
    assert start_level(curve) == pytest.approx((0.25 * 16 + 0.5 * 4) / 20)
    assert start_level(CURVE["curve"]) is None  # an older run's metrics: no line
    axis = training_curves({"tiny": curve}).axes[0]
    lines = {line.get_label(): line for line in axis.get_lines()}
    trend = smoothed([0.2, 0.3, 0.6, 0.7])
    assert list(lines["tiny, smoothed"].get_ydata()) == pytest.approx(trend)
    assert list(lines["tiny, starting policy (0.30)"].get_ydata()) == pytest.approx([0.3, 0.3])
