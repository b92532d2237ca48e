"""The OpenAI-compatible client: tool calls, usage, retries, and which errors are whose."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tmax.models.client import (
    ContextLengthExceeded,
    ModelError,
    OpenAIChatModel,
    RetryPolicy,
    ScriptedModel,
    bash_call,
)

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


class Endpoint:
    """A loopback HTTP server answering /v1/chat/completions from a list of replies."""

    def __init__(self, replies: list[tuple[int, dict[str, Any]]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                endpoint.requests.append(json.loads(self.rfile.read(length)))
                status, body = endpoint.replies[min(len(endpoint.requests), len(replies)) - 1]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    server = Endpoint(request.param)
    yield server
    server.server.shutdown()


FAST = RetryPolicy(attempts=3, initial_sec=0.01, max_sec=0.02)
OVERLOADED = (503, {"error": {"message": "overloaded"}})


@pytest.mark.parametrize("endpoint", [[OVERLOADED, OVERLOADED, (200, ANSWER)]], indirect=True)
def test_transient_errors_are_retried_then_the_answer_is_read(endpoint: Endpoint) -> None:
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
def test_an_endpoint_that_keeps_failing_is_an_infrastructure_error(endpoint: Endpoint) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    with pytest.raises(ModelError, match="failed 3 times"):
        model.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert len(endpoint.requests) == 3


@pytest.mark.parametrize(
    "endpoint",
    [[(400, {"error": {"message": "This model's maximum context length is 4096 tokens"}})]],
    indirect=True,
)
def test_context_overflow_is_the_agents_problem(endpoint: Endpoint) -> None:
    model = OpenAIChatModel(endpoint.base_url, "m", retry=FAST)
    with pytest.raises(ContextLengthExceeded):
        model.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert len(endpoint.requests) == 1  # not retried


@pytest.mark.parametrize(
    "endpoint", [[(404, {"error": {"message": "no such model"}})]], indirect=True
)
def test_other_client_errors_are_not_retried(endpoint: Endpoint) -> None:
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
