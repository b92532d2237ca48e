"""The harness protocol and the one agent loop all four harnesses share.

A harness decides three things: what the model is told (prompt templates under
``prompts/<harness>/``), how its answer is read (tool calls or JSON text), and what
an action does in the sandbox. ``run_agent`` owns everything else — turn and token
budgets, usage, the trajectory, and how an episode ends:

    messages = harness.start(instruction, sandbox)
    until the harness says done or a budget runs out:
        completion = model.complete(messages, tools=harness.tools, max_tokens=...)
        messages += [assistant turn] + harness.act(completion, sandbox).messages

The verifier is not part of the harness: the caller runs it on the same sandbox
after the agent stops (tmax.evaluate.trial), exactly as Harbor does.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

from tmax.config import schema_default
from tmax.harness.trajectory import Trajectory
from tmax.models.client import (
    ChatModel,
    Completion,
    ContextLengthExceeded,
    Message,
    Usage,
)
from tmax.sandbox.base import ExecResult, Sandbox, SandboxDied
from tmax.settings import RLSection

log = logging.getLogger("tmax.harness")

SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""What the tmax and mini-swe-agent harnesses' agents echo to submit."""


@dataclass(frozen=True)
class HarnessSettings:
    """Budgets and sampling for one episode (paper §4: 64 tool calls, 16,384 tokens per
    turn, 65,536 in all, interleaved thinking on); the defaults are the ``evaluation``
    section's (the schema's)."""

    max_tool_calls: int = schema_default("evaluation", "max_tool_calls")
    max_turn_tokens: int = schema_default("evaluation", "max_turn_tokens")
    max_total_tokens: int = schema_default("evaluation", "max_total_tokens")
    temperature: float | None = schema_default("evaluation", "temperature")
    """0 is greedy; None leaves it to the endpoint."""
    top_p: float | None = None
    """Nucleus sampling's mass (None: the endpoint's default, 1 on every engine we
    serve; evaluation.top_p, whose default is 1, sends it)."""
    interleaved_thinking: bool = schema_default("evaluation", "interleaved_thinking")
    max_format_errors: int = schema_default("evaluation", "max_format_errors")
    command_timeout_sec: float = float(schema_default("evaluation", "command_timeout_sec"))
    observation_chars: int = 10_000
    """Observations longer than this keep their first and last half (not a setting)."""
    max_turns: int | None = schema_default("evaluation", "max_turns")
    """A cap on model calls below each harness's own rule (:attr:`Harness.turn_limit`;
    None: no cap but the harness's)."""
    prompts: str = schema_default("evaluation", "prompts")
    """``own`` (our templates) or ``upstream`` (the upstream agent's, read from its
    installed package at run time: tmax.harness.upstream)."""

    @classmethod
    def for_rl(cls, rl: RLSection) -> HarnessSettings:
        """The episode budgets of RL rollouts (and of the SFT prompts, which only use
        max_tool_calls: it is written into the task prompt)."""
        return cls(
            max_tool_calls=rl.max_tool_calls,
            max_turn_tokens=rl.max_turn_tokens,
            max_total_tokens=rl.max_total_tokens,
            temperature=rl.temperature,
            interleaved_thinking=True,
            max_format_errors=rl.max_format_errors,
            command_timeout_sec=float(rl.command_timeout_sec),
        )

    @property
    def turn_limit(self) -> int:
        """Model calls for a budget of tool calls: a few more, for corrections."""
        own = self.max_tool_calls + min(self.max_format_errors, 16)
        return own if self.max_turns is None else min(own, self.max_turns)


@dataclass
class Action:
    """What the harness did with one model answer."""

    messages: list[Message] = field(default_factory=list)
    """Conversation turns to append after the assistant turn (tool results, user notes)."""
    tool_calls: int = 0
    """Sandbox actions taken (counted against ``max_tool_calls``)."""
    format_error: bool = False
    drop_reply: bool = False
    """Leave the assistant turn out of the conversation (mini-swe-agent forgets a
    reply it could not parse)."""
    reply: Message | None = None
    """The assistant turn as it goes back into the conversation, when not as sent
    (tmax strips the tool calls of a reply it could not use)."""
    done: bool = False
    exit_status: str | None = None
    """Why the episode ends, when ``done``: submitted, finished, gave_up, ..."""


@dataclass
class AgentRun:
    """How an agent episode went, before verification."""

    exit_status: str
    """submitted | finished | max_tool_calls | max_turns | token_budget |
    context_length | format_errors | agent_timeout | out_of_memory | sandbox_died"""
    trajectory: Trajectory
    usage: Usage
    turns: int = 0
    tool_calls: int = 0
    format_errors: int = 0
    compactions: int = 0
    """Times the harness shortened the conversation to go on (Harness.compact)."""
    agent_time_sec: float = 0.0
    sandbox_time_sec: float = 0.0
    detail: str | None = None
    completions: list[Completion] = field(default_factory=list)


@dataclass
class Compaction:
    """A shorter conversation to continue from, and the model calls that made it."""

    messages: list[Message]
    completions: list[Completion] = field(default_factory=list)


class EpisodeOver(Exception):
    """Raised inside a harness when the sandbox ends the episode (e.g. out of memory)."""

    def __init__(self, exit_status: str, detail: str) -> None:
        super().__init__(detail)
        self.exit_status = exit_status


class Harness(ABC):
    """One agent scaffold. Subclasses are registered by ``name`` in tmax.harness."""

    name: ClassVar[str]
    version: ClassVar[str] = "1.0"
    deadline: float | None = None
    """``time.monotonic()`` at which the task's agent time runs out (set by run_agent)."""
    budget_counts_turns: ClassVar[bool] = False
    """Upstream's budget is steps, i.e. model calls: ``max_tool_calls`` then caps every
    turn, format errors included, and no correction turns are added on top."""
    format_errors_reset: ClassVar[bool] = False
    """A well-formed reply resets the format-error count (the limit is on errors in a
    row, as upstream counts them), instead of counting every error of the episode."""

    @property
    def turn_limit(self) -> int | None:
        """Model calls allowed in one episode (None: no cap, the agent's time limit
        ends it, as in Harbor's Terminus-2)."""
        if not self.budget_counts_turns:
            return self.settings.turn_limit
        steps, cap = self.settings.max_tool_calls, self.settings.max_turns
        return steps if cap is None else min(steps, cap)

    @property
    def format_error_limit(self) -> int | None:
        """Format errors (in a row, with ``format_errors_reset``) that end the episode
        (None: no cap)."""
        return self.settings.max_format_errors

    @property
    def tool_call_limit(self) -> int | None:
        """Tool calls that end the episode (None: tool calls are not budgeted)."""
        return self.settings.max_tool_calls

    def compact(
        self,
        messages: list[Message],
        model: ChatModel,
        sandbox: Sandbox,
        trajectory: Trajectory,
        *,
        context_tokens: int,
        overflow: bool,
    ) -> Compaction | None:
        """A shorter conversation to go on with when the context fills up.

        Asked before every model call (``overflow`` False: the harness judges whether
        it is time) and when the context is full (``overflow``: the last turn reached
        ``max_total_tokens`` or the model refused the request as too long). None keeps
        the conversation, and a full context then ends the episode (``token_budget`` or
        ``context_length``), as in the paper's own harness.
        """
        return None

    def __init__(self, settings: HarnessSettings | None = None) -> None:
        self.settings = settings or HarnessSettings()
        self.sandbox_time_sec = 0.0

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """OpenAI tool schemas sent with every request (None: a text-only harness)."""
        return None

    @abstractmethod
    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        """Prepare the sandbox (a shell, a terminal) and return the first messages."""

    @abstractmethod
    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        """Read one model answer, carry it out, and say what the model sees next."""

    def run(self, command: str, sandbox: Sandbox, timeout: float | None = None) -> ExecResult:
        """``sandbox.run`` with the time spent counted (the harness-overhead figure).

        An out-of-memory kill ends the episode (reward 0), as in the paper's RL
        environment.
        """
        # A command may not outlive the agent's time: it is cut at the deadline.
        cut_at_deadline = False
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise EpisodeOver("agent_timeout", "the agent's time ran out before a command")
            if left < (sandbox.limits.command_timeout_sec if timeout is None else timeout):
                timeout, cut_at_deadline = left, True
        started = time.monotonic()
        try:
            result = sandbox.run(command, timeout=timeout)
        finally:
            self.sandbox_time_sec += time.monotonic() - started
        if result.oom_killed:
            raise EpisodeOver(
                "out_of_memory",
                f"a command was killed by the OOM killer (limit {sandbox.limits.memory_mb} MB)",
            )
        if cut_at_deadline and result.timed_out:
            raise EpisodeOver("agent_timeout", "the agent's time ran out during a command")
        return result


def run_agent(
    harness: Harness,
    model: ChatModel,
    sandbox: Sandbox,
    instruction: str,
    *,
    timeout_sec: float | None = None,
    cut_model_calls: bool = False,
) -> AgentRun:
    """Play one episode of ``harness`` with ``model`` in a started ``sandbox``.

    ``timeout_sec`` is the task's agent time limit (Harbor's ``[agent].timeout_sec``):
    an agent that runs out of time has failed the task (``agent_timeout``). It holds
    within a turn too: a command is cut at the deadline (:meth:`Harness.run`) and, with
    ``cut_model_calls``, so is a model call still running then (it is abandoned: its
    thread finishes in the background and its answer is dropped). That suits a client
    whose late answer changes nothing (an HTTP endpoint), not a model that records the
    episode as it goes (the RL rollout's), so it is off by default.
    """
    settings = harness.settings
    trajectory = Trajectory(harness.name, harness.version, model.name)
    usage = Usage()
    started = time.monotonic()
    deadline = None if timeout_sec is None else started + timeout_sec
    harness.deadline = deadline
    run = AgentRun("max_turns", trajectory, usage)
    context_tokens = 0  # prompt + answer of the latest turn: the trajectory's length
    # Keystroke harnesses leave programs running between turns, so an OOM kill can
    # happen outside any command the harness ran: check the sandbox's count each turn.
    oom_baseline = sandbox.oom_kills()
    error_count = 0  # format errors so far, or in a row (Harness.format_errors_reset)
    turn_limit = harness.turn_limit
    if turn_limit is None and timeout_sec is None:
        turn_limit = settings.turn_limit  # an episode must end: without a time limit, a cap
    messages: list[Message] = []
    compacted = False  # since the last answer: compacting twice in a row would not help

    def compact(overflow: bool) -> bool:
        nonlocal messages, context_tokens, compacted
        if compacted:
            return False
        compaction = harness.compact(
            messages, model, sandbox, trajectory, context_tokens=context_tokens, overflow=overflow
        )
        if compaction is None:
            return False
        messages, context_tokens, compacted = compaction.messages, 0, True
        run.compactions += 1
        for completion in compaction.completions:
            usage.add(completion)
        return True

    try:
        messages = harness.start(instruction, sandbox, trajectory)
        while turn_limit is None or run.turns < turn_limit:
            if deadline is not None and time.monotonic() >= deadline:
                raise EpisodeOver("agent_timeout", "the agent's time ran out between turns")
            compact(overflow=False)
            room = settings.max_total_tokens - context_tokens
            if room <= 0:
                run.exit_status = "token_budget"
                break
            request = functools.partial(
                model.complete,
                messages,
                tools=harness.tools,
                max_tokens=min(settings.max_turn_tokens, room),
                temperature=settings.temperature,
                top_p=settings.top_p,
            )
            try:
                completion = _by_deadline(request, deadline if cut_model_calls else None)
            except ContextLengthExceeded as error:
                if compact(overflow=True):
                    continue
                run.exit_status, run.detail = "context_length", str(error)[:500]
                break
            compacted = False
            run.turns += 1
            run.completions.append(completion)
            usage.add(completion)
            context_tokens = completion.prompt_tokens + completion.completion_tokens
            trajectory.agent(completion)
            messages.append(completion.assistant_message(settings.interleaved_thinking))
            action = harness.act(completion, sandbox, trajectory)
            if action.drop_reply:
                messages.pop()
            elif action.reply is not None:
                messages[-1] = action.reply
            if oom_baseline is not None and (sandbox.oom_kills() or 0) > oom_baseline:
                raise EpisodeOver(
                    "out_of_memory",
                    f"the OOM killer ended a process (limit {sandbox.limits.memory_mb} MB)",
                )
            messages.extend(action.messages)
            run.tool_calls += action.tool_calls
            if action.format_error:
                run.format_errors += 1
                error_count += 1
            elif harness.format_errors_reset:
                error_count = 0
            if action.done:
                run.exit_status = action.exit_status or "finished"
                break
            format_error_limit = harness.format_error_limit
            tool_call_limit = harness.tool_call_limit
            if format_error_limit is not None and error_count >= format_error_limit:
                run.exit_status = "format_errors"
                break
            if harness.budget_counts_turns and turn_limit is not None and run.turns >= turn_limit:
                run.exit_status = "max_tool_calls"
                break
            if (
                not harness.budget_counts_turns
                and tool_call_limit is not None
                and run.tool_calls >= tool_call_limit
            ):
                run.exit_status = "max_tool_calls"
                break
            if context_tokens >= settings.max_total_tokens and not compact(overflow=True):
                run.exit_status = "token_budget"
                break
    except EpisodeOver as over:
        run.exit_status, run.detail = over.exit_status, str(over)
    except SandboxDied as error:
        run.exit_status, run.detail = "sandbox_died", str(error)
    finally:
        harness.deadline = None
    run.agent_time_sec = time.monotonic() - started
    run.sandbox_time_sec = harness.sandbox_time_sec
    if run.exit_status == "agent_timeout" and timeout_sec is not None:
        run.detail = f"{run.detail} (limit {timeout_sec:g} s)"
    return run


def _by_deadline(call: Callable[[], Completion], deadline: float | None) -> Completion:
    """``call()``, or ``agent_timeout`` if it has not returned by ``deadline``: a
    watchdog, as the ChatModel protocol has no per-request timeout."""
    if deadline is None:
        return call()
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    def work() -> None:
        try:
            outcome["completion"] = call()
        except BaseException as error:  # handed to the episode's thread
            outcome["error"] = error
        finally:
            finished.set()

    threading.Thread(target=work, name="tmax-model-call", daemon=True).start()
    if not finished.wait(max(0.0, deadline - time.monotonic())):
        raise EpisodeOver("agent_timeout", "the agent's time ran out during a model call")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["completion"]


# --- shared pieces ---------------------------------------------------------------------


def truncate_middle(text: str, limit: int, note: str | None = None) -> str:
    """Keep the first and last ``limit // 2`` characters of ``text``; say what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    marker = note or "[... {omitted} characters omitted ...]"
    return f"{text[:half]}\n{marker.format(omitted=omitted)}\n{text[-half:]}"


_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


@functools.cache
def load_prompt(harness: str, name: str) -> str:
    """A prompt template shipped in ``tmax/harness/prompts/<harness>/<name>``."""
    path = resources.files("tmax.harness") / "prompts" / harness / name
    return path.read_text(encoding="utf-8")


def render(template: str, **values: Any) -> str:
    """Fill ``{{ name }}`` placeholders; a placeholder without a value is an error."""

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"prompt placeholder {{{{ {key} }}}} has no value")
        return str(values[key])

    return _PLACEHOLDER.sub(fill, template)


def is_submission(output: str, exit_code: int) -> bool:
    """Whether a command's result is the submit sentinel: its first output line is
    exactly the sentinel and the command succeeded."""
    lines = output.lstrip().splitlines()
    return exit_code == 0 and bool(lines) and lines[0].strip() == SUBMIT_SENTINEL


def bash_tool(description: str) -> dict[str, Any]:
    """The OpenAI schema of a one-argument ``bash`` tool."""
    return {
        "type": "function",
        "function": {
            "name": "bash",
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to run."}
                },
                "required": ["command"],
            },
        },
    }


def single_bash_command(completion: Completion) -> tuple[str | None, str | None, str | None]:
    """The one ``bash`` call a tool-calling harness expects: (command, call id, error)."""
    calls: Sequence[Any] = completion.tool_calls
    if not calls:
        return None, None, "no tool call"
    if len(calls) > 1:
        return None, calls[0].id, f"{len(calls)} tool calls (exactly one is allowed)"
    call = calls[0]
    if call.name != "bash":
        return None, call.id, f"unknown tool {call.name!r} (the only tool is bash)"
    try:
        arguments = call.parsed_arguments()
    except ValueError as error:
        return None, call.id, str(error)
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        return None, call.id, "the bash call has no 'command' string"
    return command, call.id, None


def reply_to_calls(completion: Completion, text: str) -> list[Message]:
    """Answer every tool call the model made (the API wants one result per call): the
    first gets ``text``, extra calls are declined. With no call, the reply is a user turn."""
    if not completion.tool_calls:
        return [{"role": "user", "content": text}]
    first, *rest = completion.tool_calls
    replies: list[Message] = [{"role": "tool", "tool_call_id": first.id, "content": text}]
    replies += [
        {"role": "tool", "tool_call_id": call.id, "content": "(not run: one call per reply)"}
        for call in rest
    ]
    return replies
