"""``tmax``: run single stages of the workflow outside Snakemake.

Examples::

    tmax config check config.yaml
    tmax sample --config configs/paper.yaml --out specs.parquet
    tmax balance specs.parquet --json balance.json --markdown balance.md
    tmax task check tests/fixtures/tasks/*
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log)
    try:
        return int(args.func(args))
    except (ConfigError, TaxonomyError, SamplerError, TaskFormatError) as error:
        print(f"tmax: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
