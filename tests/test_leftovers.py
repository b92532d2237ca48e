"""The leftover check (tests/leftovers.py) counts what its own run left, not another's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import leftovers
from tests.leftovers import Snapshot

PYTEST = "/usr/bin/python3 -m pytest tests"


def test_another_pytest_run_is_seen_but_not_one_in_a_container_or_started_here() -> None:
    snapshot = Snapshot()
    me = os.getpid()
    elsewhere = {4_000_001: (0, 1, PYTEST)}
    assert snapshot.other_session(elsewhere) == 4_000_001
    in_podman = {4_000_002: (0, 1, "/usr/bin/conmon --api-version 1"),
                 4_000_003: (0, 4_000_002, "python3 -m pytest /tests/test_task.py")}  # fmt: skip
    assert snapshot.other_session(in_podman) is None
    started_here = {me: (0, 1, "pytest"), 4_000_004: (0, me, PYTEST)}
    assert snapshot.other_session(started_here) is None


def test_while_another_run_works_its_mounts_and_containers_are_not_ours(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    snapshot = Snapshot()
    monkeypatch.setattr(leftovers, "_mounts", lambda: snapshot.mounts | {str(tmp_path)})
    monkeypatch.setattr(leftovers, "_containers", lambda: snapshot.containers | {"abc x"})
    monkeypatch.setattr(Snapshot, "new_processes", lambda self: {})
    monkeypatch.setattr(Snapshot, "other_session", lambda self, now=None: None)
    alone = snapshot.leftovers()
    assert alone["mounts"] == [str(tmp_path)] and alone["containers"] == ["abc x"]
    monkeypatch.setattr(Snapshot, "other_session", lambda self, now=None: 4_000_001)
    assert snapshot.leftovers() == {}


def test_a_workflow_started_in_another_shell_keeps_its_sandboxes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sandbox started by a workflow (or a benchmark) that was running before this
    session began is the other run's, and so, while it works, is an orphan of ours by
    its command line alone (a container's monitor); alone, such an orphan is a leak."""
    snapshot = Snapshot()
    workflow = (5, 1, "snakemake --cores 2")
    snapshot.processes = {**snapshot.processes, 4_000_011: workflow}
    orphan = {4_000_013: (9, 1, "/usr/bin/conmon --api-version 1 -c abc")}
    busy = {4_000_011: workflow, 4_000_012: (9, 4_000_011, "bwrap --unshare-all"), **orphan}
    assert snapshot.other_session(busy) == 4_000_012
    monkeypatch.setattr(leftovers, "_processes", lambda: busy)
    assert snapshot.new_processes() == {}
    monkeypatch.setattr(leftovers, "_processes", lambda: orphan)
    assert snapshot.other_session(orphan) is None
    assert snapshot.new_processes() == {4_000_013: orphan[4_000_013][2]}
