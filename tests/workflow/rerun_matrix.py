"""What a change reruns: one row per knob, the jobs Snakemake plans after a finished
run of the embedded default and of the paper config, and the jobs that run when every
checkpoint's product comes out as before.

The finished runs are made with ``snakemake --touch`` on empty placeholder outputs:
touching records what Snakemake's rerun triggers read (each job's params, its set of
inputs and their checksums) without running anything, so the paper's 1,400 jobs are a
finished run in seconds. "Planned" is a dry run against that tree. "Run" is a
``--touch`` of the change on a copy of it: the placeholders keep their content, so
each checkpoint (:data:`CHECKPOINTS`) writes what it wrote before, and the jobs
downstream of it drop out as they do in a real run where the checkpoint's product did
not change. The rerun table of docs/reruns.md is :func:`markdown`
of :data:`ROWS` (``python -m tests.workflow.rerun_matrix`` prints it);
``tests/workflow/test_rerun_matrix.py`` checks every row and that docs/reruns.md holds
the table.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_PATHS = ("Snakefile", "config.yaml", "configs", "rules", "scripts", "envs",
                  "profiles", "slurm", "src", "README.md")  # fmt: skip
CHECKPOINTS = ("decontam_filter", "dataset_filter", "benchmark_tasks", "select_checkpoint")
"""Rules declared as checkpoints: a change that plans one may run less than it plans."""
FILE_SUFFIXES = {".json", ".parquet", ".md", ".csv", ".tex", ".png", ".pdf", ".yaml"}
"""What the workflow's file outputs end in; every other output is a directory."""
EMBEDDED = "embedded"
PAPER = "paper"

_SNAKEMAKE = (
    "import sys; from snakemake.executors import touch; from snakemake.cli import main; "
    "touch.Executor.SLEEPING_TIME = 0.005; sys.exit(main())"
)
"""Snakemake's command line, with ``--touch`` waiting 5 ms instead of 100 ms between
jobs (the wait keeps mtimes in job order on coarse-clock file systems; a touch of the
paper's 1,400 jobs otherwise takes 140 s)."""

Jobs = dict[str, int]
Config = dict[str, Any]


def copy_workflow_files(workdir: Path) -> None:
    """The workflow's files (not results/ or .snakemake/) into ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_PATHS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, workdir / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, workdir / name)


@dataclass(frozen=True)
class Scale:
    """How one config is planned: its file and the Snakemake options that select it."""

    name: str
    config: str
    options: tuple[str, ...]
    base_edit: Callable[[Config], None] | None = None


def _every_plan_fits(config: Config) -> None:
    # Every paper layout fits its memory plan (tests/rl/test_plan.py), so the gate adds
    # no job; planning off spares each dry run the seconds DeepSpeed's import takes.
    config.setdefault("hardware", {})["plan_check"] = False


SCALES = {
    EMBEDDED: Scale(EMBEDDED, "config.yaml", ()),
    PAPER: Scale(PAPER, "configs/paper.yaml", ("--profile", "slurm"), _every_plan_fits),
}


def _model(config: Config, index: int) -> Config:
    return config["models"][index]


def _set(path: str, value: Any) -> Callable[[Config], None]:
    """An edit setting the dotted key ``path`` (``models.0.rl.x``: list items by index)."""

    def edit(config: Config) -> None:
        *parents, last = path.split(".")
        node: Any = config
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[last] = value(node.get(last)) if callable(value) else value

    return edit


@dataclass(frozen=True)
class Row:
    """One change and what it reruns at each scale: ``planned`` by a dry run, and, for
    a change after which the checkpoints it reruns write what they wrote before
    (``same_products``), ``run``: the jobs left once they have."""

    change: str
    why: str
    edit: Callable[[Config], None] | None = None
    files: Mapping[str, Callable[[str], str]] = field(default_factory=dict)
    text: Callable[[Config], str] | None = None
    """How the edited config is written (default: ``yaml.safe_dump``, keys in order)."""
    cli: Callable[[Config], tuple[str, ...]] | None = None
    """Snakemake arguments the change is given by (``--config ...``), from the
    unedited config."""
    same_products: bool = False
    planned: Mapping[str, Jobs] = field(default_factory=dict)
    run: Mapping[str, Jobs] = field(default_factory=dict)


def _one_more_shard(config: Config) -> None:
    sampler = config["sampler"]
    sampler["n_specs"] += sampler["shard_size"]


def _remove_by_count(config: Config) -> None:
    config["decontamination"].update(remove_rule="count", remove_threshold=1)


def _drop_first(key: str) -> Callable[[Config], None]:
    return _set(f"evaluation.{key}", lambda values: values[1:])


def _jobs(*parts: Jobs, **more: int) -> Jobs:
    """Job counts made of named parts (below) and single rules."""
    jobs: Jobs = {}
    for part in (*parts, more):
        jobs.update(part)
    return {rule: count for rule, count in jobs.items() if count}  # 0 takes a rule out


REPORTS = {"eval_summary": 1, "report_tables": 1, "report_figures": 1, "report_provenance": 1}
DECONTAM = {"decontam_ngram": 2, "decontaminate": 1, "decontam_filter": 1}
DATASETS_DECONTAM = {"dataset_decontam_ngram": 16, "dataset_decontam": 8, "dataset_filter": 7}
"""The paper's 8 prior datasets (one job per n, the report) and the 7 trained on."""
# Below the clean generated tasks: the embedded default trains one model (SFT, then
# RL, then the SFT control for RL's tokens) and evaluates its sft, control and tmax
# variants under 4 harnesses, 4 runs under tmax and 2 under the others; the
# paper trains 4 sizes on them (5 snapshots each compared on TB-Lite) and evaluates
# each tmax variant on 4 benchmarks x 4 harnesses x 5 runs.
EMBEDDED_TRAINED = _jobs(REPORTS, sft_warmup=1, rl_train=1, sft_control=1, select_checkpoint=1,
                         evaluate=30, eval_metrics=12)  # fmt: skip
PAPER_TRAINED = _jobs(REPORTS, rl_train=4, evaluate_snapshot=20, select_checkpoint=4,
                      evaluate=320, eval_metrics=64)  # fmt: skip
PAPER_ALL_TRAINED = _jobs(REPORTS, rl_train=11, evaluate_snapshot=55, select_checkpoint=11,
                          evaluate=355, eval_metrics=71)  # fmt: skip
"""Every trained model: the 4 sizes and the 7 prior-dataset ablations (TB-Lite, tmax)."""
TAIL = ("eval_metrics", "eval_summary", "report_tables", "report_figures", "report_provenance")
"""Cheap jobs after the evaluations. Once the checkpoints wrote what they wrote before,
whether these still run depends on the order their inputs finished in: a job
Snakemake does not re-plan keeps the reason it was planned for. "run" leaves them out."""
NOTHING: Jobs = {}


ROWS: list[Row] = [
    Row("`sampler.n_specs` + one shard", "the new shard's tasks join training",
        _one_more_shard,
        planned={
            EMBEDDED: _jobs(DECONTAM, EMBEDDED_TRAINED, sample_specs=1, merge_specs=1,
                            balance_report=1, generate_tasks=1, validate_tasks=1,
                            collect_tasks=1, benchmark_tasks=1),
            PAPER: _jobs(DECONTAM, PAPER_TRAINED, sample_specs=1, merge_specs=1,
                         balance_report=1, generate_tasks=1, validate_tasks=1,
                         collect_tasks=1),
        }),
    Row("`sampler.verifier_mix` reweighted", "every spec is drawn anew",
        _set("sampler.verifier_mix.exact_text", 0.5),
        planned={
            EMBEDDED: _jobs(DECONTAM, EMBEDDED_TRAINED, sample_specs=8, merge_specs=1,
                            balance_report=1, generate_tasks=8, validate_tasks=8,
                            collect_tasks=1, benchmark_tasks=1),
            PAPER: _jobs(DECONTAM, PAPER_TRAINED, sample_specs=146, merge_specs=1,
                         balance_report=1, generate_tasks=146, validate_tasks=146,
                         collect_tasks=1),
        }),
    Row("`generation.llm.temperature` 0.7 → 0.9", "LLM generation's output changes; "
        "the procedural generator ignores it", _set("generation.llm.temperature", 0.9),
        planned={
            EMBEDDED: NOTHING,
            PAPER: _jobs(DECONTAM, PAPER_TRAINED, generate_tasks=146, validate_tasks=146,
                         collect_tasks=1),
        }),
    Row("`generation.llm.max_retries` 5 → 8", "retries of failed requests, not their "
        "answers", _set("generation.llm.max_retries", 8),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("`sandbox.max_concurrency` halved", "how many sandboxes at once",
        _set("sandbox.max_concurrency", lambda n: max(1, n // 2)),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("`sandbox.limits` → off", "read by each sandbox at start (an environment "
        "variable), not a result", _set("sandbox.limits", "off"),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("edit the `security` domain's Dockerfile", "the generated tasks are built on it: "
        "regenerated, revalidated, retrained on; evaluations of published benchmarks, "
        "whose tasks build their own images, are kept",
        files={"src/tmax/sandbox/definitions/security/Dockerfile":
               lambda text: text + "\n# edited\n"},
        planned={
            EMBEDDED: _jobs(DECONTAM, EMBEDDED_TRAINED, domain_image=1, generate_tasks=8,
                            validate_tasks=8, collect_tasks=1, benchmark_tasks=1),
            PAPER: _jobs(DECONTAM, PAPER_TRAINED, domain_image=1, generate_tasks=146,
                         validate_tasks=146, collect_tasks=1),
        }),
    Row("edit `src/tmax/generate/validate.py`", "every shard is revalidated (the "
        "validator's fingerprint is a param); the same tasks pass",
        files={"src/tmax/generate/validate.py": lambda text: text + "\n# edited\n"},
        same_products=True,
        planned={
            EMBEDDED: _jobs(DECONTAM, EMBEDDED_TRAINED, validate_tasks=8, collect_tasks=1,
                            benchmark_tasks=1),
            PAPER: _jobs(DECONTAM, PAPER_TRAINED, validate_tasks=146, collect_tasks=1),
        },
        run={
            EMBEDDED: _jobs(DECONTAM, validate_tasks=8, collect_tasks=1, benchmark_tasks=1),
            PAPER: _jobs(DECONTAM, validate_tasks=146, collect_tasks=1),
        }),
    Row("`decontamination.ngram_sizes` [13, 8] → [13]", "8-grams are only reported; "
        "removal reads `remove_ngram` (13)", _set("decontamination.ngram_sizes", [13]),
        planned={
            EMBEDDED: _jobs(REPORTS, decontaminate=1, eval_summary=0),
            PAPER: _jobs(REPORTS, decontaminate=1, dataset_decontam=8, eval_summary=0),
        }),
    Row("`decontamination.self_test_leaks` 20 → 10", "the check reruns; the removed "
        "tasks come out the same", _set("decontamination.self_test_leaks", 10),
        same_products=True,
        planned={
            EMBEDDED: _jobs(DECONTAM, EMBEDDED_TRAINED),
            PAPER: _jobs(DECONTAM, DATASETS_DECONTAM, PAPER_ALL_TRAINED),
        },
        run={
            EMBEDDED: DECONTAM,
            PAPER: _jobs(DECONTAM, DATASETS_DECONTAM),
        }),
    Row("`decontamination.remove_rule` any → count ≥ 1", "the filter reruns and keeps "
        "the same tasks: training follows only if the clean set changed",
        _remove_by_count, same_products=True,
        planned={
            EMBEDDED: _jobs(EMBEDDED_TRAINED, decontam_filter=1),
            PAPER: _jobs(PAPER_ALL_TRAINED, decontam_filter=1, dataset_filter=7),
        },
        run={
            EMBEDDED: {"decontam_filter": 1},
            PAPER: {"decontam_filter": 1, "dataset_filter": 7},
        }),
    Row("`rl.learning_rate` × 2", "every trained model changes",
        _set("rl.learning_rate", lambda lr: lr * 2),
        planned={
            EMBEDDED: _jobs(REPORTS, rl_train=1, sft_control=1, select_checkpoint=1,
                            evaluate=20, eval_metrics=8),
            PAPER: PAPER_ALL_TRAINED,
        }),
    Row("`rl.select_runs` + 1", "one more comparison run per snapshot; the models' "
        "evaluations follow only if another snapshot wins (the embedded default keeps "
        "the last step)", _set("rl.select_runs", lambda n: (n or 1) + 1), same_products=True,
        planned={
            EMBEDDED: NOTHING,
            PAPER: _jobs(PAPER_ALL_TRAINED, rl_train=0),
        },
        run={
            EMBEDDED: NOTHING,
            PAPER: {"evaluate_snapshot": 55, "select_checkpoint": 11},
        }),
    Row("`rl.step_timeout_sec` 6 h → 12 h", "how long ranks wait, not what they "
        "learn", _set("rl.step_timeout_sec", 43200),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("`rl.groups_in_flight` + 1", "concurrency of rollouts",
        _set("rl.groups_in_flight", lambda n: n + 1),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("`rl.checkpoint_every` halved", "when a resumable checkpoint is written",
        _set("rl.checkpoint_every", lambda n: max(1, n // 2)),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("first model's own `rl.learning_rate`", "that model's training and what "
        "evaluates it, not its base model's evaluations",
        _set("models.0.rl", lambda rl: {**(rl or {}), "learning_rate": 3e-6}),
        planned={
            EMBEDDED: _jobs(REPORTS, rl_train=1, sft_control=1, select_checkpoint=1,
                            evaluate=20, eval_metrics=8),
            PAPER: _jobs(REPORTS, rl_train=1, evaluate_snapshot=5, select_checkpoint=1,
                         evaluate=80, eval_metrics=16),
        }),
    Row("`evaluation.runs` + 1", "one more run per setting (the embedded default gives "
        "the harnesses other than tmax runs of their own: `evaluation.harness_runs`)",
        _set("evaluation.runs", lambda n: n + 1),
        planned={
            EMBEDDED: _jobs(REPORTS, evaluate=3, eval_metrics=3, report_figures=0),
            PAPER: _jobs(REPORTS, evaluate=135, eval_metrics=135, report_figures=0),
        }),
    Row("drop the first harness", "the others' runs are kept; tables only",
        _drop_first("harnesses"),
        planned={
            EMBEDDED: _jobs(REPORTS, report_figures=0),
            PAPER: _jobs(REPORTS, report_figures=0),
        }),
    Row("drop the first variant", "the others' runs are kept; tables only",
        _drop_first("variants"),
        planned={
            EMBEDDED: _jobs(REPORTS, report_figures=0),
            PAPER: _jobs(REPORTS, report_figures=0),
        }),
    Row("`evaluation.max_turn_tokens` halved", "a budget: every evaluation run, and the "
        "snapshot comparisons and dataset difficulty that use it",
        _set("evaluation.max_turn_tokens", lambda n: n // 2),
        planned={
            EMBEDDED: _jobs(REPORTS, evaluate=30, eval_metrics=12, report_figures=0),
            PAPER: _jobs(REPORTS, dataset_difficulty=8, evaluate_snapshot=55,
                         select_checkpoint=11, evaluate=675, eval_metrics=135),
        }),
    Row("`labelling.concurrency` → 8", "requests in flight, not their answers",
        _set("labelling.concurrency", 8),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("`evaluation.concurrency` → 2", "trials at once, not their results",
        _set("evaluation.concurrency", 2),
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("`report.statistics` → exclude_infra", "how runs are summarised: every metrics "
        "file and table, no evaluation", _set("report.statistics", "exclude_infra"),
        planned={
            EMBEDDED: _jobs(REPORTS, eval_metrics=12, report_figures=0),
            PAPER: _jobs(REPORTS, eval_metrics=135, report_figures=0),
        }),
    Row("`evaluation.network` harbor → task", "what the sandboxes of every evaluation "
        "may reach; training keeps its own rule", _set("evaluation.network", "task"),
        planned={
            EMBEDDED: _jobs(REPORTS, evaluate=30, eval_metrics=12, report_figures=0),
            PAPER: _jobs(REPORTS, dataset_difficulty=0, evaluate_snapshot=55,
                         select_checkpoint=11, evaluate=675, eval_metrics=135),
        }),
    Row("`report.formats` without tex", "a report choice",
        _set("report.formats", ["md", "csv"]),
        planned={
            EMBEDDED: {"report_tables": 1, "report_provenance": 1},
            PAPER: {"report_tables": 1, "report_provenance": 1},
        }),
    Row("Slurm profile: `rl_train` runtime 3 → 4 days", "a resource, not a rerun "
        "trigger", files={"slurm/config.yaml": lambda text: text.replace(
            '"4320 * attempt"', '"5760 * attempt"')},
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
    Row("edit README.md", "no job reads it", files={"README.md": lambda t: t + "\n"},
        planned={EMBEDDED: NOTHING, PAPER: NOTHING}),
]  # fmt: skip
"""One per knob; the expected jobs come from the rules' params and inputs, and each
is argued in its ``why``."""


def reordered(value: Any) -> Any:
    """Every mapping's keys in reverse order, at every level."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def _dump(value: Any, **options: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, **options)


class _QuotedDumper(yaml.SafeDumper):
    """Writes every string double-quoted (the config's numbers and booleans stay bare)."""


_QuotedDumper.add_representer(
    str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')
)


def _renumbered(value: Any) -> Any:
    """Every number spelled another way: floats in scientific notation, which YAML 1.1
    reads as a string (``1e-4``), whole numbers as floats (``30.0``)."""
    if isinstance(value, dict):
        return {key: _renumbered(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_renumbered(item) for item in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return float(value)
    return format(Decimal(repr(value)), "e")  # 0.0825 → 8.25e-2, exactly


def _defaults_written_out(config: Config) -> str:
    from tmax.config import validate_config

    return _dump(validate_config(config))


def _config_options(config: Config) -> tuple[str, ...]:
    """``--config`` for the rl and evaluation sections, given as the file gives them."""
    return ("--config", *(f"{key}={json.dumps(config[key])}" for key in ("rl", "evaluation")))


def _without(*keys: str) -> Callable[[Config], None]:
    def edit(config: Config) -> None:
        for key in keys:
            config.pop(key)

    return edit


def _in_order(config: Config) -> str:
    return _dump(config)


def _lr_doubled(config: Config) -> None:
    config["rl"]["learning_rate"] = format(Decimal(repr(config["rl"]["learning_rate"] * 2)), "e")


SAME = {EMBEDDED: NOTHING, PAPER: NOTHING}
SPELLINGS: list[Row] = [
    Row("keys sorted at every level (`yaml.safe_dump`)", "the same values",
        text=lambda config: yaml.safe_dump(config), planned=SAME),
    Row("keys in reverse order at every level", "the same values",
        text=lambda config: _dump(reordered(config)), planned=SAME),
    Row("numbers respelled (`1e-4`, `30.0`)", "the same values",
        text=lambda config: _dump(_renumbered(config)), planned=SAME),
    Row("flow style, every string quoted", "the same values",
        text=lambda config: yaml.dump(config, Dumper=_QuotedDumper, sort_keys=False,
                                      default_flow_style=True, width=100), planned=SAME),
    Row("every default written out", "the values the schema fills in",
        text=_defaults_written_out, planned=SAME),
    Row("`rl` and `evaluation` given by `--config`", "the same values, from the command "
        "line", _without("rl", "evaluation"), cli=_config_options, planned=SAME),
    Row("keys sorted, `rl.learning_rate` × 2 as `2e-4`", "a real change, spelled "
        "otherwise: what the learning rate reruns", _lr_doubled,
        text=lambda config: yaml.safe_dump(config),
        planned={
            EMBEDDED: _jobs(REPORTS, rl_train=1, sft_control=1, select_checkpoint=1,
                            evaluate=20, eval_metrics=8),
            PAPER: PAPER_ALL_TRAINED,
        }),
]  # fmt: skip
"""Other spellings of the same config: each plans nothing, and a real change spelled
otherwise plans what it touches (docs/reruns.md, "Spellings")."""


def plan_jobs(text: str) -> Jobs:
    """Job counts by rule from Snakemake's "Job stats" table ({}: nothing to do);
    ``all`` is left out (it runs whenever anything does)."""
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:", 1)[1]
    jobs: Jobs = {}
    for name, count in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.MULTILINE):
        if name == "total":
            break
        jobs[name] = int(count)
    jobs.pop("all", None)
    return jobs


def ran_jobs(text: str) -> Jobs:
    """Job counts by rule of what a run (or ``--touch``) finished, from its log."""
    counts = Counter(re.findall(r"^Finished jobid: \d+ \(Rule: (\w+)\)", text, re.MULTILINE))
    counts.pop("all", None)
    return dict(counts)


class Tree:
    """A copy of the workflow with a finished (touched) run of one scale's config."""

    def __init__(self, root: Path, scale: Scale) -> None:
        self.root = root
        self.scale = scale

    @classmethod
    def build(cls, root: Path, scale: Scale) -> Tree:
        copy_workflow_files(root)
        tree = cls(root, scale)
        tree.write_config(tree.base_config())
        for path in tree.planned_outputs():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.suffix in FILE_SUFFIXES:
                target.write_bytes(b"")
            else:  # directory() outputs: models, snapshots, task shards (qwen3.5-9b-sft)
                target.mkdir()
        # Every job, in the DAG's order: each records its metadata (a job without any is
        # never rerun for a changed param).
        tree.snakemake("--touch", "--forceall")
        leftover = tree.plan()
        if leftover:
            raise AssertionError(f"the touched {scale.name} run is not finished: {leftover}")
        return tree

    def base_config(self) -> Config:
        config = yaml.safe_load((ROOT / self.scale.config).read_text())
        if self.scale.base_edit:
            self.scale.base_edit(config)
        return config

    @property
    def config_path(self) -> Path:
        return self.root / "matrix-config.yaml"

    def write_config(self, config: Config) -> None:
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def snakemake(self, *args: str, options: tuple[str, ...] | None = None) -> str:
        command = [sys.executable, "-c", _SNAKEMAKE, "--cores", "2",
                   *(self.scale.options if options is None else options),
                   "--configfile", str(self.config_path), *args]  # fmt: skip
        result = subprocess.run(command, cwd=self.root, capture_output=True, text=True,
                                timeout=900)  # fmt: skip
        text = result.stdout + result.stderr
        if result.returncode != 0:
            raise AssertionError(f"snakemake {' '.join(args)} failed in {self.root}:\n{text}")
        return text

    def planned_outputs(self) -> list[str]:
        text = self.snakemake("-n")
        if "Nothing to be done" in text:
            return []
        outputs = []
        for line in re.findall(r"^\s+output: (.+)$", text, flags=re.MULTILINE):
            outputs += [p.strip() for p in line.split(",")]
        return sorted(set(outputs))

    def plan(self, options: tuple[str, ...] | None = None, cli: tuple[str, ...] = ()) -> Jobs:
        return plan_jobs(self.snakemake("-n", *cli, options=options))

    def copy(self, root: Path) -> Tree:
        shutil.copytree(self.root, root, symlinks=True)
        return Tree(root, self.scale)

    def apply(self, row: Row) -> tuple[str, ...] | None:
        """Apply ``row`` (config and file edits); the Snakemake options to plan it (an
        edited Slurm profile is planned through it, at either scale)."""
        config = self.base_config()
        if row.edit:
            row.edit(config)
        if row.text is None:
            self.write_config(config)
        else:
            self.config_path.write_text(row.text(config))
        options = None
        for path, edit in row.files.items():
            target = self.root / path
            target.write_text(edit(target.read_text()))
            if path.startswith("slurm/"):
                options = ("--profile", "slurm")
        return options


def measure(tree: Tree, row: Row, scratch: Path) -> tuple[Jobs, Jobs]:
    """(planned, run) of ``row`` on a copy of ``tree`` in ``scratch`` (removed after):
    run is what a ``--touch`` of the change runs, :data:`TAIL` left out, for a row
    whose checkpoints write what they wrote before (else what is planned)."""
    copy = tree.copy(scratch)
    try:
        cli = row.cli(copy.base_config()) if row.cli else ()
        options = copy.apply(row)
        planned = copy.plan(options, cli)
        ran = planned
        if row.same_products and any(rule in planned for rule in CHECKPOINTS):
            ran = ran_jobs(copy.snakemake("--touch", *cli, options=options))
            ran = {rule: count for rule, count in ran.items() if rule not in TAIL}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return planned, ran


def measure_all(
    tree: Tree, scratch: Path, workers: int = 2, rows: list[Row] | None = None
) -> dict[str, tuple[Jobs, Jobs]]:
    """:func:`measure` of every row (of :data:`ROWS` and :data:`SPELLINGS` unless
    ``rows`` are given), ``workers`` at once (each is a Snakemake process)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        futures = {
            row.change: pool.submit(measure, tree, row, scratch / f"row{i}")
            for i, row in enumerate(ROWS + SPELLINGS if rows is None else rows)
        }
        return {change: future.result() for change, future in futures.items()}


PIPELINE = (
    "sample_specs", "merge_specs", "balance_report", "domain_image", "generate_tasks",
    "validate_tasks",
    "collect_tasks", "decontam_ngram", "decontaminate", "decontam_filter",
    "dataset_decontam_ngram", "dataset_decontam", "dataset_filter", "dataset_difficulty",
    "benchmark_tasks", "sft_warmup", "rl_train", "sft_control", "evaluate_snapshot",
    "select_checkpoint",
    "evaluate", "eval_metrics", "eval_summary", "report_tables", "report_figures",
    "report_provenance",
)  # fmt: skip
"""The order docs/reruns.md lists a change's jobs in (others last, by name)."""


def _jobs_cell(jobs: Jobs) -> str:
    if not jobs:
        return "nothing"
    order = sorted(jobs, key=lambda r: (PIPELINE.index(r) if r in PIPELINE else 99, r))
    return ", ".join(f"{rule} ×{jobs[rule]}" if jobs[rule] > 1 else rule for rule in order)


def markdown(rows: list[Row] | None = None) -> str:
    """The rerun table of docs/reruns.md."""
    lines = [
        "| change | embedded default | paper scale (`--profile slurm`) | why |",
        "|---|---|---|---|",
    ]
    for row in rows or ROWS:
        cells = []
        for scale in (EMBEDDED, PAPER):
            if scale not in row.planned:
                cells.append("n/a")
                continue
            planned = row.planned[scale]
            cell = _jobs_cell(planned)
            if scale in row.run:
                cell += f"; **runs** {_jobs_cell(row.run[scale])} (+ reports)"
            cells.append(cell)
        lines.append(f"| {row.change} | {cells[0]} | {cells[1]} | {row.why} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
    print("\nspellings:\n")
    print(markdown(SPELLINGS), end="")
