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

Answers are read by Harbor 0.26.0's rules (terminus_json_plain_parser.py): an answer
whose first JSON object does not decode, lacks one of ``analysis``, ``plan``,
``commands``, or has an unusable command gets an error message and nothing is typed
(a format error), unless adding missing closing braces or taking a shallow object out
of the surrounding text repairs it; lesser problems (text around the object, fields out
of order, a missing ``duration``) are sent back as warnings at the top of the next
observation. The first ``task_complete: true`` is answered with the terminal output and
a request to confirm; a second one ends the episode (``submitted``). A usable answer
without it withdraws the request; an unusable one does not (Harbor skips the turn before
its completion logic). Every keystroke batch is recorded in the trajectory as a
``bash_command`` call (``mark_task_complete`` for completion), as in Harbor's.

As in Harbor, there is no turn cap unless ``max_turns`` is set, the tool-call budget
and the format-error limit do not apply, and the agent's time limit ends the episode;
when the conversation nears ``max_total_tokens`` (the context this harness is given)
the model summarises its work and carries on from the summary (``compact``).

With ``prompts: upstream`` the first message is Harbor's own
``templates/terminus-json-plain.txt`` (the template of the JSON parser, Harbor's
default), read from the installed Harbor package (tmax.harness.upstream) and filled as
Harbor fills it: ``str.format`` with the task as given (``instruction``) and the screen
under ``Current Terminal Screen:`` (``terminal_state``, Harbor's first capture). Every later
message stays ours: Harbor writes them in its code, not in templates. Harbor's other
template, ``timeout.txt``, answers a *blocking* command that runs out of time; Terminus-2
sends every batch non-blocking, so Harbor never uses it and neither do we.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from tmax.harness import upstream
from tmax.harness.base import Action, Compaction, Harness, HarnessSettings, load_prompt, render
from tmax.harness.terminal import TerminalError, TerminalOutput, TmuxTerminal, restart_or_end
from tmax.harness.trajectory import Trajectory
from tmax.models.client import ChatModel, Completion, ContextLengthExceeded, Message, ModelError
from tmax.sandbox.base import Sandbox

DEFAULT_DURATION_SEC = 1.0
MAX_DURATION_SEC = 60.0
log = logging.getLogger("tmax.harness.terminus2")
SUMMARIZE_FREE_TOKENS = 8000
"""Summarise when fewer tokens than this are left in the context (Harbor's
``proactive_summarization_threshold``), or a quarter of it for contexts under 32k."""
UNWIND_FREE_TOKENS = 4000
"""When the context overflowed, drop the latest turns until this much is free first."""
SCREEN_TAIL_CHARS = 1000
"""How much of the screen the fallback handoffs carry (Harbor's last 1,000 characters)."""
UPSTREAM_PROMPT = "agents/terminus_2/templates/terminus-json-plain.txt"
"""Harbor's first-message template for ``parser_name="json"`` (its default)."""


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


REQUIRED_FIELDS = ("analysis", "plan", "commands")
COMMAND_FIELDS = ("keystrokes", "duration")
_EMBEDDED_OBJECT = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}", re.DOTALL)
"""A JSON object with at most one level of nested objects (Harbor's mixed-content fix)."""


def first_object(text: str) -> tuple[str, str, str]:
    """The first balanced ``{...}`` of ``text`` (braces inside strings do not count), and
    the text before and after it; ("", "", "") when there is none. As in Harbor, this is
    the answer even when it turns out not to be JSON."""
    depth, start, in_string, escaped = 0, -1, False, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                return text[start : index + 1], text[:start], text[index + 1 :]
    return "", "", ""


def parse_commands(raw: list[Any], parsed: ParsedResponse) -> str | None:
    """Read the ``commands`` list into ``parsed``; the first unusable command is an
    error (returned), a wrong or missing ``duration`` only a warning (1 s is used)."""
    commands: list[KeystrokeCommand] = []
    for number, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            return f"command {number} must be an object with 'keystrokes' and 'duration'"
        if "keystrokes" not in item:
            return f"command {number}: 'keystrokes' is missing"
        keystrokes = item["keystrokes"]
        if not isinstance(keystrokes, str):
            return f"command {number}: 'keystrokes' must be a string"
        duration = item.get("duration")
        if "duration" not in item:
            parsed.warnings.append(
                f"command {number} has no 'duration'; waited {DEFAULT_DURATION_SEC:g} s"
            )
            duration = DEFAULT_DURATION_SEC
        elif not isinstance(duration, int | float):  # a numeric string too, as in Harbor
            parsed.warnings.append(
                f"command {number}: 'duration' is not a number; waited {DEFAULT_DURATION_SEC:g} s"
            )
            duration = DEFAULT_DURATION_SEC
        unknown = sorted(set(item) - set(COMMAND_FIELDS))
        if unknown:
            parsed.warnings.append(f"command {number} has unknown fields: {', '.join(unknown)}")
        if number < len(raw) and keystrokes and not keystrokes.endswith("\n"):
            parsed.warnings.append(
                f"command {number} does not end with a newline, so the next command was "
                "typed on the same line"
            )
        # Harbor caps the wait at 60 s without a word; a negative one is no wait.
        commands.append(
            KeystrokeCommand(keystrokes, min(max(float(duration), 0.0), MAX_DURATION_SEC))
        )
    parsed.commands = commands
    return None


def _read(text: str) -> ParsedResponse:
    """One attempt at reading an answer, with Harbor's rules for what is an error
    (nothing is typed) and what only a warning."""
    parsed = ParsedResponse()
    body, before, after = first_object(text)
    if before.strip():
        parsed.warnings.append("there was text before the JSON object")
    if after.strip():
        parsed.warnings.append("there was text after the JSON object")
    if not body:
        parsed.errors.append("no JSON object was found in the response")
        return parsed
    try:
        value = json.loads(body)  # strict: a raw newline inside a string is an error
    except json.JSONDecodeError as error:
        parsed.errors.append(f"the JSON object is not valid JSON ({error})")
        return parsed
    if not isinstance(value, dict):
        parsed.errors.append("the answer must be a JSON object")
        return parsed
    missing = [name for name in REQUIRED_FIELDS if name not in value]
    if missing:
        parsed.errors.append(f"required fields are missing: {', '.join(missing)}")
        return parsed
    for name in ("analysis", "plan"):
        if not isinstance(value[name], str):
            parsed.warnings.append(f"the field '{name}' should be a string")
        setattr(parsed, name, value[name] if isinstance(value[name], str) else str(value[name]))
    if not isinstance(value["commands"], list):
        parsed.errors.append("'commands' must be a list")
        return parsed
    order = sorted(REQUIRED_FIELDS, key=lambda name: body.find(f'"{name}"'))
    if order != list(REQUIRED_FIELDS):
        parsed.warnings.append(
            f"the fields are in the order {', '.join(order)}; write analysis, plan, commands"
        )
    complete = value.get("task_complete", False)
    if complete is not None and not isinstance(complete, bool | str):
        parsed.warnings.append("'task_complete' should be true or false")
    if isinstance(complete, str):
        complete = complete.strip().lower() in ("true", "1", "yes")
    parsed.task_complete = bool(complete)
    error = parse_commands(value["commands"], parsed)
    if error is not None:
        if parsed.task_complete:  # completing: nothing is typed, and that is fine
            parsed.warnings.append(error)
            parsed.commands = []
        else:
            parsed.errors.append(error)
    return parsed


def _close_braces(text: str, error: str) -> str | None:
    """A cut-off answer with its missing closing braces added."""
    if not error.startswith(("the JSON object is not valid", "no JSON object")):
        return None
    missing = text.count("{") - text.count("}")
    return text + "}" * missing if missing > 0 else None


def _embedded_object(text: str, error: str) -> str | None:
    """The first shallow JSON object in the text that decodes."""
    for match in _EMBEDDED_OBJECT.finditer(text):
        try:
            json.loads(match.group())
        except json.JSONDecodeError:
            continue
        return match.group()
    return None


_AUTO_FIXES = (
    ("closing braces were added to the JSON object", _close_braces),
    ("the JSON object was taken out of the surrounding text", _embedded_object),
)


def parse_response(text: str) -> ParsedResponse:
    """Read one Terminus-2 answer as Harbor does (terminus_json_plain_parser.py): an
    unusable answer is first repaired, if one of Harbor's two fixes makes it usable,
    with a warning that says so."""
    parsed = _read(text)
    if not parsed.errors:
        return parsed
    for name, fix in _AUTO_FIXES:
        fixed = fix(text, parsed.errors[0])
        if fixed is None:
            continue
        repaired = _read(fixed)
        if not repaired.errors:
            repaired.warnings.insert(0, f"auto-corrected: {name}; please answer correctly")
            return repaired
    return parsed


def bullet_list(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def unwind(history: list[Message], context_tokens: int, target_tokens: int) -> list[Message]:
    """``history`` less its latest turns (an answer and the message before it) until
    it fits ``target_tokens``, by the characters-per-token of the latest turn; the first
    message always stays (Harbor's ``_unwind_messages_to_free_tokens``)."""

    def chars(messages: list[Message]) -> int:
        return sum(len(str(m.get("content") or "")) for m in messages)

    tokens_per_char = context_tokens / max(chars(history), 1) if context_tokens else 0.25
    kept = list(history)
    while len(kept) > 2 and chars(kept) * tokens_per_char > target_tokens:
        kept = kept[:-2]
    return kept


class Terminus2Harness(Harness):
    name = "terminus-2"
    version = "2.0"

    def __init__(
        self,
        settings: HarnessSettings | None = None,
        *,
        width: int = 160,
        height: int = 40,
        summarize: bool = True,
    ) -> None:
        super().__init__(settings)
        self.width, self.height = width, height
        self.summarize = summarize
        """Summarise the conversation when the context fills up (Harbor's
        ``enable_summarize``, on by default)."""
        self.terminal = TmuxTerminal(self.run)
        self.pending_completion = False
        self.instruction = ""

    # Harbor's Terminus-2 has no turn cap unless ``max_turns`` is given, no tool-call
    # budget and no limit on unusable answers: the agent's time limit ends an episode.
    @property
    def turn_limit(self) -> int | None:
        return self.settings.max_turns

    @property
    def tool_call_limit(self) -> int | None:
        return None

    @property
    def format_error_limit(self) -> int | None:
        return None

    @property
    def output_limit_bytes(self) -> int:
        """Observation cap: 10,000 bytes by default (``observation_chars``, in bytes)."""
        return self.settings.observation_chars

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        self.instruction = instruction.strip()
        self.pending_completion = False
        # Read before the terminal starts, so a missing Harbor fails fast.
        harbor_template = (
            upstream.upstream_text("terminus-2", UPSTREAM_PROMPT)
            if upstream.check_mode(self.settings.prompts) == "upstream"
            else None
        )
        screen = self.terminal.start(
            sandbox, width=self.width, height=self.height, session="terminus-2"
        )
        if harbor_template is not None:
            # As Harbor's ``run`` fills it: str.format, the task as given, and the first
            # incremental capture, which is the screen under its header
            # (tmux_session.py:864–868).
            prompt = harbor_template.format(
                instruction=instruction, terminal_state=f"Current Terminal Screen:\n{screen}"
            )
        else:
            prompt = render(
                load_prompt("terminus-2", "prompt.md"),
                instruction=self.instruction,
                terminal_state=screen,
                width=self.width,
                height=self.height,
            ).strip()
        trajectory.user(prompt)
        return [{"role": "user", "content": prompt}]

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        parsed = parse_response(completion.content)
        if parsed.errors:
            # Nothing is typed, and a pending completion stays pending: in Harbor an
            # unusable answer skips the turn before the completion logic.
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
            observation = render(
                load_prompt("terminus-2", "confirm.md"), terminal_output=terminal_output
            )
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

    # --- summarising when the context fills up ------------------------------------------

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
        """Hand the work over to a fresh conversation, as Harbor's Terminus-2 does
        (terminus_2.py ``_summarize``): the model summarises its work, a fresh copy of
        it reads the summary and the screen and asks questions, the model answers them
        with the whole history in view, and the episode goes on from the questions and
        answers. Before the context is full this is tried once it has fewer than
        ``SUMMARIZE_FREE_TOKENS`` free (a failure leaves the conversation as it was);
        after an overflow the latest turns are dropped first, and if summarising fails
        a shorter handoff is used. The latest observation is not carried over; the
        screen is."""
        if not self.summarize or len(messages) < 3:
            return None
        limit = self.settings.max_total_tokens
        free = limit - context_tokens
        if not overflow and (context_tokens == 0 or free >= min(SUMMARIZE_FREE_TOKENS, limit // 4)):
            return None
        # The conversation as the model last saw it, without the observation pending.
        history = messages[:-1] if messages[-1]["role"] == "user" else list(messages)
        if overflow:
            history = unwind(history, context_tokens, limit - UNWIND_FREE_TOKENS)
        calls: list[Completion] = []
        try:
            continued = self._hand_over(history, model, calls)
        except (ContextLengthExceeded, ModelError) as error:
            log.info("terminus-2: summarising the context failed: %s", error)
            if not overflow:
                return None
            continued = [*history, {"role": "user", "content": self._short_handoff(model, calls)}]
        trajectory.system(
            f"The context was summarised ({len(calls)} model calls) and the work handed over."
        )
        trajectory.steps[-1]["extra"] = {
            "context_management": {"type": "compaction", "overflow": overflow},
            "summary_calls": [call.content for call in calls],
        }
        trajectory.user(str(continued[-1]["content"]))
        return Compaction(continued, calls)

    def _ask(self, model: ChatModel, messages: list[Message], calls: list[Completion]) -> str:
        completion = model.complete(
            messages,
            tools=None,
            max_tokens=self.settings.max_turn_tokens,
            temperature=self.settings.temperature,
            top_p=self.settings.top_p,
        )
        calls.append(completion)
        return completion.content

    def _hand_over(
        self, history: list[Message], model: ChatModel, calls: list[Completion]
    ) -> list[Message]:
        ask_summary = render(
            load_prompt("terminus-2", "summary.md"), instruction=self.instruction
        ).strip()
        summary = self._ask(model, [*history, {"role": "user", "content": ask_summary}], calls)
        ask_questions = render(
            load_prompt("terminus-2", "questions.md"),
            instruction=self.instruction,
            summary=summary,
            screen=self._screen(),
        ).strip()
        questions = self._ask(model, [{"role": "user", "content": ask_questions}], calls)
        ask_answers = render(load_prompt("terminus-2", "answers.md"), questions=questions)
        answers = self._ask(
            model,
            [
                *history,
                {"role": "user", "content": ask_summary},
                {"role": "assistant", "content": summary},
                {"role": "user", "content": ask_answers.strip()},
            ],
            calls,
        )
        handoff = render(load_prompt("terminus-2", "handoff.md"), answers=answers).strip()
        return [
            history[0],
            {"role": "user", "content": ask_questions},
            {"role": "assistant", "content": questions},
            {"role": "user", "content": handoff},
        ]

    def _short_handoff(self, model: ChatModel, calls: list[Completion]) -> str:
        """Harbor's fallbacks: a few sentences on the next steps, or just the task and
        the screen."""
        screen = self._screen()[-SCREEN_TAIL_CHARS:]
        prompt = render(
            load_prompt("terminus-2", "short_summary.md"),
            instruction=self.instruction,
            screen=screen,
        ).strip()
        try:
            notes = self._ask(model, [{"role": "user", "content": prompt}], calls)
        except (ContextLengthExceeded, ModelError):
            return render(
                load_prompt("terminus-2", "resume.md"), instruction=self.instruction, screen=screen
            ).strip()
        return render(
            load_prompt("terminus-2", "resume_with_notes.md"),
            instruction=self.instruction,
            notes=notes,
        ).strip()

    def _screen(self) -> str:
        try:
            return self.terminal.capture()
        except TerminalError as error:
            return f"(the terminal could not be read: {error})"

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
