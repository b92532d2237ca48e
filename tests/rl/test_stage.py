"""The training stage: a rerun resumes its own run, and starts over when inputs change."""

from __future__ import annotations

from pathlib import Path

from tmax.rl.stage import _fresh_run_if_inputs_changed
from tmax.rl.trainer import RLSettings


def test_checkpoints_survive_a_rerun_only_with_the_same_inputs(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights v1")
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "step-000004"

    _fresh_run_if_inputs_changed(run, model, ["a", "b"], RLSettings(steps=8))
    checkpoint.mkdir(parents=True)
    _fresh_run_if_inputs_changed(run, model, ["a", "b"], RLSettings(steps=8))
    assert checkpoint.exists()  # a failed or preempted job resumes

    _fresh_run_if_inputs_changed(run, model, ["a", "b", "c"], RLSettings(steps=8))
    assert not checkpoint.exists()  # new tasks: a new run
    checkpoint.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights v2")
    _fresh_run_if_inputs_changed(run, model, ["a", "b", "c"], RLSettings(steps=8))
    assert not checkpoint.exists()  # a new start model (e.g. a redone SFT): a new run


def test_more_steps_continue_the_run_and_a_new_recipe_starts_over(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "step-000004"
    _fresh_run_if_inputs_changed(run, model, ["a"], RLSettings(steps=8))
    checkpoint.mkdir(parents=True)
    longer = RLSettings(steps=16, checkpoint_every=2, groups_in_flight=4, micro_batch_tokens=99)
    _fresh_run_if_inputs_changed(run, model, ["a"], longer)
    assert checkpoint.exists()  # what a step computes is unchanged: resume
    _fresh_run_if_inputs_changed(run, model, ["a"], RLSettings(steps=16, learning_rate=1e-5))
    assert not checkpoint.exists()  # another learning rate is another run


def test_another_learner_layout_starts_over(tmp_path: Path) -> None:
    """One process and N DeepSpeed ranks write different checkpoints: moving a run from
    a laptop to a Slurm job (or to more nodes) starts it again."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "step-000004"
    _fresh_run_if_inputs_changed(run, model, ["a"], RLSettings(steps=8), "local")
    checkpoint.mkdir(parents=True)
    _fresh_run_if_inputs_changed(run, model, ["a"], RLSettings(steps=8), "deepspeed x2x1")
    assert not checkpoint.exists()
