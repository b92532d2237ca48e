"""Harbor's own trial loop through our sandboxes against our own runner, same tasks.

Run (as root, after ./setup.sh): .venv/bin/python benchmarks/harbor_environment.py
    [--backend bwrap] [--repeat 3]

The tasks: one generated task of each domain's first family and the Harbor-format
fixtures (shaped like TB 2.0, SWE-bench, TB 1.0 and Endless Terminals). For each
backend, Harbor's ``oracle`` and ``nop`` agents run through ``harbor run --env
tmax.harbor_environment:…`` (one trial at a time), then our own runner plays the same
thing (the solution's ``solve.sh``, or nothing, then our verifier) in a sandbox of the
same backend. Prints per backend and agent: trials, mean reward (oracle must be 1, nop
0), Harbor errors, seconds per trial as Harbor's results time them and as the job's wall
clock does, ours, and the ratio of Harbor's wall clock to ours.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tmax.generate.procedural import FAMILIES
from tmax.harness.upstream import harbor_python
from tmax.sandbox.episode import sandbox_for_task
from tmax.sandbox.harbor import harbor_job
from tmax.sandbox.redteam import family_task

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "redteam"


def ours(task_dir: Path, backend: str, oracle: bool) -> float:
    """Our runner on one task: the solution (or nothing), then our verifier; its reward."""
    with sandbox_for_task(
        task_dir, backend, run_id="benchmark-harbor", network_policy="harbor"
    ) as box:
        if oracle:
            box.upload(task_dir / "solution", "/solution")
            box.run("bash /solution/solve.sh")
        return box.verify(task_dir / "tests").reward


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", choices=["bwrap", "podman"])
    parser.add_argument("--repeat", type=int, default=1, help="jobs per (backend, agent)")
    args = parser.parse_args()
    harbor = harbor_python()
    if harbor is None:
        sys.exit("no Harbor environment: run ./setup.sh (it builds .venv-harbor)")
    failed = False
    with tempfile.TemporaryDirectory(prefix="harbor-benchmark-") as scratch:
        tasks = Path(scratch) / "tasks"
        tasks.mkdir()
        for group in FAMILIES.values():
            family_task(group[0].name, tasks)
        for fixture in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
            (tasks / fixture.name).symlink_to(fixture, target_is_directory=True)
        task_dirs = sorted(p for p in tasks.iterdir())
        print(f"{len(task_dirs)} tasks: {', '.join(p.name for p in task_dirs)}\n")
        print("| backend | agent | trials | mean reward | Harbor errors | Harbor s/trial "
              "(results) | Harbor s/trial (wall) | ours s/trial | wall ratio |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for backend in args.backend or ["bwrap", "podman"]:
            for agent, expected in (("oracle", 1.0), ("nop", 0.0)):
                trials, walls = [], []
                for repeat in range(args.repeat):
                    started = time.monotonic()
                    trials += harbor_job(
                        harbor, tasks, agent, backend, Path(scratch) / "jobs",
                        f"{backend}-{agent}-{repeat}",
                    )  # fmt: skip
                    walls.append((time.monotonic() - started) / len(task_dirs))
                ours_rewards, ours_times = [], []
                for _ in range(args.repeat):
                    for task_dir in task_dirs:
                        started = time.monotonic()
                        ours_rewards.append(ours(task_dir, backend, agent == "oracle"))
                        ours_times.append(time.monotonic() - started)
                rewards = [t.reward for t in trials]
                errors = sum(t.exception is not None for t in trials)
                mean = statistics.fmean(r or 0.0 for r in rewards)
                wall, own = statistics.fmean(walls), statistics.fmean(ours_times)
                print(f"| {backend} | {agent} | {len(trials)} | {mean:.3f} | {errors} | "
                      f"{statistics.fmean(t.seconds for t in trials):.2f} | {wall:.2f} | "
                      f"{own:.2f} | {wall / own:.2f} |", flush=True)  # fmt: skip
                if errors or any(r != expected for r in rewards + ours_rewards):
                    failed = True
                    for trial in trials:
                        if trial.exception or trial.reward != expected:
                            print(f"  ! {trial.task}: reward {trial.reward} {trial.exception}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
