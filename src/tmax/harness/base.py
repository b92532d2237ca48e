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
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

from tmax.harness.trajectory import Trajectory
from tmax.models.client import (
    ChatModel,
    Completion,
    ContextLengthExceeded,
    Message,
    Usage,
)
from tmax.sandbox.base import ExecResult, Sandbox, SandboxDied

log = logging.getLogger("tmax.harness")

SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""What the tmax and mini-swe-agent harnesses' agents echo to submit."""


@dataclass(frozen=True)
class HarnessSettings:
    """Budgets and sampling for one episode (paper §4: 64 tool calls, 16,384 tokens per
    turn, 65,536 in all, interleaved thinking on)."""

    max_tool_calls: int = 64
    max_turn_tokens: int = 16384
    max_total_tokens: int = 65536
    temperature: float | None = 0.7
    interleaved_thinking: bool = True
    max_format_errors: int = 64
    command_timeout_sec: float = 120.0
    observation_chars: int = 10_000
    """Observations longer than this keep their first and last half."""
    max_turns: int | None = None
    """Model calls allowed (default: a few more than the tool calls, for corrections)."""

    @property
    def turn_limit(self) -> int:
        return self.max_turns or self.max_tool_calls + min(self.max_format_errors, 16)


@dataclass
class Action:
    """What the harness did with one model answer."""

    messages: list[Message] = field(default_factory=list)
    """Conversation turns to append after the assistant turn (tool results, user notes)."""
    tool_calls: int = 0
    """Sandbox actions taken (counted against ``max_tool_calls``)."""
    format_error: bool = False
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
    agent_time_sec: float = 0.0
    sandbox_time_sec: float = 0.0
    detail: str | None = None
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
        return result


def run_agent(
    harness: Harness,
    model: ChatModel,
    sandbox: Sandbox,
    instruction: str,
    *,
    timeout_sec: float | None = None,
) -> AgentRun:
    """Play one episode of ``harness`` with ``model`` in a started ``sandbox``.

    ``timeout_sec`` is the task's agent time limit (Harbor's ``[agent].timeout_sec``),
    checked between turns: an agent that runs out of time has failed the task.
    """
    settings = harness.settings
    trajectory = Trajectory(harness.name, harness.version, model.name)
    usage = Usage()
    started = time.monotonic()
    messages = harness.start(instruction, sandbox, trajectory)
    run = AgentRun("max_turns", trajectory, usage)
    context_tokens = 0  # prompt + answer of the latest turn: the trajectory's length
    # Keystroke harnesses leave programs running between turns, so an OOM kill can
    # happen outside any command the harness ran: check the sandbox's count each turn.
    oom_baseline = sandbox.oom_kills()
    try:
        while run.turns < settings.turn_limit:
            if timeout_sec is not None and time.monotonic() - started > timeout_sec:
                run.exit_status = "agent_timeout"
                break
            room = settings.max_total_tokens - context_tokens
            if room <= 0:
                run.exit_status = "token_budget"
                break
            try:
                completion = model.complete(
                    messages,
                    tools=harness.tools,
                    max_tokens=min(settings.max_turn_tokens, room),
                    temperature=settings.temperature,
                )
            except ContextLengthExceeded as error:
                run.exit_status, run.detail = "context_length", str(error)[:500]
                break
            run.turns += 1
            run.completions.append(completion)
            usage.add(completion)
            context_tokens = completion.prompt_tokens + completion.completion_tokens
            trajectory.agent(completion)
            messages.append(completion.assistant_message(settings.interleaved_thinking))
            action = harness.act(completion, sandbox, trajectory)
            if oom_baseline is not None and (sandbox.oom_kills() or 0) > oom_baseline:
                raise EpisodeOver(
                    "out_of_memory",
                    f"the OOM killer ended a process (limit {sandbox.limits.memory_mb} MB)",
                )
            messages.extend(action.messages)
            run.tool_calls += action.tool_calls
            if action.format_error:
                run.format_errors += 1
            if action.done:
                run.exit_status = action.exit_status or "finished"
                break
            if run.format_errors >= settings.max_format_errors:
                run.exit_status = "format_errors"
                break
            if run.tool_calls >= settings.max_tool_calls:
                run.exit_status = "max_tool_calls"
                break
            if context_tokens >= settings.max_total_tokens:
                run.exit_status = "token_budget"
                break
    except EpisodeOver as over:
        run.exit_status, run.detail = over.exit_status, str(over)
    except SandboxDied as error:
        run.exit_status, run.detail = "sandbox_died", str(error)
    run.agent_time_sec = time.monotonic() - started
    run.sandbox_time_sec = harness.sandbox_time_sec
    return run


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
