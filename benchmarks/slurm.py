"""What Slurm costs the workflow: submission overhead per job, and the paper-scale dry run.

Run (as root, with Debian's slurmctld/slurmd/munge installed, e.g. by ./setup.sh test):
    .venv/bin/python benchmarks/slurm.py [--chain 6] [--fan 12]

A one-node cluster is started on localhost (tests/slurm/cluster.py) and stopped after.

1. **Per-job overhead.** A toy workflow of trivial jobs runs twice, with the local
   executor and with the slurm executor (squeue status, first check after 2 s, as the
   test profile). ``--chain`` jobs one after another measure the latency a job adds on
   the critical path; ``--fan`` independent jobs at once measure the cost per job when
   they overlap. A bare ``sbatch --wait`` of an empty script is the floor Slurm itself
   sets. Overhead per job = (slurm time - local time) / jobs.
2. **Paper-scale dry run.** ``snakemake --profile slurm -n`` on configs/paper.yaml
   (14,600 specs, 4 model sizes, every evaluation) in a copy of the workflow, against
   ``snakemake -n`` on the embedded default as the baseline.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.slurm.cluster import LocalSlurm, missing_requirements  # noqa: E402
from tests.workflow.test_snakemake import copy_workflow  # noqa: E402

TOY = """
rule all:
    input: expand("chain/{{i}}.txt", i=range({chain})), expand("fan/{{i}}.txt", i=range({fan}))

rule fan:
    output: "fan/{{i}}.txt"
    shell: "echo {{wildcards.i}} > {{output}}"

rule chain:
    input: lambda wc: [] if int(wc.i) == 0 else [f"chain/{{int(wc.i) - 1}}.txt"]
    output: "chain/{{i}}.txt"
    shell: "echo {{wildcards.i}} > {{output}}"
"""

SLURM_ARGS = [
    "--executor", "slurm",
    "--jobs", "50",
    "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "2",
    "--default-resources", "mem_mb=200", "runtime=10",
    "--latency-wait", "5",
]  # fmt: skip


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return elapsed


def toy_workflow(folder: Path, chain: int, fan: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "Snakefile").write_text(TOY.format(chain=chain, fan=fan))
    return folder


def snakemake(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def overhead(tmp: Path, chain: int, fan: int) -> None:
    print(f"toy workflow: a chain of {chain} jobs and a fan of {fan} independent jobs")
    floor_script = tmp / "empty.sh"
    floor_script.write_text("#!/bin/sh\ntrue\n")
    sbatch = [timed(["sbatch", "--wait", "-o", "/dev/null", str(floor_script)], tmp)
              for _ in range(3)]  # fmt: skip
    print(f"  bare sbatch --wait of an empty job:   {min(sbatch):6.2f} s (best of 3)")
    targets = {"chain": [f"chain/{chain - 1}.txt"], "fan": [f"fan/{i}.txt" for i in range(fan)]}
    for part, jobs in (("chain", chain), ("fan", fan)):
        local = timed(snakemake("--cores", "2", *targets[part]),
                      toy_workflow(tmp / f"local-{part}", chain, fan))  # fmt: skip
        slurm = timed(snakemake(*SLURM_ARGS, *targets[part]),
                      toy_workflow(tmp / f"slurm-{part}", chain, fan))  # fmt: skip
        print(f"  {part:5} local {local:6.1f} s, slurm {slurm:6.1f} s: "
              f"{(slurm - local) / jobs:5.1f} s per job ({slurm / local:.1f}x)")  # fmt: skip


def dry_run(tmp: Path) -> None:
    (tmp / "workflow").mkdir()
    copy = copy_workflow(tmp / "workflow", small=False)
    baseline = min(timed(snakemake("-n", "--cores", "2"), copy) for _ in range(2))
    paper = min(timed(snakemake("--profile", "slurm", "-n"), copy) for _ in range(2))
    result = subprocess.run(snakemake("--profile", "slurm", "-n"), cwd=copy,
                            capture_output=True, text=True)  # fmt: skip
    total = [line for line in result.stdout.splitlines() if line.startswith("total")]
    print(f"dry run, embedded default (snakemake -n):        {baseline:6.1f} s")
    print(f"dry run, paper scale (snakemake --profile slurm -n): {paper:6.1f} s "
          f"({paper / baseline:.1f}x; {total[0].split()[1] if total else '?'} jobs)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=6)
    parser.add_argument("--fan", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tmax-slurm-bench-") as name:
        tmp = Path(name)
        dry_run(tmp)
        reason = missing_requirements()
        if reason:
            print(f"per-job overhead not measured: {reason}")
            return
        with LocalSlurm(tmp / "cluster"):
            overhead(tmp, args.chain, args.fan)


if __name__ == "__main__":
    main()
