"""benchmarks/miniature.py reads a finished run as the report does (pass@1 is stored
in %, each task's successes for the paired gaps) and applies --set overrides to nested
config keys."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def miniature() -> ModuleType:
    spec = importlib.util.spec_from_file_location("miniature", ROOT / "benchmarks" / "miniature.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_held_out_reads_pass_at_1_in_percent_and_the_tasks(tmp_path: Path) -> None:
    module = miniature()
    for variant, score in (("sft", 33.3), ("tmax", 50.0)):
        path = tmp_path / "eval" / f"tiny-qwen3-{variant}" / "heldout" / "tmax" / "metrics.json"
        path.parent.mkdir(parents=True)
        per_task = {"a": {"successes": 1, "attempts": 2, "infra_failures": 0}}
        group = {"harness": "tmax", "pass_at_1_mean": score, "per_task": per_task}
        path.write_text(json.dumps({"groups": [group]}))
    scores, per_task = module.held_out(tmp_path)
    assert scores == {"tmax": {"sft": 33.3, "tmax": 50.0}}
    assert per_task == {"tmax": {"sft": {"a": (1, 2)}, "tmax": {"a": (1, 2)}}}


def test_set_overrides_nested_keys_as_yaml() -> None:
    module = miniature()
    config = {"rl": {"sft": {"steps": 150}, "steps": 5}}
    module.override(config, "rl.sft={steps: 300, batch_size: 16}")
    module.override(config, "generation.tier=easy")
    assert config == {"rl": {"sft": {"steps": 300, "batch_size": 16}, "steps": 5},
                      "generation": {"tier": "easy"}}  # fmt: skip
    with pytest.raises(SystemExit, match=r"a\.b\.c=VALUE"):
        module.override(config, "rl.steps")
    with pytest.raises(SystemExit, match="'steps' is not a mapping"):
        module.override(config, "rl.steps.x=1")
