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


def test_snapshots_hold_the_given_weights_in_the_checkpoint_dtype(tmp_path: Path) -> None:
    """save_weights: a servable folder that loads back to exactly the weights given
    (the tied head from the embedding), in the start checkpoint's dtype; a weight the
    architecture lacks, or one it needs and is not given, is an error that names it."""
    import pytest
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tmax.models.tiny import ensure_tiny_model
    from tmax.rl.learner import LocalLearner
    from tmax.rl.stage import save_weights

    source = ensure_tiny_model(parent=tmp_path)
    base = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16)
    base.save_pretrained(tmp_path / "bf16")  # a bf16 start checkpoint
    for extra in source.iterdir():
        if not (tmp_path / "bf16" / extra.name).exists():
            (tmp_path / "bf16" / extra.name).write_bytes(extra.read_bytes())
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.01)
    weights = LocalLearner(model).full_state_dict()
    tokenizer = AutoTokenizer.from_pretrained(source)

    save_weights(weights, tokenizer, tmp_path / "bf16", tmp_path / "out")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert loaded.dtype == torch.bfloat16
    for name, tensor in loaded.state_dict().items():
        given = weights.get(name, weights.get("model.embed_tokens.weight"))
        assert torch.equal(tensor, given.to(torch.bfloat16)), name

    with pytest.raises(ValueError, match=r"missing.*model\.norm\.weight"):
        save_weights({k: v for k, v in weights.items() if k != "model.norm.weight"},
                     tokenizer, tmp_path / "bf16", tmp_path / "bad")  # fmt: skip
    with pytest.raises(ValueError, match=r"unexpected.*extra\.weight"):
        save_weights({**weights, "extra.weight": torch.zeros(1)}, tokenizer,
                     tmp_path / "bf16", tmp_path / "bad")  # fmt: skip
