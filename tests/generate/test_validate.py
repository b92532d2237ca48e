"""Validation quarantines, with the reason, every task whose oracle fails or whose
tests accept a no-op; nothing is dropped silently."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.generate import validate
from tmax.generate.stage import validate_shard
from tmax.generate.validate import check_task
from tmax.sandbox.base import NodeError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("podman") is None,
        reason="needs root, bwrap and podman (./setup.sh installs them)",
    ),
]


def fixture(name: str, tmp_path: Path, new_name: str | None = None) -> Path:
    return Path(shutil.copytree(FIXTURE_TASKS / name, tmp_path / (new_name or name)))


def test_good_task_passes(tmp_path: Path) -> None:
    check = check_task(fixture("count-error-lines", tmp_path), "bwrap")
    assert (check.ok, check.noop_reward, check.oracle_reward) == (True, 0.0, 1.0)


def test_failing_oracle_is_quarantined(tmp_path: Path) -> None:
    task = fixture("count-error-lines", tmp_path)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho 41 > /app/error_count.txt\n")
    check = check_task(task, "bwrap")
    assert not check.ok and check.reason.startswith("oracle scored 0")


def test_tests_that_accept_a_noop_are_quarantined(tmp_path: Path) -> None:
    task = fixture("count-error-lines", tmp_path)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    check = check_task(task, "bwrap")
    assert not check.ok and check.reason.startswith("no-op scored 1")


def test_a_task_whose_image_does_not_build_is_quarantined(tmp_path: Path) -> None:
    task = fixture("count-error-lines", tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN exit 3\n")
    check = check_task(task, "podman")
    assert not check.ok and check.reason.startswith("image build failed"), check.reason


def test_a_machine_that_cannot_run_sandboxes_stops_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise NodeError("this node cannot run bwrap sandboxes")

    monkeypatch.setattr(validate, "sandbox_for_task", broken)
    with pytest.raises(NodeError):  # not a quarantined task: the whole shard would be
        check_task(fixture("count-error-lines", tmp_path), "bwrap")


@pytest.mark.parametrize("workers", [1, 3])
def test_shard_report_lists_every_task(tmp_path: Path, workers: int) -> None:
    """The same verdicts, in task order, whether sandboxes run one or several at a time."""
    shard = tmp_path / "shard"
    fixture("count-error-lines", shard, "good")
    broken = fixture("count-error-lines", shard, "broken")
    (broken / "task.toml").write_text("[environment\n")
    no_solution = fixture("no-solution-prebuilt", shard, "unsolved")
    summary = validate_shard(shard, "bwrap", tmp_path / "out.json", workers=workers)
    assert [c["task"] for c in summary["checks"]] == ["broken", "good", no_solution.name]
    reasons = {c["task"]: c["reason"] for c in summary["checks"]}
    assert reasons["good"] is None
    assert reasons["broken"].startswith("malformed task")
    assert reasons[no_solution.name].startswith("no reference solution")
    saved = json.loads((tmp_path / "out.json").read_text())
    assert (saved["tasks"], saved["passed"], saved["quarantined"]) == (3, 1, 2)
