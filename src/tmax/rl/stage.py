"""The training stage as the workflow runs it (rules/train.smk).

``sft_warmup``: the optional SFT warm-up on reference solutions (paper's "SFT trap"
ablation). ``rl_train``: DPPO on the clean, non-held-out generated tasks, or, for the
RL-dataset ablation, on a prior dataset's converted tasks that its contamination check
keeps (:func:`choose_dataset_tasks`). Both write a
servable model folder named after the model (``results/models/<model>-sft``,
``results/models/<model>-tmax``) so the evaluation stage can serve and compare them;
checkpoints live in ``results/rl/<model>/`` outside the declared outputs, so a failed
or preempted job resumes instead of starting over.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch

from tmax.io import write_json
from tmax.rl.recipe import RESUMABLE_SETTINGS
from tmax.rl.sft import solution_of
from tmax.settings import RLSection, RLValues
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


def choose_dataset_tasks(
    manifest: Path,
    removed: Path,
    *,
    limit: int | None,
    with_solution: bool = False,
) -> list[dict[str, Any]]:
    """A prior dataset's training tasks (the RL-dataset ablation), as rows shaped like
    :func:`choose_training_tasks`'s: its converted tasks (those with a folder) that the
    contamination rule (``decontamination.remove_*``) keeps, as it keeps generated
    ones: ``removed`` is the dataset_filter job's list of the others
    (:func:`tmax.decontam.stage.write_removals`). There is no held-out split: the
    dataset is never evaluated on. With ``limit``, the shortest instructions first,
    then by id (many datasets ship no reference solution to measure); with
    ``with_solution``, only tasks that ship ``solution/solve.sh`` (SFT)."""
    import json

    document = json.loads(manifest.read_text(encoding="utf-8"))
    removed_ids = json.loads(removed.read_text(encoding="utf-8"))["removed"]
    rows = []
    for task in document["tasks"]:
        if not task.get("path") or task["id"] in removed_ids:
            continue
        solve = manifest.parent / task["path"] / "solution" / "solve.sh"
        files = []
        if solve.is_file():
            files.append({"path": "solution/solve.sh", "data": solve.read_bytes()})
        elif with_solution:
            continue
        rows.append({"task_id": task["id"], "instruction": task["instruction"], "files": files})
    log.info("%s: %d training task(s); %d removed by the contamination rule",
             document["dataset"], len(rows), len(removed_ids))  # fmt: skip
    if not rows:
        what = "converted task with solution/solve.sh" if with_solution else "converted task"
        raise ValueError(f"{manifest}: no {what} left to train on ({len(removed_ids)} removed)")
    rows.sort(key=lambda r: (len(r["instruction"]), r["task_id"]))
    return rows[:limit] if limit is not None else rows


def training_rows(
    tasks: Path,
    *,
    heldout_fraction: float,
    seed: int,
    limit: int | None,
    removed: Path | None = None,
    with_solution: bool = False,
) -> list[dict[str, Any]]:
    """The training tasks: ``tasks`` is the clean generated set (clean_tasks.parquet),
    or, with ``removed`` (its flagged tasks), a prior dataset's manifest.json."""
    if removed is None:
        return choose_training_tasks(tasks, heldout_fraction=heldout_fraction, seed=seed,
                                     limit=limit)  # fmt: skip
    return choose_dataset_tasks(tasks, removed, limit=limit, with_solution=with_solution)


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


def sft_warmup(
    model_dir: Path,
    tasks: Path,
    output: Path,
    curve: Path,
    *,
    rl: RLValues,
    heldout_fraction: float,
    seed: int,
    threads: int = 1,
    removed: Path | None = None,
) -> list[dict[str, float]]:
    """SFT on the reference solutions of the training tasks (``threads``: torch's);
    for a prior dataset (``removed`` given), on those of its tasks that ship one."""
    rl = RLSection.of(rl)
    rows, losses = _train_sft(
        model_dir, tasks, output, rl=rl, heldout_fraction=heldout_fraction, seed=seed,
        threads=threads, removed=removed, steps=rl.sft.steps, batch_seed=seed,
        tracking=curve.parent / "sft",
    )  # fmt: skip
    write_json(curve, {"tasks": [r["task_id"] for r in rows], "curve": losses})
    return losses


def _train_sft(
    model_dir: Path, tasks: Path, output: Path, *, rl: RLSection,
    heldout_fraction: float, seed: int, threads: int, removed: Path | None,
    steps: int | None, batch_seed: int, tracking: Path, token_budget: int | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:  # fmt: skip
    """SFT of ``model_dir`` into the servable folder ``output`` (:func:`run_sft`'s
    ``steps`` or ``token_budget``): the training rows and the loss curve. Each step goes
    to the job's tracker (W&B or TensorBoard), which writes under ``tracking``."""
    from tmax.rl.sft import run_sft
    from tmax.tracking import job_tracker

    torch.set_num_threads(threads)
    sft = rl.sft
    model, tokenizer = _load(model_dir)
    rows, examples = _sft_examples(tokenizer, tasks, rl=rl, heldout_fraction=heldout_fraction,
                                   seed=seed, removed=removed)  # fmt: skip
    tracker = job_tracker(tracking)
    tracker.log_config({"sft": sft.asdict(), "sft_steps": steps, "token_budget": token_budget,
                        "sft_examples": len(examples)})  # fmt: skip
    try:
        losses = run_sft(
            model, examples, steps=steps, token_budget=token_budget,
            learning_rate=sft.learning_rate, batch_size=sft.batch_size, seed=batch_seed,
            tracker=tracker,
        )  # fmt: skip
    finally:
        tracker.close()
    _save(model, tokenizer, model_dir, output)
    return rows, losses


def _sft_examples(
    tokenizer: Any, tasks: Path, *, rl: RLValues, heldout_fraction: float, seed: int,
    removed: Path | None,
) -> tuple[list[dict[str, Any]], list[tuple[list[int], list[int]]]]:  # fmt: skip
    """The training tasks with a reference solution (at most ``rl.sft.max_tasks``, not
    RL's ``max_train_tasks``: SFT teaches reading tasks from many, RL may work a few)
    and their expert episodes, tokenised."""
    rl = RLSection.of(rl)
    from tmax.harness import HarnessSettings
    from tmax.rl.sft import solution_conversation, tokenize_conversation

    rows = training_rows(
        tasks, heldout_fraction=heldout_fraction, seed=seed, limit=rl.sft.max_tasks,
        removed=removed, with_solution=True,
    )  # fmt: skip
    settings = HarnessSettings.for_rl(rl)
    examples = []
    for row in rows:
        messages, tools = solution_conversation(row["instruction"], solution_of(row), settings)
        examples.append(tokenize_conversation(tokenizer, messages, tools))
    log.info("SFT on %d reference solution(s), %d tokens", len(examples),
             sum(len(ids) for ids, _ in examples))  # fmt: skip
    return rows, examples


def sft_control(
    sft_dir: Path,
    tasks: Path,
    rl_curve: Path,
    output: Path,
    curve: Path,
    *,
    rl: RLValues,
    heldout_fraction: float,
    seed: int,
    threads: int = 1,
    removed: Path | None = None,
) -> dict[str, Any]:
    """The control arm: the SFT model trained on, by SFT on the same reference solutions
    at the same rate and batch size, for as many learner tokens as RL ran forward and
    backward (``sequence_tokens`` summed over ``rl_curve``'s steps). What RL adds over
    this is what RL adds, not what more training of any kind would; generation, which
    SFT does not need, is not counted."""
    rl = RLSection.of(rl)
    import json

    steps = json.loads(rl_curve.read_text(encoding="utf-8"))["curve"]
    missing = [
        m.get("step") for m in steps if "sequence_tokens" not in m and m.get("loss") is not None
    ]
    if missing:
        raise ValueError(f"{rl_curve}: steps {missing[:5]} do not record sequence_tokens (a "
                         "run from before the control existed): rerun rl_train")  # fmt: skip
    budget = int(sum(m.get("sequence_tokens") or 0 for m in steps))
    if budget == 0:  # every step skipped (all groups uniform): the control is the SFT model
        log.warning("RL trained on no token in %d step(s): the control is the SFT model as is",
                    len(steps))  # fmt: skip
    log.info("SFT control: %d learner tokens, as RL's %d step(s)", budget, len(steps))
    rows, losses = _train_sft(
        sft_dir, tasks, output, rl=rl, heldout_fraction=heldout_fraction, seed=seed,
        threads=threads, removed=removed, steps=None, token_budget=budget,
        batch_seed=seed + 1,  # other batches than the warm-up's
        tracking=curve.parent / "control",
    )  # fmt: skip
    summary = {"tasks": [r["task_id"] for r in rows], "token_budget": budget,
               "tokens": sum(c["tokens"] for c in losses), "curve": losses}  # fmt: skip
    write_json(curve, summary)
    return summary


def _fresh_run_if_inputs_changed(
    run_dir: Path, model_dir: Path, task_ids: Sequence[str], settings: Any, layout: str = "local"
) -> None:
    """Checkpoints resume the same run only: a new start model, task set, recipe or
    learner layout (``layout``: one process, or N DeepSpeed ranks, whose checkpoints
    differ) starts over instead of resuming. Settings that do not change what a step
    computes (how many steps, how often to checkpoint, micro-batch size, groups in
    flight) resume: more steps continue the run."""
    import hashlib
    import json
    from dataclasses import asdict

    recipe = {k: v for k, v in asdict(settings).items() if k not in RESUMABLE_SETTINGS}
    digest = hashlib.sha256()
    for weights in sorted(model_dir.glob("*.safetensors")):
        digest.update(weights.read_bytes())
    digest.update(json.dumps([list(task_ids), recipe, layout], sort_keys=True).encode())
    fingerprint = digest.hexdigest()
    marker = run_dir / "inputs.sha256"
    if run_dir.exists() and (not marker.exists() or marker.read_text() != fingerprint):
        log.info("inputs changed since %s was started: starting a fresh run", run_dir)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(fingerprint)


def rl_train(
    model_dir: Path,
    tasks: Path,
    tasks_root: Path,
    snapshots: Path,
    curve: Path,
    run_dir: Path,
    *,
    rl: RLValues,
    heldout_fraction: float,
    seed: int,
    backend: str,
    threads: int = 1,
    removed: Path | None = None,
) -> dict[str, Any]:
    """DPPO from ``model_dir`` on the training tasks (:func:`training_rows`), whose
    folders are under ``tasks_root``; resumes from ``run_dir``. Writes a servable model
    folder per snapshot step (:func:`tmax.rl.select.snapshot_steps`) into ``snapshots``.

    One process, or, as the command of a Slurm job whose allocation has several tasks,
    the launcher of one training rank per GPU (per task on CPU) across the allocation
    (:mod:`tmax.rl.launch.ranks`); rank 0 writes ``output``. ``threads`` is torch's per
    process, shared by generation and the optimizer step; the sandboxes' commands and
    verifiers run in other processes. Rank 0 writes the snapshots into
    ``run_dir/snapshots``; they are linked into ``snapshots`` when training is done."""
    rl = RLSection.of(rl)
    from tmax.rl.engines.remote import EngineSettings, closed, prepare_server_dir
    from tmax.rl.launch.ranks import launch_ranks, placement, split_nodes, start_engine_servers
    from tmax.rl.select import publish_snapshots, snapshot_steps
    from tmax.rl.trainer import RLSettings, write_run_summary

    where = placement()
    rows, pool = rl_pool(model_dir, tasks, rl=rl, heldout_fraction=heldout_fraction, seed=seed,
                         threads=threads, removed=removed)  # fmt: skip
    task_ids = [r["task_id"] for r in rows]
    settings = RLSettings.from_config(rl, seed)
    arguments: dict[str, Any] = {
        "model_dir": str(model_dir),
        "tasks_root": str(tasks_root),
        "task_ids": task_ids,
        "run_dir": str(run_dir),
        "rl": rl.asdict(),
        "seed": seed,
        "backend": backend,
        "threads": threads,
    }
    # Snapshots already written follow their schedule: a new one starts over.
    kept = f"snapshots every {rl.select_every or 'last'}"
    if rl.engine == "vllm":
        from tmax.models.serve import check_vllm_python

        check_vllm_python()  # before any node is started: a clear error, not a dead server
    if where.role == "launcher":
        layout = split_nodes(where, rl)
        learners = f"deepspeed {layout.describe()} zero-{rl.zero_stage}; {kept}"
        _fresh_run_if_inputs_changed(run_dir, model_dir, task_ids, settings, learners)
        servers = None
        if layout.engine_servers:
            if rl.engine != "vllm":
                raise ValueError(
                    f"rl.inference_nodes is {rl.inference_nodes}: the engines on their own "
                    "nodes are vLLM servers; set rl.engine: vllm"
                )
            # The paper's layout: vLLM engines on their own nodes, fed weights each step.
            engines_dir = run_dir / "engines"
            engine = EngineSettings.from_config(rl, model_dir, threads=threads, seed=seed)
            server_file = prepare_server_dir(engines_dir, engine)
            arguments["engine_servers"] = {"dir": str(engines_dir),
                                           "count": layout.engine_servers}  # fmt: skip
            servers = start_engine_servers(server_file, layout, run_dir / "logs",
                                           threads=threads)  # fmt: skip
        launch_ranks({**arguments, "distributed": True}, run_dir, servers=servers,
                     nodes=layout.training_nodes, ranks_per_node=layout.ranks_per_node,
                     servers_closed=lambda: closed(run_dir / "engines"))  # fmt: skip
    else:
        if rl.inference_nodes:
            log.warning("rl.inference_nodes is %d, but this is not a Slurm job of several "
                        "nodes: the engine runs in the training process",
                        rl.inference_nodes)  # fmt: skip
        if where.role == "single":
            _fresh_run_if_inputs_changed(run_dir, model_dir, task_ids, settings,
                                         f"local; {kept}")  # fmt: skip
        train_rank(**arguments, distributed=where.role == "rank")
    publish_snapshots(run_dir / "snapshots", snapshots,
                      snapshot_steps(settings.steps, rl.select_every))  # fmt: skip
    return write_run_summary(run_dir, curve, pool=pool)


def rl_pool(
    model_dir: Path,
    tasks: Path,
    *,
    rl: RLValues,
    heldout_fraction: float,
    seed: int,
    threads: int = 1,
    removed: Path | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The tasks RL draws from: at most ``rl.max_train_tasks`` training tasks, chosen as
    ``rl.train_tasks`` says (:mod:`tmax.rl.episodes.pool`); with ``informative``, also what was
    estimated (the starting policy ``model_dir`` scores every training task once): the
    chosen task ids under ``chosen``, every task's estimate under ``tasks``, best first."""
    rl = RLSection.of(rl)
    limit = rl.max_train_tasks
    informative = rl.train_tasks == "informative" and limit is not None
    rows = training_rows(
        tasks, heldout_fraction=heldout_fraction, seed=seed,
        limit=None if informative else limit, removed=removed,
    )  # fmt: skip
    if not informative or len(rows) <= limit:
        return rows, None
    from tmax.rl.episodes.pool import choose_pool

    torch.set_num_threads(threads)
    model, tokenizer = _load(Path(model_dir))
    chosen, ranked = choose_pool(model, tokenizer, rows, rl=rl, limit=limit)
    return list(chosen), {
        "choice": "informative",
        "group_size": rl.group_size,
        "temperature": rl.temperature,
        "chosen": [row["task_id"] for row in chosen],
        "tasks": ranked,
    }


def train_rank(
    *,
    model_dir: str,
    tasks_root: str,
    task_ids: Sequence[str],
    run_dir: str,
    rl: RLValues,
    seed: int,
    backend: str,
    threads: int,
    distributed: bool,
    engine_servers: Mapping[str, Any] | None = None,
) -> None:
    """One training process: the whole run alone, or one rank of a distributed run.

    Alone it trains with :class:`~tmax.rl.learners.learner.LocalLearner`; as a rank
    (``distributed``: Slurm's or torchrun's environment, see
    :func:`tmax.rl.learners.learner.init_distributed`) with
    :class:`~tmax.rl.learners.learner.DeepSpeedLearner`, ZeRO stage ``rl.zero_stage``. Rank 0
    holds the sandboxes and the inference engine and writes the snapshots
    (``run_dir/snapshots/step-N``, :mod:`tmax.rl.select`); with
    ``engine_servers`` (``dir``, ``count``: the launcher started them on the inference
    nodes) its engine is a :class:`~tmax.rl.engines.remote.RemoteEngine` over them, told to exit
    when training ends.
    """
    rl = RLSection.of(rl)
    from transformers import AutoTokenizer

    from tmax.rl.engines.remote import mark_closed
    from tmax.rl.learners.learner import (
        DeepSpeedLearner,
        Learner,
        LocalLearner,
        enable_gradient_checkpointing,
        init_distributed,
        load_partitioned,
    )
    from tmax.rl.select import snapshot_name, snapshot_steps
    from tmax.rl.trainer import RLSettings, Trainer
    from tmax.rl.weights.streaming import SnapshotSink

    torch.set_num_threads(threads)
    settings = RLSettings.from_config(rl, seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    learner: Learner
    main = True
    if distributed:
        main = init_distributed(timeout_s=float(rl.collective_timeout_sec)).rank == 0
        # Partitioned as it loads: no rank holds the whole model (27B: 108 GB in fp32).
        model, keep = load_partitioned(Path(model_dir), lr=rl.learning_rate,
                                       zero_stage=rl.zero_stage)  # fmt: skip
    else:
        (model, _), keep = _load(Path(model_dir)), None
    sequence = None
    if rl.sequence_parallel_size > 1:
        from tmax.rl.learners.sequence_parallel import sequence_groups, split_token_mixers

        sequence = sequence_groups(rl.sequence_parallel_size,
                                   timeout_s=float(rl.collective_timeout_sec))  # fmt: skip
        assert sequence is not None
        split_token_mixers(model, sequence)
    if rl.packing:
        from tmax.rl.learners.packing import enable_packing

        enable_packing(model)
        log.info("micro-batches packed: whole episodes end to end in rows of at most %d "
                 "tokens", rl.micro_batch_tokens)  # fmt: skip
    if rl.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    if distributed:
        learner = DeepSpeedLearner(model, lr=rl.learning_rate, zero_stage=rl.zero_stage)
    else:
        learner = LocalLearner(model, lr=rl.learning_rate)
    del keep  # transformers' DeepSpeed config: needed only until the learner has the model
    engine = env = None
    if main:
        engine, env = _rollout_side(Path(model_dir), tokenizer, Path(tasks_root), task_ids,
                                    rl=rl, backend=backend, servers=engine_servers,
                                    run_dir=Path(run_dir), threads=threads, seed=seed)  # fmt: skip
        log.info("DPPO on %d task(s): %d step(s) of %d prompts x %d samples", len(task_ids),
                 settings.steps, settings.prompts_per_step, settings.group_size)  # fmt: skip

    def snapshot(step: int) -> SnapshotSink:
        target = Path(run_dir) / "snapshots" / snapshot_name(step)
        target.parent.mkdir(parents=True, exist_ok=True)
        log.info("snapshot of step %d: %s", step, target)
        return SnapshotSink(Path(model_dir), target, tokenizer)

    kept = snapshot_steps(settings.steps, rl.select_every)
    try:
        trainer = Trainer(env, engine, learner, settings, Path(run_dir), snapshot=snapshot,
                          snapshot_steps=kept, sequence=sequence)  # fmt: skip
        state = trainer.train()
    finally:
        if hasattr(env, "close"):
            env.close()  # abandoned episodes (prefetched groups, a SIGTERM) leave sandboxes
        if engine_servers is not None and main:
            mark_closed(Path(engine_servers["dir"]))  # the servers on the inference nodes exit
        if hasattr(engine, "close"):
            engine.close()  # and those started beside this rank
    if state.step < settings.steps:
        raise RuntimeError(f"training stopped at step {state.step} of {settings.steps}")


def save_weights(
    weights: Mapping[str, torch.Tensor],
    tokenizer: Any,
    model_dir: Path,
    output: Path,
    *,
    limit: int | None = None,
) -> None:
    """A servable folder of ``weights`` (a full state dict) in ``model_dir``'s
    architecture and dtype, written the way the trainer writes a snapshot
    (:class:`tmax.rl.weights.streaming.SnapshotSink`: safetensors shards of at most ``limit``
    bytes, transformers' naming, so vLLM and ``transformers serve`` load it as they load
    ``model_dir``)."""
    from tmax.rl.weights.streaming import BUCKET_BYTES, SnapshotSink, stream_state_dict

    sink = SnapshotSink(Path(model_dir), Path(output), tokenizer)
    stream_state_dict(weights, sink, limit=limit or BUCKET_BYTES)


def _rollout_side(
    model_dir: Path,
    tokenizer: Any,
    tasks_root: Path,
    task_ids: Sequence[str],
    *,
    rl: RLSection,
    backend: str,
    servers: Mapping[str, Any] | None = None,
    run_dir: Path | None = None,
    threads: int = 1,
    seed: int = 0,
) -> tuple[Any, Any]:
    """Rank 0's inference engine and sandboxed task environment. The engine is
    ``rl.engine``: transformers in this process, or vLLM servers — on the inference nodes
    the launcher started (``servers``), else ``rl.engines_per_node`` of them (default
    one) started here, beside this rank, and stopped when the engine is closed."""
    from tmax.benchmarks import heldout as generated_tasks
    from tmax.harness import HarnessSettings
    from tmax.rl.engines.local import TransformersEngine
    from tmax.rl.engines.remote import (
        EngineSettings,
        VLLMEngine,
        local_servers,
        read_key,
        read_settings,
        wait_for_servers,
    )
    from tmax.rl.episodes.environments import TaskEnvironment

    chosen = generated_tasks(tasks_root, list(task_ids), name="training tasks")
    dirs = {path.name: path for path in chosen.tasks}
    engine: Any
    if servers is not None:
        directory = Path(servers["dir"])
        urls = wait_for_servers(directory, int(servers["count"]),
                                timeout_s=float(rl.engine_start_timeout_sec))  # fmt: skip
        engine = VLLMEngine(urls, read_key(directory),
                            settings=read_settings(directory / "server.json"))  # fmt: skip
    elif rl.engine == "vllm":
        directory = (run_dir or model_dir) / "engines"
        settings = EngineSettings.from_config(rl, model_dir, threads=threads, seed=seed)
        running = local_servers(directory, settings, rl.engines_per_node or 1)
        urls = running.__enter__()
        try:
            engine = VLLMEngine(urls, read_key(directory), settings=settings, host="127.0.0.1",
                                on_close=lambda: running.__exit__(None, None, None))  # fmt: skip
        except BaseException:
            running.__exit__(None, None, None)
            raise
    else:
        engine = TransformersEngine(model_dir, tokenizer)
    env = TaskEnvironment(
        dirs, tokenizer, HarnessSettings.for_rl(rl), backend=backend,
        # Every episode of a group at once by default: their turns share engine batches.
        workers=rl.rollout_workers or rl.group_size,
        run_id=os.environ.get("TMAX_RUN_ID") or f"rl-{os.getpid()}",
    )  # fmt: skip
    return engine, env


def main(argv: Sequence[str] | None = None) -> int:
    """One rank: ``python -m tmax.rl.stage <run_dir>/launch.json`` (the launcher,
    :mod:`tmax.rl.launch.ranks`, starts it with ``srun``)."""
    from tmax.logs import setup_logging

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m tmax.rl.stage <run_dir>/launch.json", file=sys.stderr)
        return 2
    arguments = json.loads(Path(args[0]).read_text())
    setup_logging(None)
    # torch.distributed names its old collectives (which DeepSpeed calls) at every step.
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\..*` is deprecated")
    train_rank(**arguments)
    return 0


if __name__ == "__main__":
    from tmax.rl.launch.ranks import leave_without_teardown

    leave_without_teardown(main())
