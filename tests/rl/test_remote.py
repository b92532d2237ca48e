"""Engine servers in their own processes, reached over TCP, updated over a gloo weight group
(tmax.rl.remote): what the paper's separate inference nodes do, on one CPU machine."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from tmax.rl.engine import TransformersEngine
from tmax.rl.remote import (
    Address,
    EngineServer,
    EngineServerError,
    RemoteEngine,
    TensorSpec,
    address_file,
    buckets,
    gpu_slice,
    local_servers,
    prepare_server_dir,
    read_authkey,
    wait_for_servers,
    weights_digest,
)

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def running_servers(directory: Path, model_dir: Path, count: int) -> Iterator[list[Address]]:
    settings = {"model_dir": str(model_dir), "engine": "transformers", "threads": 1}
    with local_servers(directory, settings, count, timeout_s=180) as addresses:
        yield addresses


@pytest.fixture(scope="module")
def servers(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two engine servers over the tiny model."""
    directory = tmp_path_factory.mktemp("engines")
    with running_servers(directory, model_dir, 2):
        yield directory


@pytest.fixture(scope="module")
def remote(servers: Path) -> Iterator[RemoteEngine]:
    engine = RemoteEngine(wait_for_servers(servers, 2), read_authkey(servers), host="127.0.0.1")
    yield engine


def _prompts(tokenizer: Any) -> list[list[int]]:
    texts = ["List the files in /tmp.", "Count lines in a.txt.", "Print the date."]
    return [tokenizer(t)["input_ids"] for t in texts]


def test_remote_samples_equal_the_local_engine_with_the_same_weights(
    remote: RemoteEngine, engine: TransformersEngine, tokenizer: Any, one_thread: None
) -> None:
    prompts = _prompts(tokenizer)
    options = {"max_tokens": 12, "temperature": 1.0, "stop_token_ids": [], "seed": 5}
    here = [engine.generate([p], **{**options, "seed": 5 + i}) for i, p in enumerate(prompts)]
    there = remote.generate(prompts, **options)
    assert [g.token_ids for g in there] == [g[0].token_ids for g in here]
    for far, [near] in zip(there, here, strict=True):
        assert far.logprobs == pytest.approx(near.logprobs, abs=1e-5)
    assert remote.policy_version == 0


def test_concurrent_calls_spread_over_the_servers(remote: RemoteEngine, tokenizer: Any) -> None:
    before = [s["requests"] for s in remote.status()]
    prompt = _prompts(tokenizer)[0]
    barrier = threading.Barrier(6)

    def call(seed: int) -> None:
        barrier.wait()
        remote.generate([prompt], max_tokens=24, temperature=1.0, stop_token_ids=[], seed=seed)

    threads = [threading.Thread(target=call, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    served = [s["requests"] - b for s, b in zip(remote.status(), before, strict=True)]
    assert sum(served) == 6
    assert min(served) >= 1, served


def test_pushed_weights_arrive_exactly_and_change_samples(
    remote: RemoteEngine, model_dir: Path, tokenizer: Any
) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    prompt = _prompts(tokenizer)[1]
    options = {"max_tokens": 16, "temperature": 1.0, "stop_token_ids": [], "seed": 11}
    [before] = remote.generate([prompt], **options)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    weights = {k: v for k, v in model.state_dict().items()}
    remote.update_weights(weights, version=3)
    assert remote.policy_version == 3
    statuses = remote.status(digest=True)
    assert {s["policy_version"] for s in statuses} == {3}
    assert {s["digest"] for s in statuses} == {weights_digest(model.state_dict())}
    [after] = remote.generate([prompt], **options)
    assert after.token_ids != before.token_ids
    # The weight group is formed once; a second push reuses it.
    remote.update_weights(weights, version=4)
    assert {s["policy_version"] for s in remote.status()} == {4}


def test_a_server_error_names_the_server(remote: RemoteEngine, tokenizer: Any) -> None:
    prompt = _prompts(tokenizer)[0]
    vocabulary = 10**9  # an id the embedding does not have
    with pytest.raises(EngineServerError, match=r"engine server [01] \(.+\) failed generate"):
        remote.generate([[*prompt, vocabulary]], max_tokens=2, temperature=1.0,
                        stop_token_ids=[])  # fmt: skip
    # The failure leaves the servers serving.
    remote.generate([prompt], max_tokens=2, temperature=1.0, stop_token_ids=[])


def test_requests_are_checked_before_they_travel(remote: RemoteEngine) -> None:
    with pytest.raises(ValueError, match="prompt 0 is empty"):
        remote.generate([[]], max_tokens=2, temperature=1.0, stop_token_ids=[])


def test_wrong_secret_is_refused(servers: Path) -> None:
    with pytest.raises(EngineServerError, match="cannot reach engine server 0"):
        RemoteEngine(wait_for_servers(servers, 2), b"not the secret")


def test_close_stops_the_servers(
    model_dir: Path, tokenizer: Any, tmp_path: Path, one_thread: None
) -> None:
    local = TransformersEngine(model_dir, tokenizer)
    server = EngineServer(local, authkey=b"k" * 32, bind="127.0.0.1", advertise="127.0.0.1")
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    remote = RemoteEngine([server.address], b"k" * 32, host="127.0.0.1")
    remote.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    with pytest.raises(EngineServerError, match="cannot reach"):
        RemoteEngine([server.address], b"k" * 32)


def test_a_dead_server_is_named(tmp_path: Path) -> None:
    settings = {"model_dir": str(tmp_path / "missing"), "engine": "transformers"}
    servers = local_servers(tmp_path / "engines", settings, 1, timeout_s=120)
    with pytest.raises(EngineServerError, match=r"failed before they were ready: exit statuses"):
        servers.__enter__()
    assert "missing" in (tmp_path / "engines/engine0.log").read_text()


def test_waiting_times_out_naming_the_missing_servers(tmp_path: Path) -> None:
    prepare_server_dir(tmp_path, {"engine": "transformers"})
    address_file(tmp_path, 0).write_text('{"host": "h", "port": 1}')
    with pytest.raises(EngineServerError, match=r"engine server\(s\) \[1\] did not start"):
        wait_for_servers(tmp_path, 2, timeout_s=0)


def test_a_new_server_dir_drops_stale_addresses_and_keeps_its_secret_private(
    tmp_path: Path,
) -> None:
    address_file(tmp_path, 3).write_text("{}")
    prepare_server_dir(tmp_path, {"engine": "transformers"})
    first = read_authkey(tmp_path)
    assert not address_file(tmp_path, 3).exists()
    assert (tmp_path / "authkey").stat().st_mode & 0o077 == 0
    prepare_server_dir(tmp_path, {"engine": "transformers"})
    assert read_authkey(tmp_path) != first and len(first) == 32


def test_buckets_keep_one_dtype_and_a_size_limit() -> None:
    specs = [
        TensorSpec("a", (4,), "float32"),  # 16 bytes
        TensorSpec("b", (2,), "bfloat16"),  # 4 bytes
        TensorSpec("c", (4,), "float32"),
        TensorSpec("d", (10,), "float32"),  # 40 bytes: bigger than the limit, alone
        TensorSpec("e", (1,), "float32"),
    ]
    assert buckets(specs, limit=32) == [[0, 2], [1], [3], [4]]
    assert buckets(specs) == [[0, 2, 3, 4], [1]]


def test_gpu_slices_per_server() -> None:
    assert gpu_slice(1, 2, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == "6,7"
    assert gpu_slice(2, 1, {"SLURM_GPUS_ON_NODE": "8"}) == "2"
    assert gpu_slice(0, 1, {}) is None
    with pytest.raises(RuntimeError, match=r"lower rl\.engines_per_node"):
        gpu_slice(2, 2, {"CUDA_VISIBLE_DEVICES": "0,1,2"})


def test_training_through_engine_servers_equals_the_in_process_engine(
    tmp_path: Path, one_thread: None
) -> None:
    """The known-answer learning run of test_trainer, once with the engine in process and
    once with two engine servers fed over the weight group: same seeds and bit-identical
    weights after every push, so the same samples and rewards at every step."""
    from tests.rl.test_trainer import make_trainer, target_env, tiny_model

    def run(folder: Path, engine: Any = None) -> list[dict[str, Any]]:
        trainer = make_trainer(folder, target_env(), steps=12)
        if engine is not None:
            trainer.engine = engine
        trainer.train()
        lines = (folder / "metrics.jsonl").read_text().splitlines()
        keep = ("reward_mean", "loss", "masked_fraction", "policy_version", "groups_trained")
        return [{k: json.loads(line).get(k) for k in keep} for line in lines]

    local = run(tmp_path / "local")
    start = tmp_path / "start"
    tiny_model().save_pretrained(start)  # make_trainer's model, seeded the same
    with running_servers(tmp_path / "engines", start, 2) as addresses:
        remote = RemoteEngine(addresses, read_authkey(tmp_path / "engines"), host="127.0.0.1")
        far = run(tmp_path / "remote", remote)
        versions = {s["policy_version"] for s in remote.status()}
        remote.close()
    # Same samples and rewards; the loss (≈ 0: centred advantages) agrees to rounding.
    exact = [{k: v for k, v in m.items() if k != "loss"} for m in far]
    assert exact == [{k: v for k, v in m.items() if k != "loss"} for m in local]
    for mine, theirs in zip(far, local, strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], abs=1e-6)
    assert versions == {far[-1]["policy_version"]} and versions != {0}
    assert local[-1]["reward_mean"] > local[0]["reward_mean"]
