"""The OpenAI-compatible client: tool calls, usage, retries, and which errors are whose."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tmax.models.client import (
    ContextLengthExceeded,
    ModelError,
    OpenAIChatModel,
    RetryPolicy,
    ScriptedModel,
    SeededModel,
    bash_call,
    derive_seed,
)
from tmax.models.scripted_server import Reply, ScriptedServer, scripted_server, sequence

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "THOUGHT: list the files",
                "reasoning_content": "the task wants a count",
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
}


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> Iterator[ScriptedServer]:
    """A loopback OpenAI-compatible server answering with ``request.param``'s
    (status, body) pairs in order, the last one repeated."""
    replies = [Reply(status=status, body=body) for status, body in request.param]
    with scripted_server(sequence(replies)) as server:
        yield server


FAST = RetryPolicy(attempts=3, initial_sec=0.01, max_sec=0.02)
OVERLOADED = (503, {"error": {"message": "overloaded"}})


@pytest.mark.parametrize("endpoint", [[OVERLOADED, OVERLOADED, (200, ANSWER)]], indirect=True)
def test_transient_errors_are_retried_then_the_answer_is_read(endpoint: ScriptedServer) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    tools = [bash_call("x").tool_calls[0].to_message()]
    completion = model.complete(
        [{"role": "user", "content": "hi"}], tools=tools, max_tokens=64, temperature=0.7
    )
    assert len(endpoint.requests) == 3 and model.retries == 2
    assert completion.tool_calls[0].name == "bash"
    assert completion.tool_calls[0].parsed_arguments() == {"command": "ls"}
    assert completion.reasoning == "the task wants a count"
    assert (completion.prompt_tokens, completion.completion_tokens) == (42, 7)
    sent = endpoint.requests[0]
    assert sent["model"] == "m" and sent["max_tokens"] == 64 and sent["temperature"] == 0.7
    assert sent["tools"] == tools


@pytest.mark.parametrize("endpoint", [[OVERLOADED]], indirect=True)
def test_an_endpoint_that_keeps_failing_is_an_infrastructure_error(
    endpoint: ScriptedServer,
) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    with pytest.raises(ModelError, match="failed 3 times"):
        model.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert len(endpoint.requests) == 3


@pytest.mark.parametrize(
    "endpoint",
    [[(400, {"error": {"message": "This model's maximum context length is 4096 tokens"}})]],
    indirect=True,
)
def test_context_overflow_is_the_agents_problem(endpoint: ScriptedServer) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    with pytest.raises(ContextLengthExceeded):
        model.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert len(endpoint.requests) == 1  # not retried


@pytest.mark.parametrize(
    "endpoint", [[(404, {"error": {"message": "no such model"}})]], indirect=True
)
def test_other_client_errors_are_not_retried(endpoint: ScriptedServer) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    with pytest.raises(ModelError, match="404"):
        model.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert len(endpoint.requests) == 1


def test_a_missing_api_key_variable_is_named() -> None:
    with pytest.raises(ModelError, match="TMAX_TEST_NO_SUCH_KEY"):
        OpenAIChatModel("http://127.0.0.1:9/v1", "m", api_key_env="TMAX_TEST_NO_SUCH_KEY")


def test_scripted_model_replays_and_then_fails_loudly() -> None:
    model = ScriptedModel(["one", bash_call("ls")])
    assert model.complete([], max_tokens=4).content == "one"
    assert model.complete([], max_tokens=4).tool_calls[0].name == "bash"
    with pytest.raises(ModelError, match="only 2 answers"):
        model.complete([], max_tokens=4)


@pytest.mark.parametrize("endpoint", [[(200, ANSWER)]], indirect=True)
def test_the_sampling_settings_reach_the_request_and_unset_ones_stay_out(
    endpoint: ScriptedServer,
) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    hello = [{"role": "user", "content": "hi"}]
    model.complete(hello, max_tokens=8, temperature=0.7, top_p=0.9, seed=11)
    model.complete(hello, max_tokens=8, temperature=0.0)
    model.complete(hello, max_tokens=8)
    sampled, greedy, default = endpoint.requests
    assert (sampled["temperature"], sampled["top_p"], sampled["seed"]) == (0.7, 0.9, 11)
    assert greedy["temperature"] == 0.0 and "seed" not in greedy and "top_p" not in greedy
    assert not {"temperature", "top_p", "seed"} & default.keys()


def test_a_seeded_episode_asks_for_a_seed_of_its_own_at_every_call() -> None:
    def play(seed: int) -> list[int | None]:
        scripted = ScriptedModel(["a", "b", "c"])
        episode = SeededModel(scripted, seed)
        for _ in range(3):
            episode.complete([{"role": "user", "content": "x"}], max_tokens=4, temperature=0.7)
        assert all(r["temperature"] == 0.7 for r in scripted.requests)
        return [r["seed"] for r in scripted.requests]

    first = play(5)
    assert first == [derive_seed(5, n) for n in range(3)]
    assert len(set(first)) == 3  # one per call
    assert play(5) == first  # a rerun asks for the same samples
    assert set(play(6)).isdisjoint(first)  # another episode for others
    assert all(0 <= seed < 2**31 for seed in first)
