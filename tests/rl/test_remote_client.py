"""The engine client's handling of one vLLM answer it must not pass on: a sample whose
log-prob is not finite (vLLM answers 400, "Out of range float values ..."). A small HTTP
server in a thread plays vLLM's side of ``/v1/completions``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tmax.rl.engines.remote import (
    NONFINITE_ANSWER,
    NONFINITE_RETRIES,
    EngineClient,
    EngineServerError,
)


class Completions(BaseHTTPRequestHandler):
    """Answers the first ``failures`` requests as vLLM does for a non-finite log-prob,
    then with one finite sample; records each request's seed."""

    failures = 0
    seeds: ClassVar[list[int | None]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seeds.append(body["seed"])
        if len(type(self).seeds) <= type(self).failures:
            self.answer(400, {"error": {"message": f"{NONFINITE_ANSWER}: -inf", "code": 400}})
        else:
            choice = {"token_ids": [5, 6], "logprobs": {"token_logprobs": [-0.5, -1.0]},
                      "finish_reason": "stop"}  # fmt: skip
            self.answer(200, {"choices": [choice]})

    def answer(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Completions]]]:
    handler = type("Handler", (Completions,), {"seeds": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def complete(url: str) -> object:
    client = EngineClient(url, key="k")
    try:
        return client.complete([1, 2, 3], max_tokens=4, temperature=1.0, stop_token_ids=[6],
                               seed=7)  # fmt: skip
    finally:
        client.close()


def test_a_non_finite_log_prob_is_drawn_again_with_another_seed(
    server: tuple[str, type[Completions]],
) -> None:
    url, handler = server
    handler.failures = NONFINITE_RETRIES
    generation = complete(url)
    assert generation.token_ids == [5, 6] and generation.logprobs == [-0.5, -1.0]
    seeds = handler.seeds
    assert seeds[0] == 7 and len(set(seeds)) == len(seeds) == NONFINITE_RETRIES + 1


def test_non_finite_log_probs_every_time_fail_naming_them(
    server: tuple[str, type[Completions]],
) -> None:
    url, handler = server
    handler.failures = NONFINITE_RETRIES + 1
    with pytest.raises(EngineServerError, match="non-finite log-prob"):
        complete(url)
    assert len(handler.seeds) == NONFINITE_RETRIES + 1


def test_another_bad_request_is_not_retried(server: tuple[str, type[Completions]]) -> None:
    url, handler = server
    handler.failures = 10

    def reject(self: Completions) -> None:
        type(self).seeds.append(None)
        self.answer(400, {"error": {"message": "prompt too long", "code": 400}})

    handler.do_POST = reject  # type: ignore[method-assign]
    with pytest.raises(EngineServerError, match="prompt too long"):
        complete(url)
    assert len(handler.seeds) == 1
