"""The training stage as the workflow runs it (rules/train.smk).

``sft_warmup``: the optional SFT warm-up on reference solutions (paper's "SFT trap"
ablation). ``rl_train``: DPPO on the clean, non-held-out generated tasks. Both write a
servable model folder named after the model (``results/models/<model>-sft``,
``results/models/<model>-tmax``) so the evaluation stage can serve and compare them;
checkpoints live in ``results/rl/<model>/`` outside the declared outputs, so a failed
or preempted job resumes instead of starting over.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch

from tmax.harness import HarnessSettings
from tmax.io import write_json
from tmax.tasks.split import training_tasks

log = logging.getLogger("tmax.rl")


def choose_training_tasks(
    clean_tasks: Path,
    *,
    heldout_fraction: float,
    seed: int,
    limit: int | None,
) -> list[dict[str, Any]]:
    """The clean tasks outside the held-out split; with ``limit``, the ones with the
    shortest reference solutions (what a tiny model can learn in minutes)."""
    table = pq.read_table(clean_tasks, columns=["task_id", "instruction", "files"])
    rows = {row["task_id"]: row for row in table.to_pylist()}
    train = training_tasks(rows, heldout_fraction, seed)
    if not train:
        raise ValueError(f"no training tasks: {len(rows)} clean task(s), all held out or removed")
    chosen = [rows[t] for t in train]
    if limit is not None:
        chosen = sorted(chosen, key=lambda r: (len(solution_of(r)), r["task_id"]))[:limit]
    return chosen


def solution_of(row: Mapping[str, Any]) -> str:
    for entry in row["files"]:
        if entry["path"] == "solution/solve.sh":
            return bytes(entry["data"]).decode("utf-8", errors="replace")
    return ""


def _load(model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return model, tokenizer


def _save(model: Any, tokenizer: Any, source: Path, output: Path) -> None:
    """A servable folder: weights, tokenizer, and the source's other files."""
    tmp = output.with_name(f".{output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns("*.safetensors", "tmax_build.json"))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(output, ignore_errors=True)
    tmp.rename(output)


def harness_settings(rl: Mapping[str, Any]) -> HarnessSettings:
    """The episode budgets of RL rollouts (and of the SFT prompts, which only use
    max_tool_calls: it is written into the task prompt)."""
    defaults = HarnessSettings()
    return HarnessSettings(
        max_tool_calls=rl["max_tool_calls"],
        max_turn_tokens=rl.get("max_turn_tokens", defaults.max_turn_tokens),
        max_total_tokens=rl.get("max_total_tokens", defaults.max_total_tokens),
        temperature=rl.get("temperature", 1.0),
        interleaved_thinking=True,
        max_format_errors=rl.get("max_format_errors", 8),
        command_timeout_sec=float(rl.get("command_timeout_sec", 120)),
    )


def sft_warmup(
    model_dir: Path,
    clean_tasks: Path,
    output: Path,
    curve: Path,
    *,
    rl: Mapping[str, Any],
    heldout_fraction: float,
    seed: int,
    threads: int = 1,
) -> list[dict[str, float]]:
    """SFT on the reference solutions of the training tasks (``threads``: torch's)."""
    from tmax.rl.sft import run_sft, solution_conversation, tokenize_conversation

    torch.set_num_threads(threads)
    sft = rl["sft"]
    rows = choose_training_tasks(
        clean_tasks, heldout_fraction=heldout_fraction, seed=seed, limit=rl["max_train_tasks"]
    )
    model, tokenizer = _load(model_dir)
    settings = harness_settings(rl)
    examples = []
    for row in rows:
        messages, tools = solution_conversation(row["instruction"], solution_of(row), settings)
        examples.append(tokenize_conversation(tokenizer, messages, tools))
    log.info("SFT on %d reference solution(s), %d tokens", len(examples),
             sum(len(ids) for ids, _ in examples))  # fmt: skip
    losses = run_sft(
        model, examples, steps=sft["steps"], learning_rate=sft["learning_rate"],
        batch_size=sft["batch_size"], seed=seed,
    )  # fmt: skip
    _save(model, tokenizer, model_dir, output)
    write_json(curve, {"tasks": [r["task_id"] for r in rows], "curve": losses})
    return losses


RESUMABLE_SETTINGS = frozenset(
    {"steps", "checkpoint_every", "micro_batch_tokens", "groups_in_flight"}
)
"""RL settings a run may change and still resume from its checkpoints."""


def _fresh_run_if_inputs_changed(
    run_dir: Path, model_dir: Path, task_ids: Sequence[str], settings: Any
) -> None:
    """Checkpoints resume the same run only: a new start model, task set or recipe
    (the job reran because an input changed) starts over instead of resuming. Settings
    that do not change what a step computes (how many steps, how often to checkpoint,
    micro-batch size, groups in flight) resume: more steps continue the run."""
    import hashlib
    import json
    from dataclasses import asdict

    recipe = {k: v for k, v in asdict(settings).items() if k not in RESUMABLE_SETTINGS}
    digest = hashlib.sha256()
    for weights in sorted(model_dir.glob("*.safetensors")):
        digest.update(weights.read_bytes())
    digest.update(json.dumps([list(task_ids), recipe], sort_keys=True).encode())
    fingerprint = digest.hexdigest()
    marker = run_dir / "inputs.sha256"
    if run_dir.exists() and (not marker.exists() or marker.read_text() != fingerprint):
        log.info("inputs changed since %s was started: starting a fresh run", run_dir)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(fingerprint)


def rl_train(
    model_dir: Path,
    clean_tasks: Path,
    tasks_root: Path,
    output: Path,
    curve: Path,
    run_dir: Path,
    *,
    rl: Mapping[str, Any],
    heldout_fraction: float,
    seed: int,
    backend: str,
    threads: int = 1,
) -> dict[str, Any]:
    """DPPO from ``model_dir`` on the training tasks; resumes from ``run_dir``.
    ``threads`` is torch's, shared by generation and the optimizer step; the sandboxes'
    commands and verifiers run in other processes."""
    from tmax.rl.engine import TransformersEngine
    from tmax.rl.environments import TaskEnvironment
    from tmax.rl.learner import LocalLearner
    from tmax.rl.trainer import RLSettings, Trainer, write_run_summary

    torch.set_num_threads(threads)
    rows = choose_training_tasks(
        clean_tasks, heldout_fraction=heldout_fraction, seed=seed, limit=rl["max_train_tasks"]
    )
    from tmax.benchmarks import heldout as generated_tasks

    chosen = generated_tasks(tasks_root, [r["task_id"] for r in rows], name="training tasks")
    dirs = {path.name: path for path in chosen.tasks}
    model, tokenizer = _load(model_dir)
    engine = TransformersEngine(model_dir, tokenizer)
    learner = LocalLearner(model, lr=rl["learning_rate"])
    env = TaskEnvironment(
        dirs, tokenizer, harness_settings(rl), backend=backend,
        # Every episode of a group at once by default: their turns share engine batches.
        workers=rl["rollout_workers"] or rl["group_size"],
        run_id=os.environ.get("TMAX_RUN_ID") or f"rl-{os.getpid()}",
    )  # fmt: skip
    settings = RLSettings.from_config(rl, seed)
    _fresh_run_if_inputs_changed(run_dir, model_dir, sorted(dirs), settings)
    log.info("DPPO on %d task(s): %d step(s) of %d prompts x %d samples", len(dirs),
             settings.steps, settings.prompts_per_step, settings.group_size)  # fmt: skip
    trainer = Trainer(env, engine, learner, settings, run_dir)
    state = trainer.train()
    if state.step < settings.steps:
        raise RuntimeError(f"training stopped at step {state.step} of {settings.steps}")
    _save(learner.model, tokenizer, model_dir, output)
    return write_run_summary(run_dir, curve)
