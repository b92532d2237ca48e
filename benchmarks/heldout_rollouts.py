"""Held-out pass rate of a finished miniature's models, played in process.

    .venv/bin/python benchmarks/heldout_rollouts.py RUN_DIR [--models tiny-qwen3-sft ...]

RUN_DIR is a workflow copy that ran (benchmarks/miniature.py --keep leaves them). Every
held-out task of its seed (not only the evaluation's cap) is played ``--episodes``
times per model with the tmax harness through the RL rollout code (the transformers
engine, the configured sandbox backend), at the evaluation's temperature and RL's
budgets, and the script prints each model's mean reward and how many tasks it solved
at least once, and how its episodes ended. Many more tasks than an evaluation job can
afford on 2 cores, so the difference between two models is not lost in the noise of
one task. ``--tasks`` plays the named tasks instead (training tasks too: RL's pool is
``pool.chosen`` in results/rl/<model>/curve.json), ``--temperature`` samples at another
temperature than the evaluation's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tmax.config import load_config  # noqa: E402
from tmax.tasks.split import is_heldout  # noqa: E402

DEFAULT_MODELS = ("tiny-qwen3-sft", "tiny-qwen3-control", "tiny-qwen3-tmax")


def heldout_dirs(run: Path, fraction: float, seed: int) -> list[Path]:
    """The held-out tasks that passed validation, in name order."""
    passed: set[str] = set()
    for verdicts in (run / "results/tasks/validation").glob("*.json"):
        passed |= {c["task"] for c in json.loads(verdicts.read_text())["checks"] if c["ok"]}
    dirs = (run / "results/tasks/shards").glob("*/spec-*")
    return sorted((d for d in dirs if d.name in passed and is_heldout(d.name, fraction, seed)),
                  key=lambda d: d.name)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7, help="sampling seed")
    parser.add_argument("--tasks", nargs="+", help="task names (default: every held-out task)")
    parser.add_argument("--temperature", type=float, help="default: the evaluation's")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from tmax.harness import HarnessSettings
    from tmax.rl.engines.local import TransformersEngine
    from tmax.settings import RLSection

    torch.set_num_threads(1)
    config = load_config(args.run / "config.yaml")
    evaluation = config["evaluation"]
    if args.tasks:
        shards = args.run / "results/tasks/shards"
        found = {task.name: task for task in shards.glob("*/*") if task.is_dir()}
        if missing := [name for name in args.tasks if name not in found]:
            parser.error(f"no such task under {shards}: {', '.join(missing)}")
        tasks = [found[name] for name in args.tasks]
    else:
        tasks = heldout_dirs(args.run, evaluation["heldout_fraction"], config["seed"])
    temperature = evaluation["temperature"] if args.temperature is None else args.temperature
    settings = HarnessSettings.for_rl(RLSection.of({**config["rl"], "temperature": temperature}))
    backend = config["sandbox"]["backend"]
    print(f"{len(tasks)} {'named' if args.tasks else 'held-out'} tasks, {args.episodes} "
          f"episodes each, temperature {temperature}, backend {backend}")  # fmt: skip
    for name in args.models:
        model_dir = args.run / "results/models" / name
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        engine = TransformersEngine(model_dir, tokenizer)
        started = time.monotonic()
        play = partial(pass_rate, engine=engine, tokenizer=tokenizer, settings=settings,
                       episodes=args.episodes, backend=backend, seed=args.seed)  # fmt: skip
        with ThreadPoolExecutor(4) as pool:  # four groups share the engine's batches
            # each task its own seed: one seed for all would draw the same random numbers
            # in every task, and one unlucky draw in the shared prefix would sink them all
            groups = list(pool.map(play, tasks, range(len(tasks))))
        rates = [sum(rewards) / len(rewards) for rewards, _ in groups]
        endings = Counter(status for _, statuses in groups for status in statuses)
        solved = sum(rate > 0 for rate in rates)
        print(f"{name:<24} mean reward {100 * sum(rates) / len(rates):5.1f} %   solved at "
              f"least once {solved}/{len(rates)}   ({time.monotonic() - started:.0f} s)\n"
              f"{'':<24} episodes: {', '.join(f'{n} {s}' for s, n in endings.most_common())}",
              flush=True)  # fmt: skip


def pass_rate(task: Path, position: int, *, engine: Any, tokenizer: Any, settings: Any,
              episodes: int, backend: str, seed: int) -> tuple[list[float], list[str]]:  # fmt: skip
    """The rewards and exit statuses of ``episodes`` episodes of one task."""
    from tmax.rl.episodes.rollout import rollout_group

    group = rollout_group(task, engine, tokenizer, settings, episodes, workers=episodes,
                          backend=backend, seed=seed * 1_000_003 + position)  # fmt: skip
    return [sample.reward for sample in group], [sample.exit_status for sample in group]


if __name__ == "__main__":
    main()
