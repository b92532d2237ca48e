"""benchmarks/rl.py still runs against the current trainer and engine (tiny sizes): the
benchmark is not a test, but a benchmark that crashes measures nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tmax.models.tiny import ensure_tiny_model

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "rl.py"


def load_script(path: Path = SCRIPT) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{path.stem}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_rl_figure_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_script()
    torch.set_num_threads(1)
    model_dir = ensure_tiny_model()
    bench.trainer_vs_cross_entropy(model_dir, repeats=1, length=32)
    bench.rollouts_vs_generate(model_dir, repeats=1, new_tokens=4)
    bench.episode_threads(model_dir, repeats=1, new_tokens=4, threads=2)
    printed = capsys.readouterr().out
    for figure in ("overhead:", "TransformersEngine :", "merged into batches:"):
        assert figure in printed


@pytest.mark.slow
def test_the_vllm_throughput_figure_is_printed(
    vllm_pair: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the session's pair of real vLLM servers (the push and bf16 figures start
    servers of their own: run by hand)."""
    bench = load_script()
    torch.set_num_threads(1)
    model_dir = Path(vllm_pair.settings.model_dir)
    bench.vllm_vs_transformers(model_dir, 1, new_tokens=4, threads=2, running=vllm_pair)
    printed = capsys.readouterr().out
    assert "vLLM, 2 server(s)" in printed and "x TransformersEngine" in printed


def test_the_packing_figures_are_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_script(SCRIPT.parent / "packing.py")
    # Padding never takes fewer slots than packing; both hold every token.
    sizes = [100, 900, 50, 400]
    padded, packed = bench.padded(sizes, 1000), bench.packed(sizes, 1000)
    assert packed[0] == sum(sizes) <= padded[0] and packed[1] == 2
    monkeypatch.setattr("sys.argv", ["packing.py", "--budget", "4096", "--episodes", "32",
                                     "--ranks", "4"])  # fmt: skip
    bench.main()
    printed = capsys.readouterr().out
    for kind in ("lognormal-4k", "lognormal-12k", "bimodal"):
        assert kind in printed
    # Measured: the trainer's update, padded then packed, agrees on the loss.
    monkeypatch.setattr("sys.argv", ["packing.py", "--measure", "--budget", "128",
                                     "--episodes", "3", "--ranks", "1", "--repeats", "1",
                                     "--threads", "1"])  # fmt: skip
    bench.main()
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[:2] for row in rows] == [
        [m, k] for m in ("qwen3", "qwen3_5") for k in ("lognormal-4k", "lognormal-12k", "bimodal")
    ]
    assert all(float(row[-2]) < 1e-5 for row in rows)  # |Δloss| / loss


@pytest.mark.slow
def test_the_push_benchmark_checks_its_server_and_prints_its_goals(
    vllm_python: str, tmp_path: Path
) -> None:
    """benchmarks/push.py at one layer, one bucket size, one round: the streamed push
    reaches the real server (its check passes) and the goal lines are printed."""
    import subprocess
    import sys

    script = SCRIPT.with_name("push.py")
    argv = [sys.executable, str(script), "--layers", "1", "--buckets", "16", "--rounds", "1",
            "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "push.json")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "check: after the first streamed push" in done.stdout and ": ok" in done.stdout
    assert "16 MiB: streamed peak <= 2 buckets + the largest tensor" in done.stdout
    assert (tmp_path / "push.json").is_file()
