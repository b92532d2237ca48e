"""Harness speed: overhead per agent turn against the bare sandbox round trip, and
trials per minute of the embedded default's evaluation.

Run (as root, after ./setup.sh):
    .venv/bin/python benchmarks/harness.py [--quick] [--backend bwrap]
    .venv/bin/python benchmarks/harness.py --from-results results   # after ./setup.sh run

Overhead: a scripted model (no model time) answers every turn with the cheapest
action each harness has (``true`` through its shell, or an empty keystroke batch for
terminus-2), for N turns in one started sandbox. The figure is the harness's wall
time per turn — prompt building, parsing, the sandbox calls it makes, trajectory
bookkeeping — beside the median ``sandbox.run("true")`` round trip measured in the
same run. Trials per minute comes from the workflow's own benchmark files
(results/benchmarks/eval/...), i.e. what the embedded default actually achieved.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tmax.harness import HARNESSES, HarnessSettings, make_harness, run_agent
from tmax.models.client import Completion, Message, ScriptedModel, ToolCall, bash_call
from tmax.sandbox.episode import sandbox_for_task

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests/fixtures/tasks/count-error-lines"


def cheapest_action(harness: str) -> Callable[[Sequence[Message]], Completion]:
    """The scripted answer that makes ``harness`` do one minimal action per turn."""
    if harness == "terminus-2":
        answer = json.dumps(
            {
                "analysis": "waiting",
                "plan": "run true",
                "commands": [{"keystrokes": "true\n", "duration": 0.0}],
                "task_complete": False,
            }
        )
        return lambda messages: Completion(answer)
    if harness == "openhands":
        call = ToolCall("call_0", "execute_bash", json.dumps({"command": "true"}))
        return lambda messages: Completion("", (call,), finish_reason="tool_calls")
    return lambda messages: bash_call("true")


def harness_overhead(harness: str, backend: str, turns: int) -> tuple[float, float]:
    """(ms per turn, of which ms in sandbox calls) over ``turns`` turns."""
    settings = HarnessSettings(max_tool_calls=turns, max_turns=turns, max_format_errors=turns)
    model = ScriptedModel(cheapest_action(harness))
    with sandbox_for_task(TASK, backend, run_id="benchmark") as box:
        started = time.perf_counter()
        run = run_agent(
            make_harness(harness, settings), model, box, TASK.joinpath("instruction.md").read_text()
        )
        elapsed = time.perf_counter() - started
    assert run.turns == turns, (harness, run.exit_status, run.turns)
    return elapsed / turns * 1000, run.sandbox_time_sec / turns * 1000


def bare_round_trip(backend: str, repeats: int) -> float:
    with sandbox_for_task(TASK, backend, run_id="benchmark") as box:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            box.run("true")
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def trials_per_minute(results: Path) -> None:
    """Trials per minute of every evaluation job the workflow ran."""
    total_trials, total_sec = 0, 0.0
    rows = []
    for run_file in sorted((results / "eval").glob("*/*/*/run*.json")):
        run = json.loads(run_file.read_text())
        rel = run_file.relative_to(results / "eval").with_suffix(".tsv")
        tsv = results / "benchmarks" / "eval" / rel
        if not tsv.exists():
            continue
        with tsv.open() as handle:
            seconds = float(next(csv.DictReader(handle, delimiter="\t"))["s"])
        rows.append((str(rel.with_suffix("")), run["n_trials"], seconds))
        total_trials += run["n_trials"]
        total_sec += seconds
    if not rows:
        raise SystemExit(f"no evaluation benchmark files under {results}: run the workflow first")
    for name, trials, seconds in rows:
        print(
            f"{name:50s} {trials:3d} trials in {seconds:6.1f} s = {trials / seconds * 60:5.1f}/min"
        )
    print(
        f"all evaluation jobs: {total_trials} trials in {total_sec:.0f} s of job time = "
        f"{total_trials / total_sec * 60:.1f} trials/min (model server start included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns")
    parser.add_argument("--backend", default="bwrap", choices=["bwrap", "podman"])
    parser.add_argument("--from-results", type=Path, help="report trials/min of a workflow run")
    args = parser.parse_args()
    if args.from_results:
        trials_per_minute(args.from_results)
        return
    turns = 20 if args.quick else 100
    sandbox_for_task(TASK, args.backend).close()  # build the image once, outside the timing
    bare = bare_round_trip(args.backend, turns)
    print(f"bare sandbox.run('true') round trip ({args.backend}): {bare:.2f} ms (median)")
    for harness in HARNESSES:
        per_turn, in_sandbox = harness_overhead(harness, args.backend, turns)
        print(
            f"{harness:15s} {per_turn:7.2f} ms/turn ({in_sandbox:6.2f} in sandbox calls) "
            f"= {per_turn / bare:5.1f}x the bare round trip"
        )


if __name__ == "__main__":
    main()
