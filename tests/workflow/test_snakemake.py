"""Snakemake itself on a temporary copy of the workflow: dry run, real run, and
reruns that touch exactly the jobs whose inputs or parameters changed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.workflow.rerun_matrix import copy_workflow_files, ran_jobs
from tmax.cli import main as tmax_main
from tmax.taxonomy import read_specs

pytestmark = pytest.mark.slow


def snakemake(
    workdir: Path, *args: str, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        )
    return result


def planned_jobs(workdir: Path, *args: str) -> dict[str, int]:
    """Job counts of a dry run, by rule ({} when there is nothing to do)."""
    result = snakemake(workdir, "-n", *args)
    text = result.stdout + result.stderr
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:", 1)[1]
    jobs = {}
    for name, count in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.MULTILINE):
        if name == "total":
            break
        jobs[name] = int(count)
    return jobs


def edit_config(workdir: Path, edit) -> None:
    path = workdir / "config.yaml"
    config = yaml.safe_load(path.read_text())
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


SMALL = {"n_specs": 30, "shard_size": 10}
SMALL_DECONTAMINATION = {
    # The four fixture tasks stand in for TB2 and TB-Lite, and every generated task's
    # tests/test.sh shares Harbor's reward-writing lines with some of them: boilerplate
    # that four items cannot reveal (real benchmarks have 89-100). Keep every task so
    # training has data; the filter's rules are tested in tests/decontam.
    "remove_rule": "count",
    "remove_threshold": 100000,
}
SMALL_RL = {
    "steps": 2,
    "group_size": 2,
    "prompts_per_step": 2,
    "max_train_tasks": 2,
    "max_turn_tokens": 48,
    "checkpoint_every": 1,
    "sft": {"steps": 3, "learning_rate": 2.0e-3, "batch_size": 2},
}
SMALL_EVALUATION = {
    "variants": ["control", "tmax"],
    "harnesses": ["tmax"],
    "runs": 1,
    "max_tasks": 2,
    "heldout_fraction": 0.2,
    # Local stand-ins for the benchmarks the decontamination stage checks (no network).
    "sources": {
        "terminal-bench-2.0": {"path": str(ROOT / "tests/fixtures/tasks")},
        "tb-lite": {"path": str(ROOT / "tests/fixtures/tasks")},
    },
}
"""The embedded default, shrunk so the whole DAG (validation and an evaluation of the
tiny model through a real `transformers serve`) runs in a minute or two."""


def copy_workflow(workdir: Path, small: bool = True) -> Path:
    copy_workflow_files(workdir)
    if small:
        edit_config(workdir, lambda c: c["sampler"].update(SMALL))
        edit_config(workdir, lambda c: c["evaluation"].update(SMALL_EVALUATION))
        edit_config(workdir, lambda c: c["rl"].update(SMALL_RL))
        edit_config(workdir, lambda c: c["decontamination"].update(SMALL_DECONTAMINATION))
    return workdir


FIRST_RUN = {
    "sample_specs": 3,
    "merge_specs": 1,
    "balance_report": 1,
    "toolbox": 1,
    "base_image": 1,
    "domain_image": 9,
    "generate_tasks": 3,
    "validate_tasks": 3,
    "collect_tasks": 1,
    "decontam_benchmark": 2,
    "decontam_ngram": 2,
    "decontaminate": 1,
    "decontam_filter": 1,
    "tiny_model": 1,
    "sft_warmup": 1,
    "rl_train": 1,
    "sft_control": 1,
    "select_checkpoint": 1,
    "benchmark_tasks": 1,
    "evaluate": 2,
    "eval_metrics": 2,
    "eval_summary": 1,
    "report_tables": 1,
    "report_figures": 1,
    "report_provenance": 1,
    "all": 1,
}
EVALUATION_JOBS = {
    "decontam_ngram": 2,
    "decontaminate": 1,
    "decontam_filter": 1,
    "sft_warmup": 1,
    "rl_train": 1,
    "sft_control": 1,
    "select_checkpoint": 1,
    "benchmark_tasks": 1,
    "evaluate": 2,
    "eval_metrics": 2,
    "eval_summary": 1,
    "report_tables": 1,
    "report_figures": 1,
    "report_provenance": 1,
}
"""What new or changed tasks rerun downstream: the check, training, the held-out set,
the evaluation and the report."""


def copy_run(run: Path, workdir: Path) -> Path:
    """A finished run in a new folder, up to date as it was (mtimes and Snakemake's
    metadata travel with it)."""
    shutil.copytree(run, workdir, symlinks=True)
    return workdir


@pytest.fixture(scope="module")
def workflow(
    small_workflow_run: tuple[Path, dict[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A copy of the workflow that has been run once."""
    run, plan = small_workflow_run
    assert plan == FIRST_RUN
    return copy_run(run, tmp_path_factory.mktemp("workflow") / "run")


def test_run_produces_specs_and_balance(workflow: Path) -> None:
    specs = read_specs(workflow / "results/specs/specs.parquet")
    assert len(specs) == 30
    assert (workflow / "results/specs/balance.md").read_text().startswith("# Spec balance")
    for rule in ("merge_specs", "balance_report"):
        assert (workflow / f"results/logs/{rule}.log").stat().st_size > 0
        assert (workflow / f"results/benchmarks/{rule}.tsv").exists()


def test_workflow_output_equals_the_cli_byte_for_byte(workflow: Path, tmp_path: Path) -> None:
    out = tmp_path / "specs.parquet"
    assert tmax_main(["sample", "--config", str(workflow / "config.yaml"), "--out", str(out)]) == 0
    assert out.read_bytes() == (workflow / "results/specs/specs.parquet").read_bytes()


def test_second_run_has_nothing_to_do(workflow: Path) -> None:
    assert planned_jobs(workflow) == {}


def test_unrelated_edit_reruns_nothing(workflow: Path) -> None:
    with (workflow / "README.md").open("a") as handle:
        handle.write("\nAn unrelated note.\n")
    assert planned_jobs(workflow) == {}


def test_run_produces_validated_tasks(workflow: Path) -> None:
    import pyarrow.parquet as pq

    report = json.loads((workflow / "results/tasks/report.json").read_text())
    assert report["tasks_checked"] == 30
    assert report["tasks_validated"] + report["quarantined"] == 30
    table = pq.read_table(workflow / "results/tasks/tasks.parquet")
    assert table.num_rows == report["tasks_validated"] > 0
    from datasets import load_dataset

    tasks = load_dataset(
        "parquet",
        data_files=str(workflow / "results/tasks/tasks.parquet"),
        cache_dir=str(workflow / "hf-cache"),
    )["train"]
    assert len(tasks) == table.num_rows
    row = tasks[0]
    assert row["instruction"].startswith("I'm ")
    paths = {f["path"] for f in row["files"]}
    assert {"environment/Dockerfile", "tests/test.sh", "solution/solve.sh"} <= paths
    assert len(list((workflow / "results/tasks/shards/00000").glob("spec-*"))) == 10


def test_run_checks_tasks_against_the_benchmarks(workflow: Path) -> None:
    import pyarrow.parquet as pq

    report = json.loads((workflow / "results/decontam/report.json").read_text())
    assert {b: s["status"] for b, s in report["benchmarks"].items()} == {
        "terminal-bench-2.0": "ok", "tb-lite": "ok"
    }  # fmt: skip
    assert [(r["benchmark"], r["n"]) for r in report["summary"]] == [
        ("tb-lite", 13), ("terminal-bench-2.0", 13), ("tb-lite", 8), ("terminal-bench-2.0", 8)
    ]  # fmt: skip
    assert all(outcome["passed"] for outcome in report["self_test"].values())
    removed = json.loads((workflow / "results/decontam/removed.json").read_text())
    clean = pq.read_table(workflow / "results/decontam/clean_tasks.parquet")
    assert clean.num_rows == removed["kept"] == removed["tasks"] - len(removed["removed"])
    assert "| generated |" in (workflow / "results/decontam/report.md").read_text()


def test_run_trains_the_tiny_model(workflow: Path) -> None:
    curve = json.loads((workflow / "results/rl/tiny-qwen3/curve.json").read_text())
    assert curve["steps"] == 2
    assert [m["step"] for m in curve["curve"]] == [1, 2]
    assert (workflow / "results/models/tiny-qwen3-tmax/config.json").exists()
    assert (workflow / "results/models/tiny-qwen3-sft/config.json").exists()
    checkpoints = list((workflow / "results/rl/tiny-qwen3/run/checkpoints").glob("step-*"))
    assert [c.name for c in checkpoints] == ["step-000002"]
    # The control arm: the SFT model trained on for RL's learner tokens.
    control = json.loads((workflow / "results/rl/tiny-qwen3/control_curve.json").read_text())
    budget = sum(m.get("sequence_tokens") or 0 for m in curve["curve"])
    assert control["token_budget"] == budget
    if budget == 0:  # two steps of a random tiny model can both be skipped: nothing to match
        assert control["tokens"] == 0 and control["curve"] == []
    else:
        assert budget <= control["tokens"] < budget + max(c["tokens"] for c in control["curve"])
    assert (workflow / "results/models/tiny-qwen3-control/config.json").exists()


def test_run_evaluates_the_tiny_model_in_harbor_trials(workflow: Path) -> None:
    from tmax.evaluate.records import read_job

    manifest = json.loads((workflow / "results/eval/benchmarks/heldout.json").read_text())
    assert len(manifest["tasks"]) == 2
    run_file = workflow / "results/eval/tiny-qwen3-tmax/heldout/tmax/run0.json"
    run = json.loads(run_file.read_text())
    assert run["n_trials"] == 2 and run["n_infra_failures"] == 0, run
    records = read_job(workflow / run["trials_dir"])
    assert {r.task_name for r in records} == {t["name"] for t in manifest["tasks"]}
    for record in records:
        trial = record.path
        assert (trial / "agent" / "trajectory.json").exists()
        assert record.model == "tiny-qwen3-tmax" and record.harness == "tmax"
        assert record.n_input_tokens and record.n_input_tokens > 0  # the real server answered
    summary = (workflow / "results/eval/summary.md").read_text()
    assert "| tiny-qwen3-tmax | heldout | tmax |" in summary
    server_log = workflow / "results/logs/eval/tiny-qwen3-tmax/heldout/tmax/run0.server.log"
    assert server_log.stat().st_size > 0

    # Rerunning the job (as after a kill: Snakemake deletes a failed job's outputs;
    # --forcerun takes the rule's other job, the control's, along)
    # resumes its trials instead of redoing them.
    first = {r.task_name: json.loads((r.path / "result.json").read_text())["id"] for r in records}
    run_file.unlink()
    assert planned_jobs(workflow, "--forcerun", "evaluate") == {
        "evaluate": 2, "eval_metrics": 2, "eval_summary": 1, "report_tables": 1,
        "report_provenance": 1, "all": 1,
    }  # fmt: skip
    snakemake(workflow, "--forcerun", "evaluate")
    again = read_job(workflow / json.loads(run_file.read_text())["trials_dir"])
    assert {r.task_name: json.loads((r.path / "result.json").read_text())["id"]
            for r in again} == first  # fmt: skip
    assert (
        "already finished: resuming"
        in (workflow / "results/logs/eval/tiny-qwen3-tmax/heldout/tmax/run0.log").read_text()
    )


def test_run_ends_with_the_tables_figures_and_provenance(workflow: Path) -> None:
    report = workflow / "results/report"
    tables = re.sub(r" {2,}", " ", (report / "tables.md").read_text())  # pandas pads cells
    assert "| TMAX tasks generated here | not run | not run | " in tables  # cells not made
    assert "tiny-qwen3-tmax · heldout · tmax" in tables
    assert (report / "tables/cross_size_vs_paper.tex").exists()
    assert (report / "figures/training_curves.pdf").stat().st_size > 0
    provenance = json.loads((report / "provenance.json").read_text())
    assert "results/rl/tiny-qwen3/curve.json" in provenance["inputs"]


def test_a_harness_task_cap_reruns_only_that_harness(workflow: Path) -> None:
    """evaluation.harness_max_tasks reaches only the named harness's jobs; the capped
    jobs run for real (server and sandboxes) on the stable subset, reading back the
    trials they already have, and lifting the cap restores every task."""
    from tmax.evaluate.records import read_job
    from tmax.evaluate.stage import stable_subset

    edit_config(workflow, lambda c: c["evaluation"].update(harness_max_tasks={"terminus-2": 1}))
    assert planned_jobs(workflow) == {}  # terminus-2 is not evaluated here
    edit_config(workflow, lambda c: c["evaluation"].update(harness_max_tasks={"tmax": 1}))
    assert planned_jobs(workflow) == {
        "evaluate": 2, "eval_metrics": 2, "eval_summary": 1, "report_tables": 1,
        "report_provenance": 1, "all": 1,
    }  # fmt: skip
    manifest = json.loads((workflow / "results/eval/benchmarks/heldout.json").read_text())
    [kept] = stable_subset(manifest["tasks"], 1, name=lambda t: t["name"])
    run_file = workflow / "results/eval/tiny-qwen3-tmax/heldout/tmax/run0.json"
    try:
        snakemake(workflow)
        run = json.loads(run_file.read_text())
        assert [t["task"] for t in run["trials"]] == [kept["name"]], run
        # the trial was read back, not played again: the job folder holds one per task
        assert len(read_job(workflow / run["trials_dir"])) == len(manifest["tasks"])
    finally:
        edit_config(workflow, lambda c: c["evaluation"].update(harness_max_tasks={}))
    snakemake(workflow)
    assert json.loads(run_file.read_text())["n_trials"] == 2


def test_a_harness_run_count_adds_only_that_harness_runs(workflow: Path) -> None:
    """evaluation.harness_runs overrides runs for the harness it names: one more run of
    tmax plans that run for each evaluated model and the tables over it, nothing else;
    naming a harness that is not evaluated plans nothing."""
    edit_config(workflow, lambda c: c["evaluation"].update(harness_runs={"openhands": 3}))
    assert planned_jobs(workflow) == {}
    edit_config(workflow, lambda c: c["evaluation"].update(harness_runs={"tmax": 2}))
    try:
        assert planned_jobs(workflow) == {
            "evaluate": 2, "eval_metrics": 2, "eval_summary": 1, "report_tables": 1,
            "report_provenance": 1, "all": 1,
        }  # fmt: skip
    finally:
        edit_config(workflow, lambda c: c["evaluation"].update(harness_runs={}))
    assert planned_jobs(workflow) == {}


def test_growing_the_dataset_reruns_only_the_new_shard(workflow: Path) -> None:
    before = (workflow / "results/specs/shards/00000.parquet").stat().st_mtime_ns
    edit_config(workflow, lambda c: c["sampler"].update(n_specs=35))
    assert planned_jobs(workflow) == {
        "sample_specs": 1,
        "merge_specs": 1,
        "balance_report": 1,
        "generate_tasks": 1,
        "validate_tasks": 1,
        "collect_tasks": 1,
        **EVALUATION_JOBS,
        "all": 1,
    }
    snakemake(workflow)
    assert len(read_specs(workflow / "results/specs/specs.parquet")) == 35
    assert (workflow / "results/specs/shards/00000.parquet").stat().st_mtime_ns == before
    assert planned_jobs(workflow) == {}


def test_changed_sampler_parameter_reruns_sampler_and_dependants(workflow: Path) -> None:
    """Planned, not run (the rerun would repeat the whole pipeline for minutes; what it
    executes is Snakemake's plan, and test_growing_the_dataset_reruns_only_the_new_shard
    runs one): the edit, then its undo, which must leave nothing to do."""
    config = workflow / "config.yaml"
    original = config.read_text()
    edit_config(workflow, lambda c: c["sampler"]["verifier_mix"].update(exact_text=0.9))
    assert planned_jobs(workflow) == {
        "sample_specs": 4,
        "merge_specs": 1,
        "balance_report": 1,
        "generate_tasks": 4,
        "validate_tasks": 4,
        "collect_tasks": 1,
        **EVALUATION_JOBS,
        "all": 1,
    }
    config.write_text(original)
    assert planned_jobs(workflow) == {}


def test_a_rerun_check_that_removes_the_same_tasks_retrains_nothing(workflow: Path) -> None:
    """The decontam_filter checkpoint: the check reruns (its self-test changed), the
    filter writes the same clean set, and the training and evaluation jobs Snakemake
    planned below it drop out once it has; a later plan has nothing to do."""
    clean = workflow / "results/decontam/clean_tasks.parquet"
    trained = workflow / "results/rl/tiny-qwen3/curve.json"
    before = (clean.read_bytes(), trained.stat().st_mtime_ns)
    edit_config(workflow, lambda c: c["decontamination"].update(self_test_leaks=10))
    plan = planned_jobs(workflow)
    assert plan["decontam_ngram"] == 2 and plan["rl_train"] == 1 and plan["evaluate"] == 2
    result = snakemake(workflow)
    ran = ran_jobs(result.stdout + result.stderr)
    assert ran["decontam_ngram"] == 2 and ran["decontam_filter"] == 1, ran
    for rule in ("sft_warmup", "rl_train", "sft_control", "select_checkpoint", "evaluate"):
        assert rule not in ran, ran
    assert (clean.read_bytes(), trained.stat().st_mtime_ns) == before
    assert planned_jobs(workflow) == {}


def test_checkpoint_selection_publishes_the_best_snapshot(workflow: Path) -> None:
    """rl.select_every: a snapshot per step, each evaluated on the selection benchmark,
    and the best (ties: the later) linked in as the trained model."""
    edit_config(workflow, lambda c: c["rl"].update(select_every=1, select_benchmark="heldout"))
    plan = planned_jobs(workflow)
    assert (plan["rl_train"], plan["evaluate_snapshot"], plan["select_checkpoint"]) == (1, 2, 1)
    snakemake(workflow)
    selection = json.loads((workflow / "results/rl/tiny-qwen3/selection.json").read_text())
    assert selection["selected_on"] == {
        "select_benchmark": "heldout", "select_harness": "tmax", "select_runs": 1,
    }  # fmt: skip
    scores = {int(step): entry["score"] for step, entry in selection["snapshots"].items()}
    assert sorted(scores) == [1, 2]
    for step, score in scores.items():
        run = workflow / f"results/rl/tiny-qwen3/selection/step{step}/run0.json"
        document = json.loads(run.read_text())
        assert document["accuracy"] == score and document["model"] == f"tiny-qwen3-tmax-step{step}"
        assert document["benchmark"] == "heldout" and document["harness"] == "tmax"
    chosen = selection["chosen_step"]
    assert chosen == max(scores, key=lambda step: (scores[step], step))
    snapshot = workflow / f"results/rl/tiny-qwen3/snapshots/step-{chosen:06d}"
    model = workflow / "results/models/tiny-qwen3-tmax"
    assert (model / "model.safetensors").stat().st_ino == (
        snapshot / "model.safetensors"
    ).stat().st_ino
    assert planned_jobs(workflow) == {}


def test_editing_the_taxonomy_reruns_sampling(workflow: Path, tmp_path: Path) -> None:
    taxonomy = workflow / "my-taxonomy.yaml"
    shutil.copy(ROOT / "src/tmax/taxonomy/data/taxonomy.yaml", taxonomy)
    edit_config(workflow, lambda c: c.update(taxonomy="my-taxonomy.yaml"))
    assert planned_jobs(workflow)["sample_specs"] == 4


def test_bad_config_stops_before_any_job(workflow: Path) -> None:
    edit_config(workflow, lambda c: c["rl"].update(group_sise=4))
    result = snakemake(workflow, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "unknown key 'group_sise' in 'rl' (did you mean 'group_size'?)" in output
    assert "Traceback" not in output


def test_lint_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_slurm_profile_selects_paper_scale(tmp_path: Path) -> None:
    """`snakemake --profile slurm` resolves from the workflow root and selects the
    paper config with the profile's resources (a dry run needs no Slurm)."""
    workdir = copy_workflow(tmp_path, small=False)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "slurm", "-n"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert re.search(r"^sample_specs\s+146$", text, flags=re.MULTILINE), text  # 14,600 / 100
    sample_job = text.split("rule sample_specs:", 1)[1].split("rule ", 1)[0]
    assert "runtime=10" in sample_job and "mem_mb=2000" in sample_job
    # Training jobs hold their training and inference nodes (2 + 6; 2 + 2 for the small
    # models), and the model is chosen among 5 snapshots (every 100 of 500 steps).
    jobs = {}
    for block in text.split("rule rl_train:")[1:]:
        model = re.search(r"wildcards: model=(\S+)", block)
        nodes = re.search(r"nodes=(\d+), tasks=(\d+)", block)
        assert model and nodes, block[:2000]
        jobs[model.group(1)] = (int(nodes.group(1)), int(nodes.group(2)))
    assert jobs["qwen3.5-9b"] == (8, 8) and jobs["qwen3.6-27b"] == (8, 8)
    assert jobs["qwen3.5-2b"] == (4, 4)
    assert re.search(r"^evaluate_snapshot\s+55$", text, flags=re.MULTILINE)  # 11 models x 5
