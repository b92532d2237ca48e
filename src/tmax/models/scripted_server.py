"""A scripted OpenAI-compatible chat server on loopback, for tests and benchmarks.

It speaks just enough of ``POST /v1/chat/completions`` for the ``openai`` client:
each request is handed to a *responder* that returns a :class:`Reply` (status, body
or answer text, and a delay before answering). Exact sequences (a 429, then a
success; a reply slower than the client's timeout) are one ``sequence([...])``
away, and every request is recorded, so a test can assert how many were made.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer: ``content`` makes a normal completion, otherwise ``body``
    is sent as is with ``status`` (e.g. 429 with an error object)."""

    content: str | None = None
    status: int = 200
    body: dict[str, Any] | None = None
    delay_sec: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 5


Responder = Callable[[dict[str, Any]], Reply]


def error(status: int, message: str = "scripted error", delay_sec: float = 0.0) -> Reply:
    return Reply(status=status, body={"error": {"message": message}}, delay_sec=delay_sec)


def sequence(replies: Sequence[Reply | str]) -> Responder:
    """Answer requests with ``replies`` in order (the last one repeats)."""
    items = [Reply(content=r) if isinstance(r, str) else r for r in replies]
    counter = iter(range(10**9))
    lock = threading.Lock()

    def respond(_: dict[str, Any]) -> Reply:
        with lock:
            index = next(counter)
        return items[min(index, len(items) - 1)]

    return respond


def completion_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": reply.content},
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


class ScriptedServer:
    """The server; ``requests`` holds every request body received, in arrival order."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client reuses connections
            # Headers and body go out as two writes; with Nagle on, the body would wait
            # for the client's delayed ACK (~40 ms) and skew every timing.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(request)
                reply = server.responder(request)
                if reply.delay_sec:
                    time.sleep(reply.delay_sec)
                body = reply.body if reply.content is None else completion_body(request, reply)
                data = json.dumps(body or {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): nothing to answer

            def log_message(self, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@contextmanager
def scripted_server(responder: Responder) -> Iterator[ScriptedServer]:
    """Run a :class:`ScriptedServer` for the duration of a ``with`` block."""
    server = ScriptedServer(responder).start()
    try:
        yield server
    finally:
        server.stop()
