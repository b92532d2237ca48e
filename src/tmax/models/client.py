"""Chat models as the harnesses see them: one ``complete`` call per agent turn.

``OpenAIChatModel`` talks to any OpenAI-compatible endpoint (``vllm serve`` on GPUs,
``transformers serve`` on CPU, a hosted API) through the official ``openai`` client,
with native tool calls, retries with backoff, and usage accounting. ``ScriptedModel``
replays fixed answers, so harness tests run without any model.

Errors are split the way the metrics need them: ``ModelError`` is an infrastructure
failure (the endpoint kept failing), ``ContextLengthExceeded`` is the agent's own
doing (its context outgrew the model) and counts as a wrong answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tmax.models.toolcalls import ToolCall, parse_completion

log = logging.getLogger("tmax.models")

Message = dict[str, Any]


class ModelError(RuntimeError):
    """The endpoint could not produce an answer (after retries): an infrastructure failure."""


class ContextLengthExceeded(RuntimeError):
    """The request no longer fits the model's context: the episode ends, reward 0."""


@dataclass(frozen=True)
class Completion:
    """One model answer, with what it cost."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_sec: float = 0.0
    # For RL rollouts (engines that return them): the sampled ids and their log-probs.
    prompt_token_ids: tuple[int, ...] | None = None
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None

    def assistant_message(self, keep_reasoning: bool) -> Message:
        """The assistant turn as it goes back into the conversation.

        With ``keep_reasoning`` (the paper's "interleaved thinking") the turn's
        reasoning is sent back as ``reasoning_content``, which Qwen-style chat templates
        render inside ``<think>``; without it, earlier reasoning is dropped.
        """
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        if keep_reasoning and self.reasoning:
            message["reasoning_content"] = self.reasoning
        return message


@dataclass
class Usage:
    """Running totals over one episode (the trial's ``agent_result``)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_time_sec: float = 0.0
    retries: int = 0

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.model_time_sec += completion.latency_sec


class ChatModel(Protocol):
    """What a harness needs from a model: one chat completion per turn."""

    name: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        """One answer. ``temperature`` 0 is greedy, None the endpoint's default;
        ``top_p`` None is the endpoint's default; ``seed`` makes a sampled answer
        reproducible where the engine honours it (vLLM, transformers serve)."""
        ...


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter: ``initial · 2^attempt``, capped, ``attempts`` tries."""

    attempts: int = 5
    initial_sec: float = 1.0
    max_sec: float = 30.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_sec, self.initial_sec * 2**attempt)
        return base * (0.5 + random.random() / 2)


def sampling_fields(
    temperature: float | None, top_p: float | None, seed: int | None
) -> dict[str, Any]:
    """The request fields that decide how an answer is sampled: only those given, so an
    unset one is the endpoint's default."""
    fields: dict[str, Any] = {}
    if temperature is not None:
        fields["temperature"] = temperature
    if top_p is not None:
        fields["top_p"] = top_p
    if seed is not None:
        fields["seed"] = seed
    return fields


def derive_seed(seed: int, *parts: int | str) -> int:
    """A 31-bit seed for one part of a seeded run (a run, a trial, a turn, a sample)."""
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


class SeededModel:
    """One episode's view of a shared :class:`ChatModel`: the episode's n-th call asks
    for seed ``derive_seed(seed, n)``, so a rerun of the episode asks for the same
    samples and two episodes (runs, tasks) for different ones. Temperature and top_p
    are the harness's, passed through."""

    def __init__(self, model: ChatModel, seed: int) -> None:
        self.model = model
        self.name = model.name
        self.seed = seed
        self.calls = 0

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        if seed is None:
            seed = derive_seed(self.seed, self.calls)
        self.calls += 1
        return self.model.complete(
            messages, tools=tools, max_tokens=max_tokens, temperature=temperature,
            top_p=top_p, seed=seed,
        )  # fmt: skip


ENDPOINT_TIMEOUT_SEC = 600.0
"""How long a request to an endpoint may take when its config entry gives no
``timeout_sec`` (the schema's endpoint has no defaults: they would be written into every
``models[].endpoint``, which is a param of that model's evaluations)."""

_CONTEXT_HINTS = ("context length", "maximum context", "context_length", "too long", "max_tokens")


class OpenAIChatModel:
    """An OpenAI-compatible chat endpoint, through the official ``openai`` client."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout_sec: float = ENDPOINT_TIMEOUT_SEC,
        retry: RetryPolicy | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        import openai  # the client is imported lazily: the sampler stages never need it

        if api_key is None and api_key_env:
            api_key = os.environ.get(api_key_env)
            if api_key is None:
                raise ModelError(f"environment variable {api_key_env} (the API key) is not set")
        self.name = model
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self.extra_body = dict(extra_body or {})
        # Our own retry loop (below) decides what is worth retrying; the client's is off.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout_sec, max_retries=0
        )
        self._openai = openai
        self.retries = 0
        self._lock = threading.Lock()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        request: dict[str, Any] = {
            "model": self.name,
            "messages": list(messages),
            "max_tokens": max_tokens,
        }
        if tools:
            request["tools"] = list(tools)
        request.update(sampling_fields(temperature, top_p, seed))
        if self.extra_body:
            request["extra_body"] = self.extra_body
        return self._with_retries(
            lambda: self._client.chat.completions.create(**request), _completion_from_response
        )

    def _with_retries(
        self, call: Callable[[], Any], read: Callable[[Any, float], Completion]
    ) -> Completion:
        """Make a request, retrying connection errors, 429 and 5xx with backoff."""
        openai = self._openai
        retryable = (
            openai.APIConnectionError,  # includes APITimeoutError
            openai.RateLimitError,
            openai.InternalServerError,
        )
        last: Exception | None = None
        for attempt in range(self.retry.attempts):
            started = time.monotonic()
            try:
                response = call()
            except openai.BadRequestError as error:
                text = str(error).lower()
                if any(hint in text for hint in _CONTEXT_HINTS):
                    raise ContextLengthExceeded(str(error)) from None
                raise ModelError(f"{self.base_url} rejected the request: {error}") from None
            except retryable as error:
                last = error
                with self._lock:
                    self.retries += 1
                if attempt + 1 < self.retry.attempts:
                    delay = self.retry.delay(attempt)
                    log.warning(
                        "model call failed (%s); retry %d in %.1fs", error, attempt + 1, delay
                    )
                    time.sleep(delay)
                continue
            except openai.APIStatusError as error:
                raise ModelError(f"{self.base_url} answered {error.status_code}: {error}") from None
            return read(response, time.monotonic() - started)
        raise ModelError(
            f"{self.base_url} failed {self.retry.attempts} times; last error: {last}"
        ) from None


class CompletionsChatModel(OpenAIChatModel):
    """Chat over the plain completions endpoint, with the chat template applied here.

    For servers whose own tool-call parsing breaks on a malformed call: `transformers
    serve` answers HTTP 500 when a ``<tool_call>`` block is not valid JSON (or is cut
    off by max_tokens), which would count a model's mistake as an infrastructure
    failure. Here the conversation is rendered with the model's own chat template and
    the answer parsed locally (tmax.models.toolcalls), so a malformed call reaches the
    harness as a format error, as with vLLM's parsers. Needs the model's tokenizer
    (a local folder).
    """

    def __init__(self, base_url: str, model: str, tokenizer_dir: str | Path, **kwargs: Any):
        super().__init__(base_url, model, **kwargs)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        prompt = self.tokenizer.apply_chat_template(
            list(messages), tools=list(tools) if tools else None, tokenize=False,
            add_generation_prompt=True,
        )  # fmt: skip
        request: dict[str, Any] = {"model": self.name, "prompt": prompt, "max_tokens": max_tokens}
        request.update(sampling_fields(temperature, top_p, seed))

        def read(response: Any, latency: float) -> Completion:
            if not response.choices:
                raise ModelError("the endpoint returned no choices")
            choice = response.choices[0]
            content, reasoning, calls = parse_completion(choice.text or "")
            usage = response.usage
            return Completion(
                content=content,
                tool_calls=tuple(calls),
                reasoning=reasoning,
                finish_reason="tool_calls" if calls else (choice.finish_reason or "stop"),
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                latency_sec=latency,
            )

        return self._with_retries(lambda: self._client.completions.create(**request), read)


def _completion_from_response(response: Any, latency: float) -> Completion:
    if not response.choices:
        raise ModelError("the endpoint returned no choices")
    choice = response.choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(
            id=call.id or f"call_{index}",
            name=call.function.name,
            arguments=call.function.arguments or "",
        )
        for index, call in enumerate(message.tool_calls or ())
    )
    # Servers name the reasoning field differently (vLLM: reasoning_content or
    # reasoning; transformers serve: reasoning_content); both arrive as extras.
    extras = getattr(message, "model_extra", None) or {}
    reasoning = extras.get("reasoning_content") or extras.get("reasoning")
    usage = response.usage
    return Completion(
        content=message.content or "",
        tool_calls=calls,
        reasoning=reasoning or None,
        finish_reason=choice.finish_reason or "stop",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        latency_sec=latency,
    )


Script = Sequence[Completion | str] | Callable[[Sequence[Message]], Completion | str]


@dataclass
class ScriptedModel:
    """Replays fixed answers in order (or computes them from the conversation).

    A string answer is plain content; a ``Completion`` is used as given. Token counts
    are estimated as characters / 4 so budgets still apply. When the script runs out,
    the model raises ``ModelError`` (a test that over-runs its script fails loudly).
    """

    script: Script
    name: str = "scripted"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        request = {
            "messages": [dict(m) for m in messages],
            "tools": tools,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "seed": seed,
        }
        self.requests.append(request)
        if callable(self.script):
            answer = self.script(messages)
        else:
            index = len(self.requests) - 1
            if index >= len(self.script):
                raise ModelError(f"scripted model has only {len(self.script)} answers")
            answer = self.script[index]
        if isinstance(answer, str):
            answer = Completion(content=answer)
        prompt = sum(len(json.dumps(m)) for m in messages) // 4
        return Completion(
            content=answer.content,
            tool_calls=answer.tool_calls,
            reasoning=answer.reasoning,
            finish_reason=answer.finish_reason,
            prompt_tokens=answer.prompt_tokens or prompt,
            completion_tokens=answer.completion_tokens or max(1, len(answer.content) // 4),
        )


def bash_call(command: str, call_id: str = "call_0", thought: str = "") -> Completion:
    """A completion that calls the ``bash`` tool once (for scripts and tests)."""
    arguments = json.dumps({"command": command})
    return Completion(
        content=thought,
        tool_calls=(ToolCall(call_id, "bash", arguments),),
        finish_reason="tool_calls",
    )
