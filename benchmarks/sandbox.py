"""Sandbox speed: start, per-command round trip, verify(), episodes per minute.

Run (as root, after ./setup.sh): .venv/bin/python benchmarks/sandbox.py [--quick]

Prints medians. Baselines measured in the same run: a ``podman exec`` per command
(what a backend without a persistent session pays) and, for bwrap, a fresh bwrap
process per command. An "episode" is the oracle on the answer-checked-by-pytest
fixture: start, upload the solution, run it, verify, close. The seccomp filter's cost
(tmax.sandbox.seccomp) is measured apart: loading it, and what it adds to each system
call (a loop of getppid() in one process without the filter and one with it).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tmax.sandbox import Sandbox, open_sandbox
from tmax.sandbox.episode import run_episode, sandbox_for_task
from tmax.sandbox.toolbox import ensure_toolbox

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests/fixtures/tasks/answer-checked-by-pytest"


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def start_and_close_ms(
    backend: str, prepared: Sandbox, kwargs: dict[str, object], repeats: int, network: bool
) -> tuple[float, float]:
    """Medians of a start (to a session ready for the first command) and of a close."""
    limits = dataclasses.replace(prepared.limits, network=network)
    starts, closes = [], []
    for _ in range(repeats):
        began = time.perf_counter()
        box = open_sandbox(backend, prepared.image, limits, **kwargs).start()
        started = time.perf_counter()
        box.close()
        starts.append(started - began)
        closes.append(time.perf_counter() - started)
    return statistics.median(starts) * 1000, statistics.median(closes) * 1000


SYSCALL_LOOP = """
import os, sys, time
from pathlib import Path
from tmax.sandbox import seccomp
loaded = 0.0
if sys.argv[1] != "-":
    began = time.perf_counter()
    seccomp.load(Path(sys.argv[1]))
    loaded = time.perf_counter() - began
calls = int(sys.argv[2])
began = time.perf_counter()
for _ in range(calls):
    os.getppid()
print((time.perf_counter() - began) / calls * 1e9, loaded * 1e6)
"""


def seccomp_cost(program: Path, calls: int, repeats: int) -> tuple[float, float, float]:
    """Medians: ns per getppid() without and with the filter, and µs to load it."""
    runs: dict[str, list[tuple[float, float]]] = {"-": [], str(program): []}
    for _ in range(repeats):
        for arg, results in runs.items():  # alternated, so drift hits both alike
            out = subprocess.run([sys.executable, "-c", SYSCALL_LOOP, arg, str(calls)],
                                 check=True, capture_output=True, text=True).stdout  # fmt: skip
            per_call, load = map(float, out.split())
            results.append((per_call, load))
    bare, filtered = runs.values()
    return (statistics.median(r[0] for r in bare), statistics.median(r[0] for r in filtered),
            statistics.median(r[1] for r in filtered))  # fmt: skip


def episode(backend: str) -> float:
    with sandbox_for_task(TASK, backend, run_id="benchmark") as box:
        box.upload(TASK / "solution", "/solution")
        return run_episode(box, ["bash /solution/solve.sh"], TASK / "tests").reward


def episodes_per_minute(backend: str, concurrency: int, count: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        rewards = list(pool.map(lambda _: episode(backend), range(count)))
    assert all(r == 1.0 for r in rewards), rewards
    return count / (time.perf_counter() - start) * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    reps = 5 if args.quick else 20
    commands = 50 if args.quick else 300
    toolbox = ensure_toolbox()
    sandbox_for_task(TASK, "bwrap")  # builds the task image and its rootfs once

    print(f"sandbox benchmark (medians; {reps} starts, {commands} commands)")
    for backend in ("podman", "bwrap"):
        prepare_ms = median_ms(lambda b=backend: sandbox_for_task(TASK, b), reps)
        prepared = sandbox_for_task(TASK, backend)
        kwargs = {"toolbox": toolbox, "workdir": prepared.workdir}
        if backend == "bwrap":
            kwargs["env"] = prepared.env
        start_ms, close_ms = start_and_close_ms(backend, prepared, kwargs, reps, False)
        online_ms, _ = start_and_close_ms(backend, prepared, kwargs, reps, True)
        with sandbox_for_task(TASK, backend) as box:
            round_trip = median_ms(lambda b=box: b.run("true"), commands)
            echo = median_ms(lambda b=box: b.run("echo hello; cd /tmp; export X=1"), commands)
            box.upload(TASK / "solution", "/solution")
            box.run("bash /solution/solve.sh")
            verify = median_ms(lambda b=box: b.verify(TASK / "tests"), reps)
            if backend == "podman":
                container = box.container
                base = median_ms(
                    lambda c=container: subprocess.run(
                        ["podman", "exec", c, "/opt/tmax/bin/true"], check=True
                    ),
                    reps,
                )
                baseline = ("podman exec per command", base)
            else:
                rootfs = box.rootfs
                cmd = [
                    "bwrap", "--ro-bind", str(rootfs), "/", "--ro-bind", str(toolbox),
                    "/opt/tmax", "--proc", "/proc", "--dev", "/dev", "--unshare-all",
                    "--cap-drop", "ALL", "--die-with-parent", "/opt/tmax/bin/true",
                ]  # fmt: skip
                base = median_ms(lambda c=cmd: subprocess.run(c, check=True), reps)
                baseline = ("fresh bwrap per command", base)
        print(f"{backend}:")
        print(f"  task prep (image lookup)     : {prepare_ms:8.1f} ms")
        print(f"  start (to a ready session)   : {start_ms:8.1f} ms")
        print(f"  start, a phase with network  : {online_ms:8.1f} ms (host addresses refused)")
        print(f"  close (all of it removed)    : {close_ms:8.1f} ms")
        print(f"  round trip `true`            : {round_trip:8.2f} ms")
        print(f"  round trip echo+cd+export    : {echo:8.2f} ms")
        print(f"  baseline, {baseline[0]:19s}: {baseline[1]:8.2f} ms "
              f"({baseline[1] / round_trip:.1f}x slower)")  # fmt: skip
        print(f"  verify() (pytest in toolbox) : {verify:8.1f} ms")

    bare, filtered, load_us = seccomp_cost(toolbox / "lib" / "seccomp.bpf", 200_000, reps)
    print("seccomp filter (lib/seccomp.bpf):")
    print(f"  load, from Python (read+prctl): {load_us:7.1f} us")
    print(f"  getppid() without / with     : {bare:6.1f} / {filtered:6.1f} ns "
          f"(+{filtered - bare:.1f} ns a system call)")  # fmt: skip

    count = 6 if args.quick else 16
    for backend in ("podman", "bwrap"):
        for concurrency in (1, 2, 4):
            rate = episodes_per_minute(backend, concurrency, count)
            print(f"{backend} episodes/minute, {concurrency} concurrent: {rate:7.1f}")


if __name__ == "__main__":
    main()
