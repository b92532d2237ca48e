"""RL episodes: the tmax harness in a task's sandbox, token in / token out (paper §4).

The trainer must score exactly the tokens the engine sampled, so an episode is kept as
one token sequence rather than re-rendered from messages at the end:

    turn 1 prompt  = chat_template(system, user, tools) + generation prompt
    turn k prompt  = turn k−1 prompt + turn k−1 sampled ids
                     + ids of what the template adds after that assistant turn
                       (tool results, user notes, the next generation prompt)
    episode        = last prompt + last sampled ids
    loss_mask      = 1 on sampled ids, 0 on everything the template or sandbox wrote
    behaviour_logprobs = log μ of each sampled id (0.0 where the mask is 0)

``TokenChatModel`` is a :class:`~tmax.models.client.ChatModel`, so the very harness loop
used for evaluation (``run_agent``) plays RL episodes, with the paper's budgets from
``HarnessSettings``: 64 tool calls, 16,384 tokens per turn, 65,536 in all.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmax.harness import HarnessSettings, make_harness, run_agent
from tmax.models.client import Completion, ContextLengthExceeded, Message, derive_seed
from tmax.models.toolcalls import parse_completion
from tmax.rl.engines.local import Engine
from tmax.sandbox import BackendName
from tmax.sandbox.base import NodeError
from tmax.sandbox.episode import sandbox_for_task
from tmax.tasks import read_task

log = logging.getLogger("tmax.rl.episodes.rollout")

EPISODE_ATTEMPTS = 2
"""An episode that fails (sandbox, engine or verifier error) is played this many times."""

DEFAULT_TEMPERATURE = 1.0
"""The paper's rollout temperature, used when the harness asks for the server default."""

_END_TOKENS = ("<|im_end|>", "<|endoftext|>")


class EpisodeFailed(RuntimeError):
    """An episode ended by an error (its sandbox, the engine, the verifier) instead of
    by the harness; ``sample`` holds what the policy had sampled by then, reward 0."""

    def __init__(self, reason: str, sample: Sample) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sample = sample


class EpisodeCancelled(Exception):
    """The run is stopping (SIGTERM): the episode was abandoned, not played out. It is
    neither retried nor scored; its group is generated again after the resume."""


class TemplateNotIncremental(RuntimeError):
    """The chat template re-renders earlier turns differently once new messages follow,
    so a conversation cannot be extended token by token."""


def default_stop_token_ids(tokenizer: Any) -> list[int]:
    """The tokenizer's end-of-sequence token and ChatML's end tokens, where present."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids += [vocab[token] for token in _END_TOKENS if token in vocab and vocab[token] not in ids]
    return ids


# --------------------------------------------------------------------------------------------
# The chat model over an engine


class TokenChatModel:
    """A ChatModel that samples from an :class:`Engine` and records the episode's tokens.

    One instance plays one episode: each ``complete`` call must extend the previous
    conversation by the assistant turn it produced plus new messages (what every harness
    does). ``max_total_tokens`` caps prompt + answer (the paper's 65,536): the answer is
    shortened to fit and a prompt that no longer fits raises ``ContextLengthExceeded``.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        *,
        name: str = "policy",
        stop_token_ids: Sequence[int] | None = None,
        max_total_tokens: int | None = None,
        seed: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """``cancel``, once set, makes the next turn raise :class:`EpisodeCancelled`."""
        self.engine = engine
        self.cancel = cancel
        self.tokenizer = tokenizer
        self.name = name
        self.stop_token_ids = list(stop_token_ids or default_stop_token_ids(tokenizer))
        self.max_total_tokens = max_total_tokens
        self.seed = seed
        self.template_kwargs = dict(chat_template_kwargs or {})
        # ChatML closes every turn with <|im_end|>, whatever the tokenizer's eos is.
        self.end_of_turn = (
            "<|im_end|>" if "<|im_end|>" in tokenizer.get_vocab() else tokenizer.eos_token
        )
        self.end_of_turn_id = tokenizer.convert_tokens_to_ids(self.end_of_turn)
        self.turns = 0
        self._messages: list[Message] = []
        self._tools: list[Any] | None = None
        self._tokens: list[int] = []
        self._mask: list[int] = []
        self._logprobs: list[float] = []
        self._turn_closed = True

    # -- the episode so far

    def episode_tokens(self) -> tuple[list[int], list[int], list[float]]:
        """(token ids, loss mask, behaviour log-probs) of the whole episode, aligned."""
        return list(self._tokens), list(self._mask), list(self._logprobs)

    # -- ChatModel

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
        """The next turn, sampled from the whole distribution at ``temperature``: the
        behaviour log-probs the loss needs are those of that distribution, so a
        ``top_p`` below 1 is refused. The episode's own seed (``seed`` at construction)
        decides each turn's; a per-call ``seed`` is not used."""
        if top_p is not None and top_p < 1.0:
            raise ValueError(f"RL rollouts sample the whole distribution; top_p {top_p} < 1")
        if self.cancel is not None and self.cancel.is_set():
            raise EpisodeCancelled("the run is stopping")
        started = time.monotonic()
        messages = copy.deepcopy(list(messages))
        tools_list = copy.deepcopy(list(tools)) if tools else None
        if self.turns == 0:
            added = self._render_ids(messages, tools_list)
        else:
            added = self._next_ids(messages, tools_list)
        prompt = self._tokens + added
        if self.max_total_tokens is not None:
            max_tokens = min(max_tokens, self.max_total_tokens - len(prompt))
        if max_tokens < 1:
            raise ContextLengthExceeded(
                f"the prompt has {len(prompt)} tokens; no room is left for an answer "
                f"(total budget {self.max_total_tokens})"
            )
        seed = None if self.seed is None else derive_seed(self.seed, self.turns)
        temperature = DEFAULT_TEMPERATURE if temperature is None else temperature
        [generation] = self.engine.generate(
            [prompt],
            max_tokens=max_tokens,
            temperature=temperature,
            stop_token_ids=self.stop_token_ids,
            seed=seed,
        )
        sampled = list(generation.token_ids)
        # Commit the turn: template/tool tokens are masked, sampled tokens are trained on.
        self._tokens = prompt + sampled
        self._mask += [0] * len(added) + [1] * len(sampled)
        self._logprobs += [0.0] * len(added) + [float(lp) for lp in generation.logprobs]
        self._messages, self._tools = messages, tools_list
        self._turn_closed = bool(sampled) and sampled[-1] == self.end_of_turn_id
        text_ids = sampled[:-1] if generation.finish_reason == "stop" else sampled
        text = self.tokenizer.decode(text_ids, skip_special_tokens=False)
        content, reasoning, calls = parse_completion(text, f"call_{self.turns}")
        self.turns += 1
        if generation.finish_reason == "length":
            finish = "length"
        else:
            finish = "tool_calls" if calls else "stop"
        return Completion(
            content=content,
            tool_calls=tuple(calls),
            reasoning=reasoning,
            finish_reason=finish,
            prompt_tokens=len(prompt),
            completion_tokens=len(sampled),
            latency_sec=time.monotonic() - started,
            prompt_token_ids=tuple(prompt),
            token_ids=tuple(sampled),
            logprobs=tuple(generation.logprobs),
        )

    # -- rendering

    def _render(self, messages: list[Message], tools: list[Any] | None, generation: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=generation,
            tokenize=False,
            **self.template_kwargs,
        )
        return str(text)

    def _render_ids(self, messages: list[Message], tools: list[Any] | None) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            **self.template_kwargs,
        )
        return list(encoded["input_ids"])

    def _next_ids(self, messages: list[Message], tools: list[Any] | None) -> list[int]:
        """The ids the template adds after the last sampled answer.

        That is the template's text after the end-of-turn token of the last assistant
        turn (the end-of-turn token itself too, when the answer was cut off by
        ``max_tokens``), up to and including the next generation prompt.
        """
        previous = self._messages
        answer = len(previous)
        if (
            len(messages) <= answer
            or messages[:answer] != previous
            or messages[answer].get("role") != "assistant"
        ):
            raise ValueError(
                "a TokenChatModel conversation must grow by appending: the previous "
                "messages, then the assistant answer, then new messages (one model per episode)"
            )
        if tools != self._tools:
            raise ValueError("the tools changed in the middle of an episode")
        try:
            delta = self._delta_text(messages, tools, answer)
        except TemplateNotIncremental:
            # Some templates (Qwen3's own) drop reasoning from turns before the latest user
            # message. Only the text after the answer matters here, so render without it.
            delta = self._delta_text(_without_reasoning(messages), tools, answer)
        return list(self.tokenizer.encode(delta, add_special_tokens=False))

    def _delta_text(self, messages: list[Message], tools: list[Any] | None, answer: int) -> str:
        through = self._render(messages[: answer + 1], tools, generation=False)
        full = self._render(messages, tools, generation=True)
        if not full.startswith(through):
            raise TemplateNotIncremental(
                "the chat template renders the conversation up to the last answer "
                "differently once new messages follow; token-in/token-out rollouts need "
                "a template whose earlier turns do not change"
            )
        end = through.rfind(self.end_of_turn)
        if end < 0:
            raise TemplateNotIncremental(
                f"the chat template does not end assistant turns with {self.end_of_turn!r}"
            )
        tail = through[end:] if not self._turn_closed else through[end + len(self.end_of_turn) :]
        return tail + full[len(through) :]


def _without_reasoning(messages: list[Message]) -> list[Message]:
    stripped = []
    for message in messages:
        if message.get("role") == "assistant" and "reasoning_content" in message:
            message = {k: v for k, v in message.items() if k != "reasoning_content"}
        stripped.append(message)
    return stripped


# --------------------------------------------------------------------------------------------
# Episodes


@dataclass
class Sample:
    """One scored episode, ready for the trainer."""

    task_id: str
    tokens: list[int]
    loss_mask: list[int]
    """1 on tokens the policy sampled, 0 on prompt, template and tool-output tokens."""
    behaviour_logprobs: list[float]
    """log μ of each sampled token under the engine (0.0 where ``loss_mask`` is 0)."""
    reward: float
    policy_version: int
    """The engine's weights version when the episode started."""
    exit_status: str
    tool_calls: int
    turns: int
    response_tokens: int
    """Tokens the policy sampled (the sum of ``loss_mask``)."""
    failure: str = ""
    """Why the episode failed: the error of its last attempt (``exit_status`` "failed"),
    or what the agent exhausted when it broke its own sandbox ("sandbox_died")."""


def rollout(
    task_dir: Path,
    engine: Engine,
    tokenizer: Any,
    settings: HarnessSettings,
    *,
    backend: BackendName,
    run_id: str | None = None,
    seed: int | None = None,
    cancel: threading.Event | None = None,
) -> Sample:
    """Play one episode of the tmax harness on a task and score it with its verifier.

    The reward is the verifier's (0 when a command exhausted the sandbox's memory, as in
    the paper's RL environment). ``settings.temperature`` is the sampling temperature
    (None: 1.0); the trainer must score with the same one. An error of the sandbox, the
    engine or the verifier raises :class:`EpisodeFailed` with the episode so far
    (reward 0): the caller decides whether to retry (:func:`rollout_group`). Once
    ``cancel`` is set the episode stops at its next turn with :class:`EpisodeCancelled`
    (its sandbox is removed as usual).
    """
    task_dir = Path(task_dir)
    task = read_task(task_dir)
    policy_version = engine.policy_version
    model = TokenChatModel(engine, tokenizer, max_total_tokens=settings.max_total_tokens, seed=seed,
                           cancel=cancel)  # fmt: skip
    harness = make_harness("tmax", settings)
    turns = tool_calls = 0
    try:
        with sandbox_for_task(task_dir, backend, run_id=run_id) as box:
            run = run_agent(
                harness,
                model,
                box,
                task.instruction,
                timeout_sec=task.config.get("agent", "timeout_sec"),
            )
            turns, tool_calls = run.turns, run.tool_calls
            failure = ""
            if run.exit_status == "out_of_memory":
                reward = 0.0
            elif run.exit_status == "sandbox_died":
                # a failed attempt, not played again; a death the agent did not cause
                # raises SandboxDied (EpisodeFailed: played again)
                reward, failure = 0.0, box.agent_death(run.detail)
            else:
                reward = box.verify(task_dir / "tests").reward
    except NodeError:
        raise  # this machine cannot run sandboxes: no episode here can succeed
    except Exception as error:
        if cancel is not None and cancel.is_set():
            raise EpisodeCancelled(f"the run is stopping ({type(error).__name__})") from error
        reason = f"{type(error).__name__}: {error}"
        tokens, loss_mask, behaviour = model.episode_tokens()
        if len(tokens) < 2:  # nothing sampled yet: a placeholder the trainer can collate
            tokens, loss_mask, behaviour = [0, 0], [0, 0], [0.0, 0.0]
        partial = Sample(
            task.name, tokens, loss_mask, behaviour, 0.0, policy_version, "failed",
            tool_calls, turns, sum(loss_mask), failure=reason[:2000],
        )  # fmt: skip
        raise EpisodeFailed(reason, partial) from error
    tokens, loss_mask, behaviour = model.episode_tokens()
    log.debug(
        "%s: %s after %d turns, %d tool calls, %d tokens; reward %.2f",
        task.name,
        run.exit_status,
        run.turns,
        run.tool_calls,
        len(tokens),
        reward,
    )
    return Sample(
        task_id=task.name,
        tokens=tokens,
        loss_mask=loss_mask,
        behaviour_logprobs=behaviour,
        reward=reward,
        policy_version=policy_version,
        exit_status=run.exit_status,
        tool_calls=run.tool_calls,
        turns=run.turns,
        response_tokens=sum(loss_mask),
        failure=failure[:2000],
    )


def rollout_group(
    task_dir: Path,
    engine: Engine,
    tokenizer: Any,
    settings: HarnessSettings,
    group_size: int,
    *,
    workers: int = 1,
    backend: BackendName,
    run_id: str | None = None,
    seed: int | None = None,
    cancel: threading.Event | None = None,
) -> list[Sample]:
    """``group_size`` episodes of one task (a GRPO group), up to ``workers`` at a time.

    Each episode has its own sandbox and seed; the engine is shared. A failed episode
    (:class:`EpisodeFailed`) is played again once, in a fresh sandbox; failing again, it
    counts as a failed episode: reward 0, with the tokens it had sampled (trained on
    with its advantage, so a policy that breaks its sandbox gains nothing by it), and
    the run goes on. A failure is never left out of the group: that would let a policy
    escape a bad reward by crashing. ``cancel`` (the run is stopping) abandons the
    whole group with :class:`EpisodeCancelled`.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be at least 1, got {group_size}")
    name = Path(task_dir).name

    def one(index: int) -> Sample:
        sample_seed = None if seed is None else derive_seed(seed, index)
        for attempt in range(1, EPISODE_ATTEMPTS + 1):
            if cancel is not None and cancel.is_set():
                raise EpisodeCancelled("the run is stopping")
            try:
                return rollout(task_dir, engine, tokenizer, settings, backend=backend,
                               run_id=run_id, seed=sample_seed, cancel=cancel)  # fmt: skip
            except EpisodeFailed as failed:
                if attempt < EPISODE_ATTEMPTS:
                    log.warning("episode %d of %s failed (%s); playing it again",
                                index, name, failed.reason)  # fmt: skip
                    continue
                log.error("episode %d of %s failed %d times (%s): reward 0", index, name,
                          EPISODE_ATTEMPTS, failed.reason)  # fmt: skip
                return failed.sample
        raise AssertionError("unreachable")

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(workers, group_size))) as pool:
        samples = list(pool.map(one, range(group_size)))
    log.info(
        "group of %d on %s: mean reward %.3f, %d sampled tokens, %.1fs",
        group_size,
        Path(task_dir).name,
        sum(s.reward for s in samples) / group_size,
        sum(s.response_tokens for s in samples),
        time.monotonic() - started,
    )
    return samples
