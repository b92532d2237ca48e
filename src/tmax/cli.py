"""``tmax``: run single stages of the workflow outside Snakemake.

Examples::

    tmax config check config.yaml
    tmax sample --config configs/paper.yaml --out specs.parquet
    tmax balance specs.parquet --json balance.json --markdown balance.md
    tmax task check tests/fixtures/tasks/*
    tmax sandbox check tests/fixtures/tasks/* --backend bwrap
    tmax sandbox cleanup --run-id my-run
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tmax import __version__
from tmax.config import ConfigError, config_hash, load_config
from tmax.logs import setup_logging
from tmax.tasks import TaskFormatError, read_task
from tmax.taxonomy import SamplerError, TaxonomyError


def _config_check(args: argparse.Namespace) -> int:
    for path in args.configs:
        config = load_config(path)
        print(f"{path}: ok (hash {config_hash(config)}, {config['sampler']['n_specs']:,} specs)")
    return 0


def _sample(args: argparse.Namespace) -> int:
    from tmax.taxonomy.stage import sample_to_parquet

    config = load_config(args.config)
    sample_to_parquet(config, args.out, start=args.start, stop=args.stop)
    return 0


def _balance(args: argparse.Namespace) -> int:
    from tmax.taxonomy.stage import write_balance

    report = write_balance(args.specs, args.json, args.markdown, args.taxonomy)
    for axis, body in report["axes"].items():
        print(f"{axis:20s} exp(H)/N = {body['balance']:.4f}")
    return 0


def _task_check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.tasks:
        try:
            task = read_task(path)
        except TaskFormatError as error:
            failed += 1
            print(f"FAIL {error}", file=sys.stderr)
        else:
            solution = "yes" if task.solution is not None else "no"
            print(f"ok   {path} ({len(task.tests)} test file(s), solution: {solution})")
    return 1 if failed else 0


def _sandbox_cleanup(args: argparse.Namespace) -> int:
    from tmax.sandbox import cleanup

    backends = tuple(args.backend) if args.backend else ("podman", "bwrap", "apptainer")
    for backend, removed in cleanup(args.run_id, backends).items():
        print(f"{backend:10s} removed {len(removed)}: {' '.join(removed)}".rstrip(": "))
    return 0


def _sandbox_check(args: argparse.Namespace) -> int:
    """Oracle must score 1 and a no-op 0: the task's verifier tells solved from not."""
    from tmax.sandbox.episode import run_episode, sandbox_for_task

    failed = 0
    for task_dir in args.tasks:
        if not (task_dir / "solution" / "solve.sh").exists():
            print(f"skip {task_dir}: no solution/solve.sh")
            continue
        rewards = []
        for commands in ([], ["bash /solution/solve.sh"]):
            with sandbox_for_task(task_dir, args.backend) as box:
                box.upload(task_dir / "solution", "/solution")
                episode = run_episode(box, commands, task_dir / "tests")
            rewards.append(episode.reward)
        ok = rewards == [0.0, 1.0]
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {task_dir}: no-op {rewards[0]:g}, oracle {rewards[1]:g}")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tmax", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"tmax {__version__}")
    parser.add_argument("--log", type=Path, help="also write the log to this file")
    stages = parser.add_subparsers(dest="command", required=True)

    config = stages.add_parser("config", help="configuration files")
    config_sub = config.add_subparsers(dest="action", required=True)
    check = config_sub.add_parser("check", help="validate config files against the schema")
    check.add_argument("configs", nargs="+", type=Path)
    check.set_defaults(func=_config_check)

    sample = stages.add_parser("sample", help="draw 9-axis task specs to Parquet")
    sample.add_argument("--config", type=Path, default=Path("config.yaml"))
    sample.add_argument("--out", type=Path, required=True)
    sample.add_argument("--start", type=int, default=0, help="first spec index (default 0)")
    sample.add_argument("--stop", type=int, help="one past the last index (default n_specs)")
    sample.set_defaults(func=_sample)

    balance = stages.add_parser("balance", help="balance score exp(H)/N and per-axis counts")
    balance.add_argument("specs", type=Path)
    balance.add_argument("--json", type=Path, required=True)
    balance.add_argument("--markdown", type=Path, required=True)
    balance.add_argument("--taxonomy", type=Path, help="taxonomy YAML (default: packaged)")
    balance.set_defaults(func=_balance)

    task = stages.add_parser("task", help="task directories (Harbor layout)")
    task_sub = task.add_subparsers(dest="action", required=True)
    task_check = task_sub.add_parser("check", help="validate task directories")
    task_check.add_argument("tasks", nargs="+", type=Path)
    task_check.set_defaults(func=_task_check)

    sandbox = stages.add_parser("sandbox", help="task sandboxes (podman, bwrap, apptainer)")
    sandbox_sub = sandbox.add_subparsers(dest="action", required=True)
    clean = sandbox_sub.add_parser("cleanup", help="remove what crashed runs left behind")
    clean.add_argument("--run-id", help="only this run's sandboxes (default: all)")
    clean.add_argument("--backend", action="append", choices=["podman", "bwrap", "apptainer"])
    clean.set_defaults(func=_sandbox_cleanup)
    oracle = sandbox_sub.add_parser("check", help="oracle scores 1 and a no-op 0, per task")
    oracle.add_argument("tasks", nargs="+", type=Path)
    oracle.add_argument("--backend", default="podman", choices=["podman", "bwrap", "apptainer"])
    oracle.set_defaults(func=_sandbox_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log)
    try:
        return int(args.func(args))
    except (ConfigError, TaxonomyError, SamplerError, TaskFormatError, RuntimeError) as error:
        print(f"tmax: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
