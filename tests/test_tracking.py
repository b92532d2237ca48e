"""Experiment tracking (config ``tracking``): an RL run's steps, an evaluation's summary
and the config reach W&B (offline, read back from its run file), TensorBoard as
before, or nowhere; and no rule's params carry the setting, so changing it reruns
nothing. No test reaches the network: W&B runs offline, in the test's folder."""

from __future__ import annotations

import json
import struct
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.rl.test_trainer import curve, make_trainer, target_env
from tmax.evaluate.metrics import tracked_metrics
from tmax.tracking import (
    JOB_ENV,
    RUN_ID_ENV,
    Job,
    TrackingSettings,
    job_name,
    job_tracker,
    set_job,
    set_workflow_job,
)

CONFIG = {"seed": 3, "rl": {"loss": "dppo"}, "tracking": {"backend": "wandb"}}


@pytest.fixture(autouse=True)
def offline(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B offline and silent, its own files in a temporary home; each test's job
    setting (set_job writes the environment) undone afterwards."""
    home = tmp_path_factory.mktemp("wandb-home")
    for variable, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true",
                            "WANDB_CONFIG_DIR": home / "config", "WANDB_CACHE_DIR": home / "cache",
                            "WANDB_DATA_DIR": home / "data", JOB_ENV: ""}.items():  # fmt: skip
        monkeypatch.setenv(variable, str(value))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def wandb_records(folder: Path) -> dict[str, Any]:
    """The one offline run under ``folder/wandb``, from its run file (LevelDB-log
    records of wandb's protobuf Record): run, history by step, config, summary."""
    from wandb.proto import wandb_internal_pb2 as pb

    (run_file,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    found: dict[str, Any] = {"run": None, "history": {}, "config": {}, "summary": {}}
    position, chunks, block = 7, b"", 32768
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a header
            position += block - position % block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunks += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind not in (1, 4):  # FIRST or MIDDLE: the record goes on
            continue
        record, chunks = pb.Record.FromString(chunks), b""
        field = record.WhichOneof("record_type")
        if field == "run":
            found["run"] = record.run
            found["config"].update(
                {i.key: json.loads(i.value_json) for i in record.run.config.update}
            )
        elif field == "history":
            items = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json)
                for i in record.history.item
            }
            found["history"][items.pop("_step")] = items
        elif field == "config":
            found["config"].update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif field == "summary":
            found["summary"].update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                     for i in record.summary.update})  # fmt: skip
    return found


def test_a_short_rl_run_under_wandb_offline_writes_its_steps_and_config(tmp_path: Path) -> None:
    set_job(TrackingSettings(backend="wandb"),
            Job("rl_train-tiny", "rl_train", group="run-7", config=CONFIG))  # fmt: skip
    make_trainer(tmp_path, target_env(), steps=3).train()
    run = wandb_records(tmp_path)
    assert (run["run"].display_name, run["run"].run_group, run["run"].job_type) == (
        "rl_train-tiny", "run-7", "rl_train"
    )  # fmt: skip
    steps = curve(tmp_path)
    assert len(steps) == 3 and sorted(run["history"]) == [m["step"] for m in steps]
    for metrics in steps:
        logged = run["history"][metrics["step"]]
        for key in ("reward_mean", "zero_std_fraction", "step_time_sec"):
            assert logged[key] == pytest.approx(metrics[key])
    assert run["config"]["seed"] == 3 and run["config"]["rl"] == {"loss": "dppo"}
    assert run["config"]["rl_settings"]["group_size"] == 8  # the trainer's settings
    assert not (tmp_path / "tensorboard").exists()


class RecordingWriter:
    made: ClassVar[list[RecordingWriter]] = []

    def __init__(self, log_dir: str) -> None:
        self.log_dir, self.scalars, self.texts = log_dir, [], []
        RecordingWriter.made.append(self)

    def add_scalar(self, key: str, value: float, step: int) -> None:
        self.scalars.append((key, value, step))

    def add_text(self, key: str, text: str) -> None:
        self.texts.append(key)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def fake_tensorboard(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.utils.tensorboard`` whose SummaryWriter records (tensorboard itself need
    not be installed)."""
    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = RecordingWriter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", module)
    RecordingWriter.made.clear()


def test_none_writes_nothing_but_metrics_jsonl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tensorboard(monkeypatch)
    set_job(TrackingSettings(backend="none"), Job("rl_train-tiny", "rl_train", config=CONFIG))
    make_trainer(tmp_path, target_env(), steps=2).train()
    assert len(curve(tmp_path)) == 2 and RecordingWriter.made == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "metrics.jsonl"]


def test_tensorboard_stays_the_default_and_gets_every_numeric_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No job named (a trainer outside the workflow) is the schema's default:
    TensorBoard under run_dir/tensorboard, each step's numbers at its step."""
    fake_tensorboard(monkeypatch)
    make_trainer(tmp_path, target_env(), steps=2).train()
    (writer,) = RecordingWriter.made
    assert writer.log_dir == str(tmp_path / "tensorboard")
    expected = [(key, value, m["step"]) for m in curve(tmp_path) for key, value in m.items()
                if isinstance(value, int | float) and key != "step"]  # fmt: skip
    assert sorted(writer.scalars) == sorted(expected) and writer.texts == ["config"]
    assert TrackingSettings().backend == "tensorboard"


def test_an_sft_job_logs_each_step_as_it_trains(tmp_path: Path) -> None:
    """The SFT warm-up and the control log each step's loss and tokens to the job's
    run (the numbers the curve file keeps), and what they were run with."""
    import torch
    from transformers import AutoModelForCausalLM

    from tmax.models.tiny import ensure_tiny_model
    from tmax.rl.sft import run_sft

    model_dir = ensure_tiny_model("tiny-rl", parent=tmp_path / "models")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    examples = [(list(range(10, 20)), [0] * 5 + [1] * 5), (list(range(30, 36)), [0, 0, 1, 1, 1, 1])]
    set_workflow_job(CONFIG, "sft_warmup", {"model": "tiny"})
    tracker = job_tracker(tmp_path / "sft")
    tracker.log_config({"sft_steps": 4})
    steps = run_sft(model, examples, steps=4, learning_rate=1e-3, batch_size=2, tracker=tracker)
    tracker.close()
    run = wandb_records(tmp_path / "sft")
    assert run["run"].display_name == "sft_warmup-tiny" and run["run"].job_type == "sft_warmup"
    assert sorted(run["history"]) == [1, 2, 3, 4]
    spent = 0
    for entry in steps:
        logged = run["history"][entry["step"]]
        spent += entry["tokens"]
        assert logged["loss"] == pytest.approx(entry["loss"])
        assert (logged["tokens"], logged["tokens_total"]) == (entry["tokens"], spent)
    assert run["config"]["sft_steps"] == 4 and run["config"]["seed"] == 3


def test_the_sft_jobs_name_their_run(root: Path) -> None:
    """Each job whose script trains or measures opens its run under the job's name."""
    for script in ("rl_train", "sft_warmup", "sft_control", "eval_metrics"):
        text = (root / "scripts" / f"{script}.py").read_text()
        assert "set_workflow_job(snakemake.config, snakemake.rule" in text, script


def test_an_evaluations_summary_numbers_reach_the_runs_summary(tmp_path: Path) -> None:
    metrics = {"groups": [{
        "model": "m", "benchmark": "tb-lite", "harness": "tmax", "pass_at_1_mean": 40.0,
        "pass_at_1_std": 5.0, "pass_at_k": {"1": 40.0, "2": 55.0}, "n_tasks": 10,
        "n_runs": 2, "n_trials": 20, "n_infra_failures": 1, "mean_input_tokens": None,
        "mean_output_tokens": 12.5,
    }]}  # fmt: skip
    tracked = tracked_metrics(metrics)
    assert tracked == {"eval/pass@1": 40.0, "eval/pass@1_std": 5.0, "eval/pass@2": 55.0,
                       "eval/n_tasks": 10, "eval/n_runs": 2, "eval/n_trials": 20,
                       "eval/n_infra_failures": 1, "eval/mean_output_tokens": 12.5}  # fmt: skip
    set_workflow_job(CONFIG, "eval_metrics", {"eval_model": "m", "benchmark": "tb-lite"})
    tracker = job_tracker(tmp_path)
    tracker.log(tracked)
    tracker.close()
    run = wandb_records(tmp_path)
    assert run["run"].display_name == "eval_metrics-m-tb-lite" and run["history"] == {}
    assert {key: run["summary"][key] for key in tracked} == tracked
    assert run["config"]["seed"] == 3


def test_the_group_is_the_workflows_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_ID_ENV, "20261207-120000-abcdef")
    assert Job("j", "rule").group == "20261207-120000-abcdef"
    assert job_name("evaluate", {"model": "m", "run": "2"}) == "evaluate-m-2"


def test_wandb_chosen_but_missing_names_the_key_and_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb fails
    with pytest.raises(ImportError, match=r"tracking\.backend is wandb.*pip install"):
        set_workflow_job(CONFIG, "rl_train", {"model": "tiny"})


def test_no_rules_params_carry_tracking(root: Path) -> None:
    """The jobs read ``tracking`` when they run (the scripts' set_workflow_job): no
    rule's params, and no rl recipe (the rerun trigger of training), carry it."""
    from tmax.config import load_config
    from tmax.rl.recipe import model_rl, rl_recipe

    for rules in [*(root / "rules").glob("*.smk"), root / "Snakefile"]:
        assert 'config["tracking"]' not in rules.read_text(), rules.name
    config = load_config(root / "config.yaml")
    for model in config["models"]:
        assert "tracking" not in json.dumps(rl_recipe(model_rl(config, model["name"])))
    for script in ("rl_train.py", "eval_metrics.py"):
        assert "set_workflow_job(snakemake.config" in (root / "scripts" / script).read_text()
