"""`snakemake --profile slurm` on a real Slurm cluster (slurmctld and three slurmd nodes on
localhost): every job is an sbatch job, training runs as srun-launched ranks, a
cancelled job is retried with more memory and resumes from its checkpoint, a changed
parameter resubmits only what depends on it, and a training job of three nodes runs
its ranks on two and a vLLM engine server on the third.

The profile is the project's ``slurm/config.yaml`` with only what this machine cannot
give cut down (:func:`tests.slurm.cluster.fit_profile`); the workflow is the shrunk
embedded default of tests/workflow with a second model size.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT
from tests.rl.processes import processes_naming, running, server_processes
from tests.slurm.cluster import LocalSlurm, fit_profile, missing_requirements
from tests.workflow.test_snakemake import copy_workflow, edit_config, planned_jobs, snakemake
from tmax.rl.engines.remote import address_file
from tmax.sandbox.base import LABEL
from tmax.sandbox.storage import sandbox_root

pytestmark = pytest.mark.slow

PROFILE = "slurm-local"
MODELS = [
    {"name": "tiny-qwen3", "path": "tiny-qwen3"},
    {"name": "tiny-qwen3-b", "path": "tiny-qwen3"},
]
"""Two model sizes (the same tiny model twice): a change to one must leave the other."""
RUN_TIMEOUT_S = 1500
LOCAL_RULES = ("all", "select_checkpoint")
"""Rules that never reach Slurm (``localrule: True``)."""
NODES = 3
"""Three nodes on this host: two training ranks and an engine server each get one."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    reason = missing_requirements()
    if reason:
        pytest.skip(reason)
    with LocalSlurm(tmp_path_factory.mktemp("slurm"), nodes=NODES, cpus=4) as running:
        yield running


def on_slurm(workdir: Path, *args: str) -> str:
    result = snakemake(workdir, "--profile", PROFILE, *args, timeout=RUN_TIMEOUT_S)
    return result.stdout + result.stderr


def slurm_jobs(cluster: LocalSlurm) -> list[dict[str, str]]:
    """Every job the controller remembers (MinJobAge keeps finished ones for 10 min)."""
    result = subprocess.run(
        ["squeue", "--states=all", "-h", "-o", "%i|%k|%m|%T"],
        capture_output=True,
        text=True,
        check=True,
        env=cluster.env(),
    )
    jobs = []
    for line in result.stdout.splitlines():
        job_id, comment, memory, state = line.split("|")
        jobs.append({"id": job_id, "comment": comment, "memory": memory, "state": state})
    return sorted(jobs, key=lambda job: int(job["id"]))


def attempt_logs(workdir: Path, rule: str, jobs: list[dict[str, str]], lines: int = 40) -> str:
    """The end of each job's Slurm log (``rule`` as in results/logs/slurm/rule_<rule>)."""
    parts = [f"attempts: {jobs}"]
    for job in jobs:
        path = workdir / "results/logs/slurm" / f"rule_{rule}" / f"{job['id']}.log"
        text = path.read_text(errors="replace") if path.exists() else "(no log)"
        parts.append(f"--- {path}\n" + "\n".join(text.splitlines()[-lines:]))
    return "\n".join(parts)


def job_logs(workdir: Path) -> dict[str, int]:
    """Slurm job logs the plugin kept, counted by rule (group jobs by group name)."""
    counts: dict[str, int] = {}
    for log in (workdir / "results/logs/slurm").rglob("*.log"):
        top = log.relative_to(workdir / "results/logs/slurm").parts[0]
        name = top.removeprefix("rule_").removeprefix("group_")
        counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.fixture(scope="module")
def slurm_workflow(
    cluster: LocalSlurm, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, int]]:
    """The workflow run once through the slurm profile: (its folder, the planned jobs)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm-workflow"))

    def two_sizes_two_ranks(config: dict) -> None:
        config.update(models=MODELS)
        config["rl"]["ranks_per_node"] = 2  # a job of 2 tasks on 1 node: 2 ranks
        # The RL models only: the local small run covers the SFT control's jobs.
        config["evaluation"]["variants"] = ["tmax"]

    edit_config(workdir, two_sizes_two_ranks)
    profile = yaml.safe_load((ROOT / "slurm/config.yaml").read_text())
    fitted = fit_profile(profile, configfile=str(workdir / "config.yaml"))
    (workdir / PROFILE).mkdir()
    (workdir / PROFILE / "config.yaml").write_text(yaml.safe_dump(fitted, sort_keys=False))
    plan = planned_jobs(workdir, "--profile", PROFILE)
    on_slurm(workdir)
    return workdir, plan


def test_every_job_is_submitted_to_slurm(slurm_workflow: tuple[Path, dict[str, int]]) -> None:
    workdir, plan = slurm_workflow
    submitted = job_logs(workdir)
    # The profile groups sample_specs shards into one job ("sampling"); local rules run
    # in Snakemake's own process.
    expected = {rule: n for rule, n in plan.items() if rule not in (*LOCAL_RULES, "sample_specs")}
    expected["sampling_sample_specs"] = 1
    assert submitted == expected
    assert plan["rl_train"] == 2 and plan["evaluate"] == 2


def _table(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_outputs_equal_a_local_run(
    slurm_workflow: tuple[Path, dict[str, int]],
    small_workflow_run: tuple[Path, dict[str, int]],
) -> None:
    """The data side is deterministic: specs, tasks, checks and reports are the local
    run's exactly; the trained models exist with the same files."""
    workdir, _ = slurm_workflow
    local, _ = small_workflow_run
    for table in ("specs/specs.parquet", "tasks/tasks.parquet", "decontam/clean_tasks.parquet"):
        assert _table(workdir / "results" / table) == _table(local / "results" / table), table
    for report in ("specs/balance.json", "tasks/report.json", "decontam/report.json",
                   "decontam/removed.json", "eval/benchmarks/heldout.json"):  # fmt: skip
        mine = json.loads((workdir / "results" / report).read_text())
        theirs = json.loads((local / "results" / report).read_text())
        if report.startswith("eval/benchmarks"):  # names the folder it read: ours differ
            mine.pop("source"), theirs.pop("source")
        assert mine == theirs, report
    for model in ("tiny-qwen3", "tiny-qwen3-sft", "tiny-qwen3-tmax", "tiny-qwen3-b-tmax"):
        files = {p.name for p in (workdir / "results/models" / model).iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= files, model
    tables = (workdir / "results/report/tables.md").read_text()
    assert "tiny-qwen3-tmax" in tables and "tiny-qwen3-b-tmax" in tables


def test_training_runs_as_srun_ranks_across_the_allocation(
    slurm_workflow: tuple[Path, dict[str, int]],
) -> None:
    workdir, _ = slurm_workflow
    for model in ("tiny-qwen3", "tiny-qwen3-b"):
        run = workdir / "results/rl" / model / "run"
        launcher = (workdir / "results/logs/rl" / model / "train.log").read_text()
        assert "starting 2 training rank(s) on 1 node(s): srun" in launcher
        for rank in (0, 1):
            log = (run / "logs" / f"rank{rank}.log").read_text()
            assert f"joined gloo process group: rank {rank} of 2" in log and "(slurm on" in log
        # Both ranks wrote their ZeRO-3 shards into each checkpoint.
        shards = list((run / "checkpoints/step-000002/learner").rglob("*zero_pp_rank_*"))
        assert {p.name.split("zero_pp_rank_")[1][0] for p in shards} == {"0", "1"}
        curve = json.loads((workdir / "results/rl" / model / "curve.json").read_text())
        assert curve["steps"] == 2


def test_changed_rl_parameter_resubmits_only_that_size(
    slurm_workflow: tuple[Path, dict[str, int]],
) -> None:
    workdir, _ = slurm_workflow
    untouched = workdir / "results/models/tiny-qwen3-tmax/model.safetensors"
    before = untouched.stat().st_mtime_ns
    logs_before = job_logs(workdir)
    chosen = workdir / "results/rl/tiny-qwen3-b/model.json"  # the trained weights' sha256
    weights_before = chosen.read_text()

    def faster_b(config: dict) -> None:
        config["models"][1]["rl"] = {"learning_rate": 5.0e-4}

    edit_config(workdir, faster_b)
    plan = planned_jobs(workdir, "--profile", PROFILE)
    assert plan == {
        "rl_train": 1,
        "select_checkpoint": 1,
        "evaluate": 1,
        "eval_metrics": 1,
        "eval_summary": 1,
        "report_tables": 1,
        "report_figures": 1,
        "report_provenance": 1,
        "all": 1,
    }
    on_slurm(workdir)
    # The one new training job is the changed size's (its second log there).
    assert len(list((workdir / "results/logs/slurm/rule_rl_train/tiny-qwen3-b").glob("*.log"))) == 2
    new = {r: n - logs_before.get(r, 0) for r, n in job_logs(workdir).items()}
    expected = {r: n for r, n in plan.items() if r not in LOCAL_RULES}
    if chosen.read_text() == weights_before:
        # A few steps of a random tiny model can leave its weights as they were (every
        # group's reward the same: no gradient); the same weights keep their evaluation.
        del expected["evaluate"]
    assert {r: n for r, n in new.items() if n} == expected
    assert untouched.stat().st_mtime_ns == before
    assert planned_jobs(workdir, "--profile", PROFILE) == {}


def test_cancelled_training_is_retried_with_more_memory_and_resumes(
    slurm_workflow: tuple[Path, dict[str, int]], cluster: LocalSlurm
) -> None:
    """scancel in the middle of training (as a preemption would): no half-written model
    appears, Snakemake resubmits the job with twice the memory, and the new attempt
    continues from the last checkpoint instead of step 0."""
    workdir, _ = slurm_workflow
    run = workdir / "results/rl/tiny-qwen3/run"
    output = workdir / "results/rl/tiny-qwen3/snapshots"
    # Two more steps for this size only: a resumable setting, so training continues
    # from step 2.
    edit_config(workdir, lambda c: c["models"][0].update(rl={"steps": 4}))
    process = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--profile", PROFILE, "--until", "rl_train"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not (run / "checkpoints/step-000003").exists():
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "training never reached step 3"
            time.sleep(0.5)
        running = [
            job
            for job in slurm_jobs(cluster)
            if job["comment"] == "rule_rl_train_wildcards_tiny-qwen3" and job["state"] == "RUNNING"
        ]
        assert len(running) == 1, slurm_jobs(cluster)
        subprocess.run(["scancel", running[0]["id"]], check=True, env=cluster.env())
        assert not output.exists()  # removed before the job started, written only at the end
        log, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, log[-6000:]
    attempts = [
        job for job in slurm_jobs(cluster) if job["comment"] == "rule_rl_train_wildcards_tiny-qwen3"
    ]
    cancelled, retried = attempts[-2:]
    # One retry: a resumed attempt that fails (its ranks' rendezvous, their exit) would
    # show as another attempt after it; its Slurm log says why.
    later = [job for job in attempts if int(job["id"]) > int(running[0]["id"])]
    assert len(later) == 1, attempt_logs(workdir, "rl_train/tiny-qwen3", later)
    assert cancelled["id"] == running[0]["id"] and cancelled["state"] == "CANCELLED"
    assert (cancelled["memory"], retried["memory"]) == ("1000M", "2000M")
    assert retried["state"] == "COMPLETED"
    resumed = (run / "logs/rank0.log").read_text()
    assert "resumed from" in resumed and ("(step 3)" in resumed or "(step 4)" in resumed)
    curve = json.loads((workdir / "results/rl/tiny-qwen3/curve.json").read_text())
    assert [entry["step"] for entry in curve["curve"]] == [1, 2, 3, 4]
    assert (output / "step-000004/model.safetensors").exists()


class Faults(threading.Thread):
    """Faults injected from outside a running training job, each once: SIGKILL to the
    first sandbox the run opens (its bwrap, so everything in it dies mid-episode), and
    to engine server 1's vLLM as soon as the first weight push is logged (so it dies
    between pushes, while the next step's turns are being sampled)."""

    def __init__(self, run: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.started = run, time.time()
        self.done = threading.Event()
        self.sandbox: str | None = None
        self.engine: int | None = None

    def run(self) -> None:
        while not self.done.wait(0.2):
            if self.sandbox is None:
                self._kill_a_sandbox()
            if self.engine is None:
                self._kill_engine_server_1()

    def _kill_a_sandbox(self) -> None:
        for marker in sandbox_root().glob("*/sandbox.json"):
            try:
                born = marker.stat().st_mtime
                owner = json.loads(marker.read_text()).get(LABEL, "")
            except (OSError, json.JSONDecodeError):
                continue
            if born < self.started or time.time() - born < 1.0 or not self._ours(owner):
                continue  # another run's, or not up long enough to be mid-episode
            bwrap = {pid for pid in processes_naming(str(marker.parent / "merged"))
                     if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap"}  # fmt: skip
            for pid in bwrap:
                os.kill(pid, signal.SIGKILL)
            if bwrap:
                self.sandbox = marker.parent.name
                return

    def _ours(self, owner: str) -> bool:
        """A sandbox of this workflow's training (its owner ``rl-<pid>`` works in the
        workflow's folder), never one of another run on the same machine."""
        pid = owner.removeprefix("rl-")
        if pid == owner or not pid.isdigit():
            return False
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            return False
        return cwd.is_relative_to(self.folder.parents[3])

    def _kill_engine_server_1(self) -> None:
        rank0 = self.folder / "logs/rank0.log"
        if "pushed policy version 1 to 2 engine server(s)" not in (
            rank0.read_text() if rank0.exists() else ""
        ):
            return
        supervisor = json.loads(address_file(self.folder / "engines", 1).read_text())["pid"]
        api, _ = server_processes(supervisor)
        for pid in api:
            os.kill(pid, signal.SIGKILL)
        self.engine = supervisor


def test_engine_servers_run_on_their_own_node(
    slurm_workflow: tuple[Path, dict[str, int]],
) -> None:
    """The paper's layout in small: a training job of 3 nodes, ranks on the first two, two
    real vLLM servers on the third that sample every rollout and are sent the weights
    after each step through vLLM's weight-transfer API (our gloo backend), then stop.

    With faults injected on the way (:class:`Faults`): a sandbox killed mid-episode
    (the episode is played again) and one engine server killed (its share goes to the
    other, the weight group forms again without it); the job still succeeds at its
    first attempt."""
    workdir, _ = slurm_workflow

    def split(config: dict) -> None:
        own = config["models"][1].setdefault("rl", {})
        # Every step trains and pushes (the filter would skip steps whose groups all
        # scored alike, which the tiny model's often do); the two ranks split each
        # episode (a sequence group of 2) of packed micro-batches, as configs/paper.yaml.
        own.update(training_nodes=2, ranks_per_node=1, inference_nodes=1, engine="vllm",
                   engines_per_node=2, engine_dtype="float32", zero_std_filter=False,
                   sequence_parallel_size=2, packing=True)  # fmt: skip

    edit_config(workdir, split)
    attempts = workdir / "results/logs/slurm/rule_rl_train/tiny-qwen3-b"
    before = len(list(attempts.glob("*.log")))
    model, run = "tiny-qwen3-b", workdir / "results/rl/tiny-qwen3-b/run"
    faults = Faults(run)
    faults.start()
    try:
        log = on_slurm(workdir, "--until", "rl_train")
    finally:
        faults.done.set()
        faults.join()
    assert "rl_train" in log
    # One attempt: servers that exit when told to never fail the job (no retry).
    assert len(list(attempts.glob("*.log"))) == before + 1, log[-4000:]
    launcher = (workdir / "results/logs/rl" / model / "train.log").read_text()
    assert "starting 2 engine server(s) on 1 node(s): srun --nodes=1 --ntasks=2" in launcher
    assert "--relative=2" in launcher
    assert "starting 2 training rank(s) on 2 node(s)" in launcher
    for rank, node in ((0, "tmax1"), (1, "tmax2")):
        text = (run / "logs" / f"rank{rank}.log").read_text()
        assert f"rank {rank} of 2 (local 0)" in text and f"(slurm on {node})" in text
        assert f"sequence group of 2 (rank {rank} in it)" in text
        assert "micro-batches packed" in text
    for index in (0, 1):
        supervisor = (run / f"logs/engine{index}.log").read_text()
        assert re.search(rf"engine server {index} ready at http://\S+ on node tmax3", supervisor)
    vllm = (run / "engines/vllm0.log").read_text()
    assert "vllm.entrypoints" in supervisor and "Resolved architecture" in vllm
    # Server 0 joins the first weight group of three, then the one without server 1.
    assert "joined the trainer's weight group as rank 1 of 3 (tmax_gloo)" in vllm
    assert "joined the trainer's weight group as rank 1 of 2 (tmax_gloo)" in vllm
    served = vllm.count('"POST /v1/completions HTTP/1.1" 200')
    assert served > 1, vllm[-3000:]
    rank0 = (run / "logs/rank0.log").read_text()
    assert "vLLM engine: 2 server(s)" in rank0
    # The sandbox killed mid-episode: that episode is played again, the run goes on.
    assert faults.sandbox is not None, "no sandbox of the run was seen to kill"
    replayed = [line for line in rank0.splitlines() if "playing it again" in line]
    assert any("SandboxDied" in line for line in replayed), rank0[-3000:]
    # Engine server 1 killed after the first push: the next push goes to server 0 alone.
    assert faults.engine is not None and not running(faults.engine)
    assert "weight group over 1 live server(s), without engine server 1" in rank0, rank0[-3000:]
    pushes = re.findall(r"pushed policy version (\d+) to (\d+) engine", rank0)
    curve = json.loads((workdir / "results/rl" / model / "curve.json").read_text())
    trained = [e for e in curve["curve"] if e.get("groups_trained")]
    assert [int(v) for v, _ in pushes] == list(range(1, len(trained) + 1)), rank0[-3000:]
    assert [int(n) for _, n in pushes] == [2] + [1] * (len(pushes) - 1), rank0[-3000:]
    assert vllm.count("weight update complete") == len(pushes)
    assert curve["steps"] == 2
    assert (workdir / "results/rl" / model / "snapshots/step-000002/model.safetensors").exists()
