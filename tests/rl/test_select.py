"""Choosing the trained model among training snapshots (tmax.rl.select)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tmax.rl.select import (
    choose,
    link_tree,
    publish_snapshots,
    select_checkpoint,
    snapshot_name,
    snapshot_score,
    snapshot_steps,
)


@pytest.mark.parametrize(
    ("steps", "every", "expected"),
    [
        (500, 100, [100, 200, 300, 400, 500]),  # the paper
        (5, 2, [2, 4, 5]),  # the last step is always a candidate
        (5, None, [5]),
        (3, 10, [3]),
        (1, 1, [1]),
    ],
)
def test_snapshot_steps(steps: int, every: int | None, expected: list[int]) -> None:
    assert snapshot_steps(steps, every) == expected


def test_snapshot_steps_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="steps must be at least 1"):
        snapshot_steps(0, 1)
    with pytest.raises(ValueError, match="select_every must be at least 1"):
        snapshot_steps(5, 0)


def test_the_best_wins_and_ties_go_to_the_later_step() -> None:
    assert choose({100: 0.4, 200: 0.6, 300: 0.5}) == 200
    assert choose({100: 0.6, 200: 0.6, 300: 0.5}) == 200
    with pytest.raises(ValueError, match="no snapshot"):
        choose({})


def _snapshot(root: Path, step: int, payload: str) -> None:
    folder = root / snapshot_name(step)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_text(payload)
    (folder / "config.json").write_text("{}")


def _run(path: Path, accuracy: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"accuracy": accuracy, "run": 0}))
    return path


def test_select_publishes_the_best_snapshot_and_says_why(tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    for step in (2, 4, 5):
        _snapshot(snapshots, step, f"weights of step {step}")
    runs = {
        2: [_run(tmp_path / "s2/run0.json", 0.25), _run(tmp_path / "s2/run1.json", 0.75)],
        4: [_run(tmp_path / "s4/run0.json", 1.0), _run(tmp_path / "s4/run1.json", 0.5)],
        5: [_run(tmp_path / "s5/run0.json", 0.5), _run(tmp_path / "s5/run1.json", 0.5)],
    }
    output, report = tmp_path / "model", tmp_path / "selection.json"
    on = {"select_benchmark": "tb-lite", "select_harness": "tmax", "select_runs": 2}
    assert select_checkpoint(snapshots, runs, output, report, steps=[2, 4, 5], on=on) == 4
    assert (output / "model.safetensors").read_text() == "weights of step 4"
    # Hard links: the chosen weights are not stored twice.
    assert (output / "model.safetensors").stat().st_ino == (
        snapshots / "step-000004/model.safetensors"
    ).stat().st_ino
    document = json.loads(report.read_text())
    assert document["chosen_step"] == 4 and document["last_step"] == 5
    assert document["selected_on"] == on
    assert document["snapshots"]["2"] == {"score": 0.5, "runs": [0.25, 0.75]}
    assert document["snapshots"]["4"]["score"] == 0.75
    assert "ties go to the later step" in document["rule"]


def test_the_pointer_changes_with_the_chosen_weights_only(tmp_path: Path) -> None:
    """Evaluations read the pointer: choosing the same snapshot again on more runs
    writes it byte for byte (Snakemake's input checksum keeps them), another does not."""
    snapshots = tmp_path / "snapshots"
    for step in (2, 4):
        _snapshot(snapshots, step, f"weights of step {step}")
    output, pointer = tmp_path / "model", tmp_path / "model.json"

    def select(scores: dict[int, list[float]]) -> bytes:
        runs = {
            step: [_run(tmp_path / f"s{step}/run{i}.json", a) for i, a in enumerate(accs)]
            for step, accs in scores.items()
        }
        select_checkpoint(snapshots, runs, output, tmp_path / "selection.json",
                          steps=[2, 4], pointer=pointer)  # fmt: skip
        return pointer.read_bytes()

    first = select({2: [0.5], 4: [0.25]})
    assert json.loads(first)["path"] == str(output)
    assert select({2: [0.5, 0.5], 4: [0.25, 0.5]}) == first  # more runs, same choice
    assert select({2: [0.0], 4: [1.0]}) != first


def test_without_selection_the_last_step_is_the_model(tmp_path: Path) -> None:
    _snapshot(tmp_path / "snapshots", 5, "last")
    output, report = tmp_path / "model", tmp_path / "selection.json"
    assert select_checkpoint(tmp_path / "snapshots", {}, output, report, steps=[5]) == 5
    assert (output / "model.safetensors").read_text() == "last"
    document = json.loads(report.read_text())
    assert document["selected_on"] is None and document["snapshots"] == {"5": None}


def test_selection_inputs_must_match(tmp_path: Path) -> None:
    for step in (2, 4):
        _snapshot(tmp_path / "snapshots", step, "w")
    run = _run(tmp_path / "run0.json", 0.5)
    with pytest.raises(ValueError, match="no evaluation to choose between them"):
        select_checkpoint(tmp_path / "snapshots", {}, tmp_path / "m", tmp_path / "s.json",
                          steps=[2, 4])  # fmt: skip
    with pytest.raises(ValueError, match=r"evaluations of steps \[2\], snapshots of \[2, 4\]"):
        select_checkpoint(tmp_path / "snapshots", {2: [run]}, tmp_path / "m", tmp_path / "s.json",
                          steps=[2, 4])  # fmt: skip
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match=r"bad\.json: not an evaluation run"):
        snapshot_score([tmp_path / "bad.json"])
    assert not (tmp_path / "m").exists()


def test_publishing_links_every_snapshot_and_names_missing_ones(tmp_path: Path) -> None:
    run = tmp_path / "run/snapshots"
    for step in (2, 4):
        _snapshot(run, step, f"w{step}")
    publish_snapshots(run, tmp_path / "out", [2, 4])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["step-000002", "step-000004"]
    with pytest.raises(RuntimeError, match=r"snapshots of step\(s\) \[5\]"):
        publish_snapshots(run, tmp_path / "out", [2, 4, 5])


def test_link_tree_replaces_the_target(tmp_path: Path) -> None:
    _snapshot(tmp_path, 1, "new")
    target = tmp_path / "target"
    target.mkdir()
    (target / "stale.bin").write_text("old")
    link_tree(tmp_path / snapshot_name(1), target)
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    with pytest.raises(FileNotFoundError, match="no snapshot folder"):
        link_tree(tmp_path / "absent", target)
