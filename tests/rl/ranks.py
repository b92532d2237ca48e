"""Run a test file's ``--worker`` entry as several CPU ranks (gloo), as torchrun would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ranks(
    script: str, out: Path, world_size: int, timeout_s: float, codes: list[int] | None = None
) -> None:
    """``python script --worker out`` once per rank with torchrun's variables; fails with
    the tail of every rank's log unless every rank exits with its code in ``codes``
    (default: all 0) within ``timeout_s``."""
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "DS_ACCELERATOR": "cpu",  # never CUDA, even on a GPU machine
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        }
        log = (out / f"rank{rank}.log").open("w")
        procs.append(
            subprocess.Popen(
                [sys.executable, script, "--worker", str(out)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        exits = [proc.wait(timeout=timeout_s) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    logs = "\n".join((out / f"rank{r}.log").read_text()[-3000:] for r in range(world_size))
    assert exits == (codes if codes is not None else [0] * world_size), logs
