"""The RL-dataset ablation: a model with `rl_data: <dataset>` trains on that prior
dataset's converted tasks (those its contamination check lets through), and its
evaluation fills the dataset's row of the ablation table."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.datasets.ablation_support import (
    BENCHMARK_SOURCES,
    CLEAN_TASK,
    LEAKY_TASK,
    dataset_entry,
)
from tests.report.conftest import write_scenario
from tests.report.test_build import texts
from tests.workflow.test_snakemake import copy_workflow, edit_config, planned_jobs, snakemake
from tmax.config import ConfigError, validate_config
from tmax.decontam.stage import write_removals
from tmax.report.build import build_tables
from tmax.report.ingest import measure, records_from_runs
from tmax.report.tables import load_paper_values
from tmax.rl.stage import choose_dataset_tasks

ANY_OVERLAP = {"ngram": 13, "rule": "any", "threshold": 0}


def flagged(task_id: str, count: int) -> dict[str, Any]:
    """A 13-gram entry of a decontamination report (the fields the removal rule reads)."""
    return {"task_id": task_id, "n": 13, "count": count, "fraction": 0.5,
            "hit_ngrams": {"tb-lite": count}, "matches": []}  # fmt: skip


def write_dataset(root: Path, tasks: dict[str, tuple[str, bool | None]], hits: dict) -> Path:
    """manifest.json + decontam.json of a dataset; ``tasks``: id -> (instruction,
    ships a solution? / None: no folder); ``hits``: id -> shared 13-grams."""
    entries = []
    for task_id, (instruction, solution) in tasks.items():
        path = None if solution is None else f"tasks/{task_id}"
        if solution:
            (root / path / "solution").mkdir(parents=True)
            (root / path / "solution" / "solve.sh").write_text(f"echo {task_id}\n")
        entries.append({"id": task_id, "instruction": instruction, "path": path})
    manifest = {"dataset": "fx", "has_environments": True, "tasks": entries, "skipped": []}
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps(manifest))
    report = {"summary": [{"n": 13}], "flagged": {"13": [flagged(t, c) for t, c in hits.items()]}}
    (root / "decontam.json").write_text(json.dumps(report))
    return root / "manifest.json"


def test_training_tasks_of_a_dataset(tmp_path: Path) -> None:
    manifest = write_dataset(
        tmp_path / "fx",
        {
            "long": ("a much longer instruction than the others", False),
            "short-b": ("short one", True),
            "short-a": ("short one", False),
            "leaky": ("x", True),  # the shortest, but it shares 13-grams with a benchmark
            "no-folder": ("y", None),  # listed, never converted
        },
        {"leaky": 3, "short-b": 0},
    )
    decontam = manifest.parent / "decontam.json"

    def removed(removal: dict[str, Any]) -> Path:
        write_removals(decontam, tmp_path / "removed.json", **removal)
        return tmp_path / "removed.json"

    def ids(removal: dict[str, Any], **kwargs: Any) -> list[str]:
        rows = choose_dataset_tasks(manifest, removed(removal), **kwargs)
        return [r["task_id"] for r in rows]

    # shortest instruction first, ties by id; flagged and folderless tasks left out
    assert ids(ANY_OVERLAP, limit=None) == ["short-a", "short-b", "long"]
    assert ids(ANY_OVERLAP, limit=2) == ["short-a", "short-b"]
    # the configured rule decides, as for the generated tasks
    assert ids({**ANY_OVERLAP, "rule": "count", "threshold": 5}, limit=1) == ["leaky"]
    # the SFT warm-up: only tasks that ship a reference solution
    rows = choose_dataset_tasks(manifest, removed(ANY_OVERLAP), limit=None,
                                with_solution=True)  # fmt: skip
    assert [(r["task_id"], r["files"][0]["data"]) for r in rows] == [("short-b", b"echo short-b\n")]


def test_a_dataset_with_nothing_to_train_on_is_an_error(tmp_path: Path) -> None:
    manifest = write_dataset(tmp_path / "fx", {"leaky": ("x", False)}, {"leaky": 1})
    removed = tmp_path / "removed.json"
    write_removals(manifest.parent / "decontam.json", removed, **ANY_OVERLAP)
    with pytest.raises(ValueError, match="no converted task left to train on"):
        choose_dataset_tasks(manifest, removed, limit=None)


def test_rl_data_must_name_a_dataset_with_environments(config: dict[str, Any]) -> None:
    sources = [
        {"name": "fx", "layout": "harbor", "path": "/data/fx"},
        {"name": "traj", "layout": "trajectories", "path": "/data/traj"},
    ]
    models = [
        {"name": "a", "path": "tiny-qwen3", "rl_data": "nope"},
        {"name": "b", "path": "tiny-qwen3", "rl_data": "traj"},
        {"name": "c", "path": "tiny-qwen3", "rl_data": "fx", "train": False},
        {"name": "d", "path": "tiny-qwen3", "rl_data": "fx",
         "evaluation": {"variants": ["tmax"], "benchmarks": ["heldout"]}},
    ]  # fmt: skip
    with pytest.raises(ConfigError) as error:
        validate_config({**config, "models": models, "datasets": {"sources": sources}})
    problems = str(error.value)
    assert (
        "'models[0].rl_data' = 'nope' is not a datasets.sources name; allowed: fx, traj" in problems
    )
    assert "'models[1].rl_data' = 'traj': the dataset ships trajectories" in problems
    assert "'models[2].rl_data' = 'fx' is set on a model with train: false" in problems
    assert "models[3]" not in problems
    with pytest.raises(ConfigError, match="benchmarks"):
        bad = [{"name": "e", "path": "p", "evaluation": {"benchmarks": ["tb-9"]}}]
        validate_config({**config, "models": bad})


# --- the ablation table --------------------------------------------------------------------------

ABLATIONS = {
    "qwen3.5-9b-termigen": {"dataset": "termigen", "base": "qwen3.5-9b"},
    "qwen3.5-9b-tmax-15k": {"dataset": "tmax-15k", "base": "qwen3.5-9b"},
    "qwen3.5-2b-cli-gym": {"dataset": "cli-gym", "base": "qwen3.5-2b"},  # another base
}


def solved(count: int) -> dict[str, list[int]]:
    """Four tasks, the first ``count`` solved in both runs (pass@1 = 25 x count, std 0)."""
    return {task: [int(i < count)] * 2 for i, task in enumerate("abcd")}


SCENARIO = {
    ("qwen3.5-9b", "tb-lite", "tmax"): solved(1),
    ("qwen3.5-9b-tmax", "tb-lite", "tmax"): solved(3),
    ("qwen3.5-9b-termigen-tmax", "tb-lite", "tmax"): solved(2),
    ("qwen3.5-9b-tmax-15k-tmax", "tb-lite", "tmax"): solved(4),
    ("qwen3.5-2b-cli-gym-tmax", "tb-lite", "tmax"): solved(0),
}


def test_each_dataset_row_comes_from_the_model_trained_on_it(tmp_path: Path) -> None:
    records = records_from_runs(write_scenario(tmp_path / "results", SCENARIO))
    tables = build_tables(measure(records), load_paper_values(), ablations=ABLATIONS)
    ablation = texts(tables["dataset_ablation"])
    assert ablation[("none", "tb-lite")] == "25.0 ± 0.0 (n=4×2)"
    assert ablation[("termigen", "tb-lite")] == "50.0 ± 0.0 (n=4×2)"
    # the released TMAX-15K takes the paper's row; our generated tasks stand beside it
    assert ablation[("tmax-15k", "tb-lite")] == "100.0 ± 0.0 (n=4×2)"
    assert ablation[("tmax-generated", "tb-lite")] == "75.0 ± 0.0 (n=4×2)"
    assert ablation[("cli-gym", "tb-lite")] == "not run"  # trained from the 2B model
    assert ablation[("swe-smith", "tb-lite")] == "not run"
    assert ablation[("termigen", "terminal-bench-2.1")] == "not run"
    # ablation models are not model sizes: the reference is still the first plain model
    assert set(tables["cross_size"].rows) >= {"qwen3.5-9b"}
    assert not {name for name in ABLATIONS} & set(tables["cross_size"].rows)
    assert "termigen: qwen3.5-9b-termigen" in " ".join(tables["dataset_ablation"].notes)


# --- under Snakemake -----------------------------------------------------------------------------

TINY_ABLATION = {
    "name": "tiny-qwen3-fx",
    "path": "tiny-qwen3",
    "rl_data": "fx",
    "evaluation": {"variants": ["tmax"], "harnesses": ["tmax"]},
}


def ablation_workflow(tmp_path: Path) -> Path:
    """The embedded default plus a local fixture dataset and the tiny model trained on
    it; the fixture tasks stand in for the benchmarks."""
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf", small=False)

    def configure(config: dict[str, Any]) -> None:
        config["datasets"] = {"sources": [dataset_entry("fx", tmp_path / "source")]}
        config["evaluation"]["sources"] = BENCHMARK_SOURCES
        config["models"].append(TINY_ABLATION)

    edit_config(workdir, configure)
    return workdir


@pytest.mark.slow
def test_a_model_with_rl_data_trains_on_the_dataset(tmp_path: Path) -> None:
    workdir = ablation_workflow(tmp_path)
    assert planned_jobs(workdir, "results/models/tiny-qwen3-fx-tmax") == {
        "prepare_dataset": 1,
        "decontam_benchmark": 2,
        "dataset_decontam_ngram": 1,  # the 13-grams the removal reads, not the report
        "dataset_filter": 1,
        "tiny_model": 1,
        "sft_warmup": 1,
        "toolbox": 1,
        "base_image": 1,
        "rl_train": 1,
        "select_checkpoint": 1,
    }  # no generated tasks, no domain images
    plan = planned_jobs(workdir)
    # tiny-qwen3: sft, control, tmax x (4 runs under tmax + 2 under each of 3 harnesses);
    # tiny-qwen3-fx: tmax x tmax x 4 runs
    assert (plan["rl_train"], plan["sft_warmup"], plan["evaluate"]) == (2, 2, 34)
    assert plan["sft_control"] == 1  # the generated-task model's; the ablation has none
    for rule in ("prepare_dataset", "label_dataset", "dataset_difficulty", "dataset_decontam"):
        assert plan[rule] == 1
    assert plan["dataset_decontam_ngram"] == 2


@pytest.mark.slow
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("podman") is None,
    reason="RL rollouts run in sandboxes: needs root, bwrap and podman (./setup.sh)",
)
def test_the_tiny_model_trains_one_step_on_a_local_dataset(tmp_path: Path) -> None:
    workdir = ablation_workflow(tmp_path)

    def shrink(config: dict[str, Any]) -> None:
        config["rl"].update(
            steps=1, group_size=2, prompts_per_step=1, max_train_tasks=2, max_tool_calls=2,
            max_turn_tokens=48, checkpoint_every=1, groups_in_flight=1, sft={"steps": 0},
        )  # fmt: skip
        # The fixture benchmarks share their verifier lines with every task (boilerplate
        # four items cannot reveal); remove only the task that copies an instruction.
        config["decontamination"].update(remove_rule="count", remove_threshold=20)

    edit_config(workdir, shrink)
    target = "results/models/tiny-qwen3-fx-tmax"
    snakemake(workdir, target)
    assert (workdir / target / "config.json").is_file()
    # no generated task was made or checked: the model trained on the dataset alone
    assert not (workdir / "results/tasks").exists()
    assert not (workdir / "results/decontam/clean_tasks.parquet").exists()
    run_log = (workdir / "results/logs/rl/tiny-qwen3-fx/train.log").read_text()
    assert "fx: 1 training task(s); 1 removed by the contamination rule" in run_log
    assert f"on {CLEAN_TASK}" in run_log and f"on {LEAKY_TASK}" not in run_log
    curve = json.loads((workdir / "results/rl/tiny-qwen3-fx/curve.json").read_text())
    assert [point["step"] for point in curve["curve"]] == [1]
