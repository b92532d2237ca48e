"""Difficulty of a converted dataset: a scripted reference model plays two tiny tasks
in real bwrap sandboxes through the evaluation runner, and pass@1 / pass@8 come out
as the unbiased estimator gives them by hand."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.datasets.test_labels import write_manifest
from tests.sandbox.test_sandbox import _available
from tmax.datasets.difficulty import DifficultyConfigError, DifficultySettings, measure_difficulty
from tmax.datasets.measure_stage import dataset_difficulty, read_manifest
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.models.client import Completion, Message, ModelError, ScriptedModel, bash_call
from tmax.sandbox import Sandbox, SandboxError
from tmax.sandbox.episode import sandbox_for_task

TASK_TOML = """schema_version = "1.1"

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 60.0

[environment]
docker_image = "debian:bookworm-slim"
memory_mb = 512
"""
REWARD = """mkdir -p /logs/verifier
if {check}; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""
TASKS = {
    # solvable by the scripted commands (when the script chooses to)
    "write-ready": (
        "Write the single word `ready` into /srv/answer.txt.",
        "grep -qx ready /srv/answer.txt",
    ),
    # the scripted commands never create this file
    "find-the-key": (
        "Recover the lost key into /srv/key.txt.",
        "test -s /srv/key.txt",
    ),
}


def write_task(folder: Path, instruction: str, check: str) -> None:
    """A converted task in our (Harbor) layout, with the adapters' tmax.json."""
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(TASK_TOML)
    (folder / "instruction.md").write_text(instruction + "\n")
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    test_sh = folder / "tests" / "test.sh"
    test_sh.write_text("#!/bin/bash\n" + REWARD.format(check=check))
    test_sh.chmod(0o755)
    meta = {
        "format": "tmax-task/1",
        "axes": None,
        "generator": {},
        "source": {"dataset": "prior", "layout": "harbor", "original_id": folder.name},
    }
    (folder / "tmax.json").write_text(json.dumps(meta))


def converted_dataset(root: Path) -> Path:
    """manifest.json + tasks/<id>/ for the two tasks."""
    manifest = write_manifest(root, instructions={k: v[0] for k, v in TASKS.items()})
    data = json.loads(manifest.read_text())
    for task in data["tasks"]:
        task["path"] = f"tasks/{task['id']}"
        write_task(manifest.parent / task["path"], *TASKS[task["id"]])
    manifest.write_text(json.dumps(data))
    return manifest


class SometimesSolves:
    """Solves write-ready only on its 5th attempt; never finds the key."""

    def __init__(self) -> None:
        self.attempts = {name: 0 for name in TASKS}
        self.lock = threading.Lock()

    def __call__(self, messages: Sequence[Message]) -> Completion:
        if messages[-1]["role"] == "tool":
            return bash_call(f"echo {SUBMIT_SENTINEL}")
        task = next(name for name, (text, _) in TASKS.items() if text in messages[1]["content"])
        with self.lock:
            attempt = self.attempts[task]
            self.attempts[task] += 1
        if task == "write-ready":
            word = "ready" if attempt == 4 else "busy"
            return bash_call(f"mkdir -p /srv && echo {word} > /srv/answer.txt")
        return bash_call("ls /srv")


class FirstStartFails:
    """Real bwrap sandboxes, except find-the-key's first one fails to start."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, task_dir: Path) -> Sandbox:
        if task_dir.name == "find-the-key" and not self.failed:
            self.failed = True
            raise SandboxError("bwrap: could not set up the root file system")
        return sandbox_for_task(task_dir, "bwrap", run_id="pytest")


def settings(runs: int, **overrides) -> DifficultySettings:
    budgets = {
        "temperature": 0.0,
        "interleaved_thinking": False,
        "max_tool_calls": 3,
        "max_turn_tokens": 256,
        "max_total_tokens": 4096,
        "max_format_errors": 2,
        "command_timeout_sec": 20,
    }
    return DifficultySettings(
        model={"name": "scripted"}, runs=runs, concurrency=1, budgets=budgets, **overrides
    )


@pytest.mark.slow
def test_pass_at_1_and_8_by_the_unbiased_estimator_with_infra_apart(tmp_path: Path) -> None:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)
    manifest = converted_dataset(tmp_path / "datasets")
    model = ScriptedModel(SometimesSolves())
    document = measure_difficulty(
        read_manifest(manifest),
        manifest.parent,
        settings(runs=9),
        client=model,
        sandbox_factory=FirstStartFails(),
        progress=False,
    )
    # write-ready: n = 9 valid attempts, c = 1 solved.
    #   pass@1 = c/n = 1/9; pass@8 = 1 - C(8, 8)/C(9, 8) = 1 - 1/9 = 8/9.
    # find-the-key: one infrastructure failure left out, n = 8, c = 0: both 0.
    # Means over the two tasks: pass@1 = 1/18 = 5.56 %, pass@8 = 4/9 = 44.44 %.
    assert document["status"] == "measured"
    assert document["pass_at_1"] == pytest.approx(100 / 18)
    assert document["pass_at_8"] == pytest.approx(400 / 9)
    assert (document["pass_at_1_tasks"], document["pass_at_8_tasks"]) == (2, 2)
    assert (document["n_tasks"], document["n_runs"], document["n_trials"]) == (2, 9, 18)
    assert document["n_infra"] == 1 and document["infra_failures"] == {"SandboxError": 1}
    assert document["per_task"]["write-ready"] == {
        "successes": 1,
        "attempts": 9,
        "infra_failures": 0,
    }
    assert (document["model"], document["harness"], document["unit"]) == (
        "scripted",
        "tmax",
        "percent",
    )

    # A rerun reads the finished trials back: no model call, same numbers.
    def never(_: Sequence[Message]) -> Completion:
        raise ModelError("the rerun must not ask the model")

    again = measure_difficulty(
        read_manifest(manifest),
        manifest.parent,
        settings(runs=9),
        client=ScriptedModel(never),
        progress=False,
    )
    assert again["pass_at_8"] == document["pass_at_8"]


def test_a_dataset_without_environments_says_so(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "datasets", has_environments=False)
    output = manifest.parent / "difficulty.json"
    dataset_difficulty(manifest, output, settings(runs=8), progress=False)
    document = json.loads(output.read_text())
    assert document["status"] == "no environments"
    assert document["reason"].startswith("no environments")
    assert document["pass_at_1"] is None and document["pass_at_8"] is None
    assert not (manifest.parent / "difficulty").exists()  # nothing was run


def test_without_a_reference_model_nothing_runs(tmp_path: Path) -> None:
    manifest = converted_dataset(tmp_path / "datasets")
    none = DifficultySettings.from_config({"difficulty": {}, "models": []})
    document = measure_difficulty(read_manifest(manifest), manifest.parent, none)
    assert document["status"] == "not measured"
    assert document["reason"].startswith("no reference model")


def test_settings_resolve_the_reference_model_and_budgets() -> None:
    models = [{"name": "tiny-qwen3", "path": "tiny-qwen3"}]
    evaluation = {"max_tool_calls": 64, "temperature": 0.7, "engine": "transformers"}
    config = {
        "models": models,
        "evaluation": evaluation,
        "sandbox": {"backend": "bwrap", "max_concurrency": 3},
        "difficulty": {"model": "tiny-qwen3", "runs": 8, "max_tool_calls": 16},
    }
    resolved = DifficultySettings.from_config(config)
    assert resolved.model == models[0]
    assert resolved.budgets["max_tool_calls"] == 16  # its own budget
    assert resolved.budgets["temperature"] == 0.7  # evaluation's
    assert resolved.concurrency == 3
    assert resolved.backend == "bwrap"  # the configured sandbox, not a default

    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "flash"}
    config["difficulty"] = {"endpoint": endpoint}
    assert DifficultySettings.from_config(config).model["endpoint"] == endpoint

    config["difficulty"] = {"endpoint": endpoint, "model": "tiny-qwen3"}
    with pytest.raises(DifficultyConfigError, match="both set"):
        DifficultySettings.from_config(config)
    config["difficulty"] = {"model": "gemini"}
    with pytest.raises(DifficultyConfigError, match="allowed: one of"):
        DifficultySettings.from_config(config)


def test_runs_below_eight_say_why_pass_at_8_is_missing() -> None:
    from tmax.datasets.difficulty import summary_document

    document = summary_document("d", None, settings(runs=4), 0, 0, Path("."), [])
    assert document["pass_at_8_reason"] == "needs 8 runs (ran 4)"
