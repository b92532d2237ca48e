"""``tmax``: run single stages of the workflow outside Snakemake.

Examples::

    tmax config check config.yaml
    tmax sample --config configs/paper.yaml --out specs.parquet
    tmax balance specs.parquet --json balance.json --markdown balance.md
    tmax task check tests/fixtures/tasks/*
    tmax datasets convert termigen --config configs/paper.yaml --sample 20
    tmax sandbox check tests/fixtures/tasks/* --backend bwrap
    tmax sandbox cleanup --run-id my-run
    tmax sandbox preflight --backend apptainer
    tmax eval run tests/fixtures/tasks/* --harness tmax --base-url http://127.0.0.1:8000/v1 \
        --model my-model --runs 3 --jobs-dir jobs/
    tmax eval metrics jobs/2026-01-05__12-00-00 --json metrics.json
    tmax report tables --jobs jobs/2026-01-05__12-00-00 --out tables/
    tmax report tables --jobs released/*/ --out tables/ --map-model 'run-9b-step*=Qwen3.5-9B-TMAX'
    tmax plan --configfile configs/paper.yaml --model qwen3.5-9b
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tmax import __version__
from tmax.config import ConfigError, config_hash, load_config
from tmax.evaluate.harbor_agents import HARBOR_AGENTS
from tmax.harness import HARNESSES
from tmax.logs import setup_logging
from tmax.sandbox import BACKENDS
from tmax.settings import (
    DatasetsSection,
    EvaluationSection,
    ReportSection,
    SamplerSection,
    SandboxSection,
)
from tmax.tasks import TaskFormatError, read_task
from tmax.taxonomy import SamplerError, TaxonomyError


def _config_check(args: argparse.Namespace) -> int:
    for path in args.configs:
        config = load_config(path)
        specs = SamplerSection.of(config["sampler"]).n_specs
        print(f"{path}: ok (hash {config_hash(config)}, {specs:,} specs)")
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


def _datasets_convert(args: argparse.Namespace) -> int:
    """Convert a prior dataset into our task format (a config entry, or flags)."""
    from tmax.datasets.convert import prepare_dataset, source_entry

    if args.config is not None:
        config = load_config(args.config)
        entry = source_entry(config, args.name)
        seed = config["seed"] if args.seed is None else args.seed
        default = DatasetsSection.of(config["datasets"]).sample
        sample = entry.get("sample", default)  # the entry's own, else datasets.sample
    else:
        if not (args.layout and (args.path or args.git or args.hf)):
            raise ValueError("without --config, give --layout and one of --path, --git, --hf")
        keys = ("layout", "path", "git", "hf", "revision", "subdir", "files")
        entry = {"name": args.name, **{k: getattr(args, k) for k in keys if getattr(args, k)}}
        seed = 0 if args.seed is None else args.seed
        sample = None
    if args.sample is not None:
        sample = None if args.sample == 0 else args.sample
    out = args.out or Path("results/datasets") / args.name
    manifest = prepare_dataset(
        entry, out, seed=seed, sample=sample, max_skipped_share=args.max_skipped_share
    )
    print(f"{args.name}: {len(manifest['tasks'])} task(s) converted, "
          f"{len(manifest['skipped'])} skipped -> {out}/manifest.json")  # fmt: skip
    return 0


def _sandbox_cleanup(args: argparse.Namespace) -> int:
    from tmax.sandbox import cleanup

    backends = tuple(args.backend) if args.backend else BACKENDS
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


def _sandbox_preflight(args: argparse.Namespace) -> int:
    """Can this node run the backend's sandboxes? A table, exit 1 if not."""
    from tmax.sandbox.preflight import passed, preflight, table

    checks = preflight(args.backend)
    print(table(checks))
    return 0 if passed(checks) else 1


def _eval_run(args: argparse.Namespace) -> int:
    """Evaluate a model endpoint on task directories (a Harbor-style job folder; for a
    Harbor agent, one Harbor job per run, ``<jobs-dir>/run<N>``)."""
    from tmax.evaluate.harbor_agents import harbor_run_seed, run_harbor_agent
    from tmax.evaluate.runner import plan_trials, run_trials
    from tmax.evaluate.stage import run_summary
    from tmax.harness import HarnessSettings
    from tmax.models.client import OpenAIChatModel
    from tmax.sandbox.episode import sandbox_for_task

    settings = HarnessSettings(
        max_tool_calls=args.max_tool_calls,
        max_turn_tokens=args.max_turn_tokens,
        max_total_tokens=args.max_total_tokens,
        temperature=args.temperature,
        interleaved_thinking=not args.no_interleaved_thinking,
    )
    model = OpenAIChatModel(args.base_url, args.model, api_key_env=args.api_key_env)
    if args.harness in HARBOR_AGENTS:  # Harbor's own agent code, through our sandboxes
        listed = [{"path": str(path), "name": read_task(path).name} for path in args.tasks]
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        for run in range(args.runs):
            job = args.jobs_dir / f"run{run}"
            results = run_harbor_agent(
                args.harness, listed, model, settings, job, args.backend,
                EvaluationSection().network, concurrency=args.concurrency, api_key=key,
                seed=None if args.seed is None else harbor_run_seed(args.seed, run),
            )  # fmt: skip
            _print_run(run_summary(results, job, args.model, args.benchmark, args.harness, run))
        return 0
    tasks = [(path, read_task(path).name, None) for path in args.tasks]
    specs = plan_trials(
        tasks, model=args.model, benchmark=args.benchmark, harness=args.harness,
        runs=range(args.runs), seed=args.seed,
    )  # fmt: skip
    results = run_trials(
        specs,
        model,
        settings,
        args.jobs_dir,
        lambda task_dir: sandbox_for_task(task_dir, args.backend),
        concurrency=args.concurrency,
    )
    for run in range(args.runs):
        of_run = [r for r, spec in zip(results, specs, strict=True) if spec.run == run]
        _print_run(
            run_summary(of_run, args.jobs_dir, args.model, args.benchmark, args.harness, run)
        )
    return 0


def _print_run(summary: dict[str, Any]) -> None:
    accuracy = summary["accuracy"]
    shown = "–" if accuracy is None else f"{100 * accuracy:.1f}%"
    print(f"run {summary['run']}: {shown} of {summary['n_trials'] - summary['n_infra_failures']} "
          f"trial(s), {summary['n_infra_failures']} infrastructure failure(s)")  # fmt: skip


def _eval_metrics(args: argparse.Namespace) -> int:
    """Metrics of Harbor job folders (ours or Harbor's own)."""
    from tmax.evaluate.metrics import read_job_records, summarize
    from tmax.io import write_json

    records = read_job_records(
        args.jobs, statistics=args.statistics, benchmark=args.benchmark, strict=not args.skip_bad
    )
    summary = summarize(records, statistics=args.statistics)
    print(summary.to_markdown())
    if args.json:
        write_json(args.json, summary.to_dict())
    return 0


def _report_tables(args: argparse.Namespace) -> int:
    """The paper's tables from Harbor job folders (released runs re-tabulated)."""
    from tmax.report.ingest import records_from_jobs
    from tmax.report.labels import build_label_map
    from tmax.report.stage import write_report_tables
    from tmax.report.tables import load_paper_values

    # The map is checked before any trial is read: a typo fails fast.
    label_map = build_label_map(
        load_paper_values(),
        file=args.labels,
        entries={
            "models": args.map_model,
            "variants": args.map_variant,
            "benchmarks": args.map_benchmark,
            "harnesses": args.map_harness,
        },
    )
    records = records_from_jobs(args.jobs, strict=not args.skip_bad, statistics=args.statistics)
    if args.benchmark:
        records = [r if r.benchmark else replace(r, benchmark=args.benchmark) for r in records]
    records = label_map.apply(records)
    combined = args.out / "tables.md"
    write_report_tables(
        records,
        args.out,
        formats=args.formats,
        combined=combined,
        reference=args.reference_model,
        statistics=args.statistics,
        evaluations=args.out / "evaluations.parquet",
    )
    print(f"tables: {args.out}/ (all in {combined}; the trials in {args.out}/evaluations.parquet)")
    return 0


def _merged_config(paths: Sequence[Path]) -> dict:
    """config.yaml with each ``--configfile`` merged over it, key by key, as Snakemake
    merges them (lists replace), then validated."""
    import yaml

    from tmax.config import validate_config

    def merge(base: dict, update: dict) -> dict:
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value
        return base

    merged: dict = {}
    base = Path("config.yaml")
    if not base.is_file():  # run outside the repository: the one beside the package
        base = Path(__file__).resolve().parents[2] / "config.yaml"
    for path in [base, *paths]:
        if not path.is_file():
            raise ConfigError([f"file not found: {path}"], str(path))
        merge(merged, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return validate_config(merged, " + ".join(str(p) for p in paths) or "config.yaml")


def _plan(args: argparse.Namespace) -> int:
    """The memory plan of each trained model's layout (tmax.rl.launch.plan); 1 when one
    does not fit."""
    import json

    from tmax.rl.launch.plan import format_plan, plan_config

    config = _merged_config(args.configfile or [Path("configs/paper.yaml")])
    # DeepSpeed logs to stdout when imported; keep stdout for the plan (e.g. --json).
    with contextlib.redirect_stdout(sys.stderr):
        plans, skipped = plan_config(config, args.model or None)
    problems = [line for plan in plans for line in plan.problems()]
    if args.json:
        print(json.dumps({"plans": [p.as_dict() for p in plans], "skipped": skipped,
                          "problems": problems}, indent=2))  # fmt: skip
    else:
        for plan in plans:
            print(format_plan(plan) + "\n")
        for line in skipped:
            print(f"skipped {line}")
    for line in [w for plan in plans for w in plan.warnings()]:
        print(f"tmax plan: warning: {line}", file=sys.stderr)
    for line in problems:
        print(f"tmax plan: does not fit: {line}", file=sys.stderr)
    return 1 if problems else 0


def _statistics_option(parser: argparse.ArgumentParser) -> None:
    from tmax.evaluate.metrics import DEFAULT_STATISTICS, STATISTICS

    parser.add_argument(
        "--statistics",
        choices=STATISTICS,
        default=DEFAULT_STATISTICS,
        help="paper (default): infrastructure failures score 0, run i = each task's i-th "
        "attempt, ± = population std; exclude_infra: such trials left out, sample std",
    )


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

    datasets = stages.add_parser("datasets", help="prior datasets in our task format")
    datasets_sub = datasets.add_subparsers(dest="action", required=True)
    convert = datasets_sub.add_parser("convert", help="sample and convert one dataset")
    convert.add_argument("name", help="the dataset (its datasets.sources name with --config)")
    convert.add_argument("--config", type=Path, help="take the source from this config")
    convert.add_argument("--layout", help="without --config: the source's layout")
    convert.add_argument("--path", help="without --config: a local folder or file")
    convert.add_argument("--git", help="without --config: a git URL (with --revision)")
    convert.add_argument("--hf", help="without --config: a Hugging Face dataset id")
    convert.add_argument("--revision", help="git commit or Hub revision")
    convert.add_argument("--subdir", help="where the tasks are inside the source")
    convert.add_argument("--files", help="glob of the files to read")
    convert.add_argument("--sample", type=int, help="tasks to draw (0 = all)")
    convert.add_argument("--seed", type=int, help="sampling seed (default: the config's)")
    convert.add_argument(
        "--max-skipped-share", type=float, metavar="SHARE",
        help="fail when more than this share of the drawn tasks is skipped (default: the "
        "source's max_skipped_share, else 0.5)",
    )  # fmt: skip
    convert.add_argument("--out", type=Path, help="default results/datasets/<name>")
    convert.set_defaults(func=_datasets_convert)

    sandbox = stages.add_parser("sandbox", help="task sandboxes (podman, bwrap, apptainer)")
    sandbox_sub = sandbox.add_subparsers(dest="action", required=True)
    clean = sandbox_sub.add_parser("cleanup", help="remove what crashed runs left behind")
    clean.add_argument("--run-id", help="only this run's sandboxes (default: all)")
    clean.add_argument("--backend", action="append", choices=BACKENDS)
    clean.set_defaults(func=_sandbox_cleanup)
    oracle = sandbox_sub.add_parser("check", help="oracle scores 1 and a no-op 0, per task")
    oracle.add_argument("tasks", nargs="+", type=Path)
    oracle.add_argument("--backend", default=SandboxSection().backend, choices=BACKENDS)
    oracle.set_defaults(func=_sandbox_check)
    check = sandbox_sub.add_parser("preflight", help="can this node run the backend's sandboxes?")
    check.add_argument("--backend", default=SandboxSection().backend, choices=BACKENDS)
    check.set_defaults(func=_sandbox_preflight)

    evaluation = EvaluationSection()  # the defaults of eval run's budgets: the schema's
    evaluate = stages.add_parser("eval", help="agent evaluation (harnesses, trials, metrics)")
    eval_sub = evaluate.add_subparsers(dest="action", required=True)
    run = eval_sub.add_parser("run", help="run a model endpoint on tasks under one harness")
    run.add_argument("tasks", nargs="+", type=Path, help="Harbor task directories")
    run.add_argument(
        "--harness",
        default=EvaluationSection().harnesses[0],
        choices=[*HARNESSES, *HARBOR_AGENTS],
        help="ours, or harbor-terminus-2: Harbor's own agent (.venv-harbor)",
    )
    run.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint (…/v1)")
    run.add_argument("--model", required=True, help="the served model id")
    run.add_argument("--api-key-env", help="environment variable holding the API key")
    run.add_argument("--runs", type=int, default=1)
    run.add_argument(
        "--seed", type=int, help="sample each (run, task) with its own seed, as the workflow does"
    )
    run.add_argument("--jobs-dir", type=Path, default=Path("jobs/tmax-eval"))
    run.add_argument("--benchmark", default="tasks", help="label used in the results")
    # bwrap, not sandbox.backend's podman: rootless, and it applies a task's simple
    # Dockerfile steps at start instead of building an image (docs/sandboxes.md)
    run.add_argument("--backend", default="bwrap", choices=BACKENDS)
    run.add_argument("--concurrency", type=int, default=SandboxSection().max_concurrency)
    run.add_argument("--temperature", type=float, default=evaluation.temperature)
    run.add_argument("--max-tool-calls", type=int, default=evaluation.max_tool_calls)
    run.add_argument("--max-turn-tokens", type=int, default=evaluation.max_turn_tokens)
    run.add_argument("--max-total-tokens", type=int, default=evaluation.max_total_tokens)
    run.add_argument("--no-interleaved-thinking", action="store_true")
    run.set_defaults(func=_eval_run)
    metrics = eval_sub.add_parser("metrics", help="pass@1 ± std and pass@k of job folders")
    metrics.add_argument("jobs", nargs="+", type=Path, help="Harbor job folders")
    metrics.add_argument("--benchmark", help="label to use when the jobs do not name one")
    metrics.add_argument("--json", type=Path, help="also write the metrics as JSON")
    metrics.add_argument(
        "--skip-bad", action="store_true", help="skip unreadable trials (logged) instead of failing"
    )
    _statistics_option(metrics)
    metrics.set_defaults(func=_eval_metrics)  # fmt: skip

    report = stages.add_parser("report", help="the paper's tables from evaluation results")
    report_sub = report.add_subparsers(dest="action", required=True)
    tables = report_sub.add_parser("tables", help="tabulate Harbor job folders")
    tables.add_argument("--jobs", nargs="+", type=Path, required=True, help="Harbor job folders")
    tables.add_argument("--out", type=Path, required=True, help="folder for the tables")
    tables.add_argument("--formats", nargs="+", default=list(ReportSection().formats),
                        choices=["md", "csv", "tex"])  # fmt: skip
    tables.add_argument("--reference-model", help="model of the single-model tables")
    tables.add_argument("--benchmark", help="label to use when the jobs do not name one")
    tables.add_argument(
        "--skip-bad", action="store_true", help="skip unreadable trials (logged) instead of failing"
    )
    _statistics_option(tables)
    tables.add_argument(
        "--labels",
        type=Path,
        metavar="FILE.yaml",
        help="label map: sections models, variants, benchmarks, harnesses, each mapping a "
        "run's name (exact, glob, or re:REGEX) to the paper's name",
    )
    for section, what in (
        ("model", "run model name -> paper model, e.g. 'run-9b-step*=Qwen3.5-9B' or "
                  "'swerl-step200=qwen3.5-9b-tmax'"),
        ("variant", "run model name -> base, sft or tmax, e.g. 'run-9b-step*=tmax'"),
        ("benchmark", "dataset name -> paper benchmark, e.g. 'terminal-bench@2.0=TB 2.0'"),
        ("harness", "agent name -> paper harness, e.g. 'vanillux2-agent=tmax'"),
    ):  # fmt: skip
        tables.add_argument(
            f"--map-{section}",
            action="append",
            default=[],
            metavar="SOURCE=TARGET",
            help=f"{what} (repeatable; wins over --labels)",
        )
    tables.set_defaults(func=_report_tables)

    plan = stages.add_parser("plan", help="GPU and host memory plan of each RL layout")
    plan.add_argument(
        "--configfile",
        type=Path,
        action="append",
        help="merged over config.yaml like Snakemake's (default configs/paper.yaml)",
    )
    plan.add_argument("--model", action="append", help="only this model (repeatable)")
    plan.add_argument("--json", action="store_true", help="the plans as JSON")
    plan.set_defaults(func=_plan)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log)
    try:
        return int(args.func(args))
    except (
        ConfigError,
        TaxonomyError,
        SamplerError,
        TaskFormatError,
        RuntimeError,
        ValueError,
    ) as error:
        print(f"tmax: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
