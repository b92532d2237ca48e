"""A converted task runs in a real sandbox: its verifier gives reward 1 after the
reference solution and 0 when nothing was done, as the source's own harness would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.datasets.adapter_support import DATASET_FIXTURES, convert, out_dir
from tmax.generate.validate import check_task

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("podman") is None,
        reason="needs root, bwrap and podman (./setup.sh installs them)",
    ),
]


@pytest.mark.parametrize(
    ("layout", "task"), [("harbor", "count-words"), ("terminal_bench_v1", "sum-numbers")]
)
def test_converted_task_scores_1_solved_and_0_untouched(
    layout: str, task: str, tmp_path: Path
) -> None:
    manifest = convert(tmp_path, layout, DATASET_FIXTURES / layout)
    assert [t["id"] for t in manifest["tasks"]] == [task]
    check = check_task(out_dir(tmp_path) / "tasks" / task, "bwrap", run_id="datasets-test")
    assert (check.noop_reward, check.oracle_reward, check.ok) == (0.0, 1.0, True), check.reason
