"""The training stage: a rerun resumes its own run, and starts over when inputs change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_the_checkpoint_marker_is_pinned_and_only_packing_of_the_operational_settings_moves_it(
    tmp_path: Path,
) -> None:
    """A changed marker makes every running job start over: its digest for the default
    recipe is pinned (a new recipe field must say so here), and of the settings that do
    not change the math only rl.packing restarts a run."""
    from tmax.rl.recipe import OPERATIONAL_SETTINGS, RESTARTING_SETTINGS

    model = tmp_path / "model"
    model.mkdir()
    (model / "a.safetensors").write_bytes(b"x")

    def marker(settings: RLSettings) -> str:
        run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        _fresh_run_if_inputs_changed(run, model, ["t"], settings, "local")
        return (run / "inputs.sha256").read_text()

    pinned = "dc3b8efd710ee3bbeb3f4f034fc045d9c3bb6b650032b9a745faa0ab564b03c6"
    assert marker(RLSettings()) == pinned
    fields = RLSettings.__dataclass_fields__
    for name in sorted(OPERATIONAL_SETTINGS & set(fields)):
        value = getattr(RLSettings(), name)
        changed = RLSettings(**{name: (not value) if isinstance(value, bool) else value * 2})
        assert (marker(changed) != pinned) == (name in RESTARTING_SETTINGS), name


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
    from tmax.rl.learners.learner import LocalLearner
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


def test_sft_takes_its_own_task_count_not_rls(tmp_path: Path, tokenizer: Any) -> None:
    """SFT learns to read tasks from ``rl.sft.max_tasks`` of them (the shortest
    solutions first; null: all), however few RL draws from (``rl.max_train_tasks``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tmax.rl.stage import _sft_examples, choose_training_tasks

    rows = [
        {"task_id": f"t{i}", "instruction": f"Write {i}.",
         "files": [{"path": "solution/solve.sh", "data": f"echo {'x' * i} > /app/a\n".encode()}]}
        for i in range(1, 6)
    ]  # fmt: skip
    table = tmp_path / "clean_tasks.parquet"
    pq.write_table(pa.Table.from_pylist(rows), table)

    def sft_tasks(max_tasks: int | None) -> list[str]:
        sft = {"steps": 1, "learning_rate": 1e-3, "batch_size": 1, "max_tasks": max_tasks}
        rl = {"max_train_tasks": 1, "max_tool_calls": 3, "sft": sft}
        chosen, examples = _sft_examples(tokenizer, table, rl=rl, heldout_fraction=0.0, seed=0,
                                         removed=None)  # fmt: skip
        assert len(examples) == len(chosen)
        return [r["task_id"] for r in chosen]

    assert sft_tasks(3) == ["t1", "t2", "t3"]
    assert sorted(sft_tasks(None)) == ["t1", "t2", "t3", "t4", "t5"]
    rl_tasks = choose_training_tasks(table, heldout_fraction=0.0, seed=0, limit=1)
    assert [r["task_id"] for r in rl_tasks] == ["t1"]
