"""Terminus-2, Harbor's reference terminal agent (harness notes §2), on our tmux terminal.

There is no system message and no tool schema. The first user message
(``prompts/terminus-2/prompt.md``) explains a JSON answer format and ends with the task
and the terminal's screen; every later user message is what the terminal printed.
The model answers with

    {"analysis": str, "plan": str,
     "commands": [{"keystrokes": str, "duration": float}], "task_complete": bool}

Each command's keystrokes go to a tmux pane running ``bash --login`` (160x40), then
the harness waits ``duration`` seconds (default 1, at most 60) without checking
anything. The next message is ``New Terminal Output:`` and what appeared since the
last look, or ``Current Terminal Screen:`` and the visible screen when that cannot be
told (tmax.harness.terminal), cut to its first and last 5,000 bytes past 10,000
(``observation_chars`` of the settings, counted in bytes here).

An answer without a usable JSON object gets an error message instead and nothing is
typed (a format error); problems the harness can work around (a missing ``plan``, a
duration out of range, text around the object) are sent back as warnings at the top
of the next observation. The first ``task_complete: true`` is answered with the screen
and a request to confirm; a second one in a row ends the episode (``submitted``), and
any other answer in between withdraws it. Every keystroke batch is one tool call, recorded in
the trajectory as ``bash_command`` (``mark_task_complete`` for completion), as in
Harbor's trajectories.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from tmax.harness.base import Action, Harness, HarnessSettings, load_prompt, render
from tmax.harness.terminal import TerminalError, TerminalOutput, TmuxTerminal, restart_or_end
from tmax.harness.trajectory import Trajectory
from tmax.models.client import Completion, Message
from tmax.sandbox.base import Sandbox

DEFAULT_DURATION_SEC = 1.0
MAX_DURATION_SEC = 60.0
RESPONSE_FIELDS = ("analysis", "plan", "commands", "task_complete")


@dataclass(frozen=True)
class KeystrokeCommand:
    keystrokes: str
    duration: float = DEFAULT_DURATION_SEC


@dataclass
class ParsedResponse:
    """A model answer read as Terminus-2 reads it. With ``errors`` nothing is run."""

    commands: list[KeystrokeCommand] = field(default_factory=list)
    task_complete: bool = False
    analysis: str = ""
    plan: str = ""
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


_FENCE = re.compile(r"```[A-Za-z]*")


def find_json_object(text: str) -> tuple[dict[str, Any] | None, str, str, str | None]:
    """The answer's JSON object: (object, text before it, text after it, error).

    The object is the first ``{`` from which a whole JSON object with at least one of
    the answer's fields decodes, so braces in prose before it and the objects nested
    in it are passed over. Raw control characters (a literal newline inside a string)
    are tolerated, as models write them.
    """
    decoder = json.JSONDecoder(strict=False)
    first_error: json.JSONDecodeError | None = None
    for match in re.finditer(r"\{", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError as error:
            first_error = first_error or error
            continue
        if isinstance(value, dict) and any(key in value for key in RESPONSE_FIELDS):
            return value, text[: match.start()], text[end:], None
    if first_error is not None:
        return None, "", "", f"the response is not valid JSON ({first_error})"
    if "{" in text:
        return None, "", "", "no JSON object with the fields analysis, plan, commands was found"
    return None, "", "", "no JSON object was found in the response"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def parse_commands(raw: Any, parsed: ParsedResponse) -> None:
    """Read the ``commands`` list into ``parsed`` (errors and warnings included)."""
    if not isinstance(raw, list):
        parsed.errors.append(f"'commands' must be a list, not {type(raw).__name__}")
        return
    for number, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            parsed.errors.append(f"command {number} must be an object with 'keystrokes'")
            continue
        keystrokes = item.get("keystrokes")
        if not isinstance(keystrokes, str):
            problem = "is missing" if keystrokes is None else "must be a string"
            parsed.errors.append(f"command {number}: 'keystrokes' {problem}")
            continue
        duration = DEFAULT_DURATION_SEC
        if "duration" not in item:
            parsed.warnings.append(
                f"command {number} has no 'duration'; waited {DEFAULT_DURATION_SEC:g} s"
            )
        else:
            value = _number(item["duration"])
            if value is None:
                parsed.warnings.append(
                    f"command {number}: 'duration' is not a number; "
                    f"waited {DEFAULT_DURATION_SEC:g} s"
                )
            elif isinstance(item["duration"], str):
                parsed.warnings.append(f"command {number}: 'duration' should be a number")
                duration = value
            else:
                duration = value
        if duration < 0:
            parsed.warnings.append(f"command {number}: negative 'duration'; did not wait")
            duration = 0.0
        elif duration > MAX_DURATION_SEC:
            parsed.warnings.append(
                f"command {number}: 'duration' {duration:g} s is over the "
                f"{MAX_DURATION_SEC:g} s cap; waited {MAX_DURATION_SEC:g} s"
            )
            duration = MAX_DURATION_SEC
        parsed.commands.append(KeystrokeCommand(keystrokes, duration))
    for number, command in enumerate(parsed.commands[:-1], 1):
        if command.keystrokes and not command.keystrokes.endswith("\n"):
            parsed.warnings.append(
                f"command {number} does not end with a newline, so the next command was "
                "typed on the same line"
            )


def parse_response(text: str) -> ParsedResponse:
    """Read one Terminus-2 answer: the JSON object in it, checked field by field."""
    parsed = ParsedResponse()
    if not text.strip():
        parsed.errors.append("the response is empty")
        return parsed
    value, before, after, error = find_json_object(text)
    if value is None:
        parsed.errors.append(error or "no JSON object was found")
        return parsed
    if _FENCE.sub("", before).strip():
        parsed.warnings.append("there was text before the JSON object")
    if _FENCE.sub("", after).strip():
        parsed.warnings.append("there was text after the JSON object")
    for name in ("analysis", "plan"):
        if name not in value:
            parsed.warnings.append(f"the field '{name}' is missing")
        elif not isinstance(value[name], str):
            parsed.warnings.append(f"the field '{name}' should be a string")
            setattr(parsed, name, json.dumps(value[name]))
        else:
            setattr(parsed, name, value[name])
    complete = value.get("task_complete", False)
    if isinstance(complete, str) and complete.strip().lower() in ("true", "false"):
        parsed.warnings.append("'task_complete' should be true or false, not a string")
        complete = complete.strip().lower() == "true"
    elif not isinstance(complete, bool):
        parsed.warnings.append("'task_complete' should be true or false; read as false")
        complete = False
    parsed.task_complete = complete
    if "commands" in value:
        parse_commands(value["commands"], parsed)
    elif not complete:
        parsed.errors.append("the field 'commands' is missing")
    return parsed


def bullet_list(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


class Terminus2Harness(Harness):
    name = "terminus-2"
    version = "2.0"

    def __init__(
        self,
        settings: HarnessSettings | None = None,
        *,
        width: int = 160,
        height: int = 40,
    ) -> None:
        super().__init__(settings)
        self.width, self.height = width, height
        self.terminal = TmuxTerminal(self.run)
        self.pending_completion = False

    @property
    def output_limit_bytes(self) -> int:
        """Observation cap: 10,000 bytes by default (``observation_chars``, in bytes)."""
        return self.settings.observation_chars

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        screen = self.terminal.start(
            sandbox, width=self.width, height=self.height, session="terminus-2"
        )
        prompt = render(
            load_prompt("terminus-2", "prompt.md"),
            instruction=instruction.strip(),
            terminal_state=screen,
            width=self.width,
            height=self.height,
        ).strip()
        trajectory.user(prompt)
        return [{"role": "user", "content": prompt}]

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        parsed = parse_response(completion.content)
        if parsed.errors:
            self.pending_completion = False
            message = render(
                load_prompt("terminus-2", "format_error.md"),
                errors=bullet_list(parsed.errors + parsed.warnings),
            ).strip()
            trajectory.observe(message)
            return Action(messages=[{"role": "user", "content": message}], format_error=True)
        self._record_calls(trajectory, parsed)
        terminal_output = self._execute(parsed.commands)
        calls = len(parsed.commands)
        if parsed.task_complete and self.pending_completion:
            trajectory.observe(terminal_output)
            return Action(tool_calls=calls, done=True, exit_status="submitted")
        if parsed.task_complete:
            self.pending_completion = True
            try:  # the whole screen, to judge the work by
                shown = f"Current Terminal Screen:\n{self.terminal.capture()}"
            except TerminalError:
                shown = terminal_output
            observation = render(load_prompt("terminus-2", "confirm.md"), terminal_output=shown)
        else:
            self.pending_completion = False
            observation = terminal_output
            if parsed.warnings:
                observation = render(
                    load_prompt("terminus-2", "warnings.md"),
                    warnings=bullet_list(parsed.warnings),
                    terminal_output=terminal_output,
                )
        observation = observation.strip()
        trajectory.observe(observation)
        return Action(messages=[{"role": "user", "content": observation}], tool_calls=calls)

    # --- the terminal -----------------------------------------------------------------

    def _execute(self, commands: list[KeystrokeCommand]) -> str:
        """Type each batch and wait its duration; then what the terminal shows."""
        try:
            for command in commands:
                started = time.monotonic()
                self.terminal.send_keys(command.keystrokes)
                # The wait is from the start of sending, as in Terminus-2.
                time.sleep(max(0.0, command.duration - (time.monotonic() - started)))
            return self._look()
        except TerminalError as error:
            restart_or_end(self.terminal, error, "terminus-2 terminal")
            return "[The terminal had stopped; a new one was started.]\n" + self._look()

    def _look(self) -> str:
        output: TerminalOutput = self.terminal.incremental_output(self.output_limit_bytes)
        header = "Current Terminal Screen:" if output.is_screen else "New Terminal Output:"
        return f"{header}\n{output.text}"

    def _record_calls(self, trajectory: Trajectory, parsed: ParsedResponse) -> None:
        """Show the keystroke batches as tool calls on the latest agent step (the
        answer itself is plain text, so ``Trajectory.agent`` saw no calls)."""
        step = next((s for s in reversed(trajectory.steps) if s["source"] == "agent"), None)
        if step is None:
            return
        calls: list[dict[str, Any]] = [
            {
                "tool_call_id": f"call_{step['step_id']}_{number}",
                "function_name": "bash_command",
                "arguments": {"keystrokes": command.keystrokes, "duration": command.duration},
            }
            for number, command in enumerate(parsed.commands, 1)
        ]
        if parsed.task_complete:
            calls.append(
                {
                    "tool_call_id": f"call_{step['step_id']}_task_complete",
                    "function_name": "mark_task_complete",
                    "arguments": {},
                }
            )
        if calls:
            step["tool_calls"] = calls
