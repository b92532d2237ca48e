"""The session's leftover check (tests/leftovers.py) counts what the tests left, and
never the work of a program someone else started on the machine meanwhile."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.leftovers import MARKER, Snapshot


def _unmarked() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != MARKER}


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def _wait_for(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_workflow_started_elsewhere_is_not_a_leftover_and_a_leaked_sandbox_is(
    tmp_path: Path,
) -> None:
    go, pidfile = tmp_path / "go", tmp_path / "workflow.pid"
    # A workflow someone started in another shell before the snapshot (not below this
    # pytest), which starts one of our programs afterwards: its work, not a leftover.
    script = (f"echo $$ > {pidfile}; while [ ! -e {go} ]; do sleep 0.05; done; "
              "sleep infinity & wait")  # fmt: skip
    subprocess.run(["bash", "-c", f"setsid bash -c '{script}' >/dev/null 2>&1 < /dev/null &"],
                   env=_unmarked(), check=True)  # fmt: skip
    _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
    workflow = int(pidfile.read_text())
    try:
        time.sleep(0.3)
        snapshot = Snapshot()
        go.touch()
        _wait_for(lambda: len(_children(workflow)) == 1)
        [work] = _children(workflow)
        # A sandbox the tests leak: its environment cleared, re-parented to PID 1.
        subprocess.run(["bash", "-c", "setsid sleep infinity >/dev/null 2>&1 < /dev/null &"],
                       env=_unmarked(), check=True)  # fmt: skip
        _wait_for(lambda: any("sleep infinity" in c for c in snapshot.new_processes().values()))
        time.sleep(0.3)
        found = snapshot.new_processes()
        assert work not in found and workflow not in found, found
        leaked = [pid for pid, cmd in found.items() if "sleep infinity" in cmd]
        assert len(leaked) == 1, found
        snapshot.remove({"processes": [f"{pid} sleep infinity" for pid in leaked]})
        _wait_for(lambda: not snapshot.new_processes())
    finally:
        for pid in (*_children(workflow), workflow):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
