"""Which of a benchmark's tasks an evaluation job runs (tmax.evaluate.stage)."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tmax.evaluate.stage as stage
from tests.conftest import ROOT
from tmax.config import load_config
from tmax.evaluate.stage import run_settings, stable_subset

NAMES = [f"task-{i:02d}" for i in range(20)]


def test_a_stable_subset_only_grows_and_ignores_the_input_order() -> None:
    subsets = [stable_subset(NAMES, n, name=str) for n in range(1, 21)]
    for smaller, larger in itertools.pairwise(subsets):
        assert set(smaller) < set(larger)
    assert stable_subset(list(reversed(NAMES)), 7, name=str) == subsets[6]
    assert subsets[6] == sorted(subsets[6])
    assert subsets[6] != NAMES[:7]  # chosen by hash, not the first names
    assert stable_subset(NAMES, None, name=str) == NAMES
    assert stable_subset(NAMES, 50, name=str) == NAMES


@pytest.mark.parametrize("cap", [None, 3])
def test_a_harness_cap_picks_the_stable_subset_of_the_manifest(
    cap: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """evaluation.harness_max_tasks reaches a job as `harness_max_tasks` in its
    settings (rules/common.smk): the job plans trials for that many tasks only."""
    manifest = tmp_path / "heldout.json"
    tasks = [{"name": n, "path": str(tmp_path / n), "domain": "security"} for n in NAMES]
    manifest.write_text(json.dumps({"benchmark": "heldout", "tasks": tasks}))
    planned: list[str] = []

    @contextlib.contextmanager
    def no_server(*args: Any, **kwargs: Any) -> Iterator[None]:
        yield None

    def record(specs: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        planned.extend(spec.task_name for spec in specs)
        return []

    monkeypatch.setattr(stage, "serve_model", no_server)
    monkeypatch.setattr(stage, "run_trials", record)
    evaluation = run_settings(load_config(ROOT / "config.yaml")["evaluation"])
    if cap is not None:
        evaluation["harness_max_tasks"] = cap
    output, log = tmp_path / "run0.json", tmp_path / "log"
    stage.evaluate_run(manifest, {"name": "m"}, None, "terminus-2", 0, evaluation, "bwrap",
                       output, concurrency=1, server_log=log)  # fmt: skip
    assert planned == stable_subset(NAMES, cap, name=str)
    assert len(planned) == (cap or len(NAMES))
