"""scripts/gpu_smoke.py rehearsed on CPU (``--device cpu``): every stage of the path a GPU
session runs (a real vLLM server from the vLLM environment, the trainer's log-probs, a
packed row, a ZeRO-3 step, the weight push) passes here, so the script a lent GPU runs
has not rotted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/gpu_smoke.py"


@pytest.mark.slow
def test_every_stage_passes_on_cpu(vllm_python: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--samples", "2", "--max-tokens", "16"],
        capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
        env={**os.environ, "TMAX_VLLM_PYTHON": vllm_python},
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("SMOKE_SUMMARY ")]
    assert lines, done.stderr[-4000:]
    summary = json.loads(lines[-1].removeprefix("SMOKE_SUMMARY "))
    failed = {name: stage for name, stage in summary["stages"].items() if not stage["ok"]}
    assert not failed, (failed, done.stderr[-4000:])
    assert done.returncode == 0
    packed = summary["figures"]["packing"]["vs_padded"]
    assert packed["tokens"] == summary["figures"]["vllm_tokens"]  # every completion compared
    assert packed["mean_abs_dlogp"] <= summary["figures"]["packing"]["bf16_vs_fp32_model_mean"]
