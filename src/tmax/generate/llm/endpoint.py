"""Model calls for the generator: cached, bounded in concurrency, and accounted.

Requests go through :class:`tmax.models.client.OpenAIChatModel` (the official
``openai`` client with our backoff on connection errors, timeouts, 429 and 5xx).
Every answer is stored by a hash of (model, messages, parameters) before it is used,
so a crash or a rerun never pays for the same call twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tmax.generate.llm.cache import CallCache, call_key
from tmax.generate.llm.settings import LLMSettings
from tmax.models.client import ChatModel, OpenAIChatModel, RetryPolicy


@dataclass(frozen=True)
class Reply:
    """One answer and what it cost (zero tokens are billed for a cached answer)."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    latency_sec: float
    cached: bool


@dataclass
class UsageTotals:
    """Running totals over a shard or a spec."""

    requests: int = 0
    cached_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_time_sec: float = 0.0
    cost_usd: float = 0.0

    def add(self, reply: Reply, settings: LLMSettings) -> None:
        if reply.cached:
            self.cached_requests += 1
            return
        self.requests += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.model_time_sec += reply.latency_sec
        self.cost_usd += (
            reply.prompt_tokens * settings.cost_per_mtok_input
            + reply.completion_tokens * settings.cost_per_mtok_output
        ) / 1e6

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["model_time_sec"] = round(self.model_time_sec, 3)
        data["cost_usd"] = round(self.cost_usd, 6)
        return data


class GeneratorClient:
    """A chat endpoint behind a cache and a semaphore of ``settings.concurrency``."""

    def __init__(
        self, settings: LLMSettings, cache: CallCache, model: ChatModel | None = None
    ) -> None:
        self.settings = settings
        self.cache = cache
        self._model = model
        self._model_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._totals_lock = threading.Lock()
        self.totals = UsageTotals()

    @property
    def model(self) -> ChatModel:
        """The endpoint client, made on first use: a fully cached rerun needs no key."""
        with self._model_lock:
            if self._model is None:
                settings = self.settings
                self._model = OpenAIChatModel(
                    settings.base_url,
                    settings.model,
                    api_key_env=settings.api_key_env,
                    timeout_sec=settings.timeout_sec,
                    retry=RetryPolicy(
                        attempts=settings.max_retries + 1, initial_sec=settings.backoff_sec
                    ),
                )
            return self._model

    def params(self) -> dict[str, Any]:
        return {"temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}

    def chat(self, messages: Sequence[Mapping[str, Any]]) -> Reply:
        """One chat completion, from the cache when this exact call was made before."""
        key = call_key(self.settings.model, messages, self.params())
        entry = self.cache.get(key)
        if entry is not None:
            reply = Reply(
                str(entry["content"]),
                int(entry.get("prompt_tokens", 0)),
                int(entry.get("completion_tokens", 0)),
                0.0,
                cached=True,
            )
        else:
            started = time.monotonic()
            with self._slots:
                completion = self.model.complete(
                    [dict(m) for m in messages],
                    max_tokens=self.settings.max_tokens,
                    temperature=self.settings.temperature,
                )
            reply = Reply(
                completion.content,
                completion.prompt_tokens,
                completion.completion_tokens,
                time.monotonic() - started,
                cached=False,
            )
            self.cache.put(
                key,
                {
                    "model": self.settings.model,
                    "content": reply.content,
                    "finish_reason": completion.finish_reason,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                },
            )
        with self._totals_lock:
            self.totals.add(reply, self.settings)
        return reply
