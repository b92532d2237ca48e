"""OpenHands CodeAct (harness notes §3) with native tool calls, on our tmux terminal.

Pinned to openhands-ai 1.6.0, the last release with the CodeAct agent that Harbor's
``openhands`` agent runs (``python -m openhands.core.main``), with Harbor's settings
(browsing off). A system prompt (``prompts/openhands/system.md``, ours) and the task as
the user message; CodeAct's tools, in its order (codeact_agent.py ``_get_tools``):

* ``execute_bash {command, is_input, timeout, security_risk}`` types into one persistent
  bash shell in tmux. The shell's prompt is a marker line, ``###TMAX-<token> <pid> <n>
  <status> <cwd>###``, printed by ``PS1`` with a counter bumped by ``PROMPT_COMMAND``: a
  command is finished when a marker other than the one it was typed at appears, and
  that marker carries its exit status and the new working directory. Markers never
  reach the model. The command text is written to a file and the shell sources it
  (`` . file``), so the working directory and variables persist as if it were typed,
  but tabs, long lines and here-documents arrive intact and readline never sees them.
  A command that prints nothing new for ``soft_timeout_sec`` (10 s) is left running:
  the observation is its output so far, exit code -1 and a note on how to continue
  (an empty command waits again; ``is_input: "true"`` sends text, plus Enter, or a
  key such as ``C-c`` to the process; a new command is refused while it runs). With
  ``timeout`` there is no soft timeout; the command gets that many seconds (at most
  ``command_timeout_sec``) and is then left running the same way. Observations end
  with ``[The command completed with exit code N.]`` and ``[Current working
  directory: DIR]`` and keep their first and last 15,000 characters past 30,000.
* ``think {thought}`` runs nothing; the answer only acknowledges the thought.
* ``finish {message}`` ends the episode (``finished``).
* ``task_tracker {command: view|plan, task_list}`` keeps a to-do list in the harness,
  outside the sandbox: ``plan`` replaces it, ``view`` shows it.
* ``str_replace_editor {command, path, ..., security_risk}``: view (``cat -n`` style,
  or a directory two levels deep without hidden entries), create (never over an
  existing path), str_replace (``old_str`` must occur exactly once), insert (after line
  ``insert_line``), undo_edit (the file's previous content, kept here on the host per
  path). The harness reads and writes files with small scripts of toolbox binaries
  (``base64``, ``find``) and does the text edits itself, in Python; problems come back
  as the tool result, never as exceptions. Arguments the tool does not have are an
  error, as upstream.

``security_risk`` is required by the schemas, as upstream, but a missing or unknown
rating is accepted and no rating is acted on (no security analyser runs headless).
``execute_ipython_cell`` (CodeAct's Jupyter tool, on by default) is not offered.

Several calls in one reply run in order, as OpenHands runs the actions of one answer;
each gets its own result, and calls after ``finish`` (or past the tool-call budget)
are answered without running. Every call, ``think`` and ``task_tracker`` included,
counts against ``max_tool_calls``, as each is one of upstream's iterations. A reply
without any call is told to use a tool or call ``finish``, and counts as a format
error, as do calls with unreadable arguments.

The history is condensed as upstream's default condenser does (``compact``): past 100
events, or when the context is full, older turns are replaced by the model's summary.

With ``prompts: upstream`` the system message is CodeAct's own
``agenthub/codeact_agent/prompts/system_prompt_long_horizon.j2`` from the installed
openhands-ai package (tmax.harness.upstream), rendered as OpenHands' ``PromptManager``
renders it: a Jinja environment loading from that directory (the template includes
others), ``cli_mode`` false, the result stripped. The user message is the task exactly as
given: upstream has no template for it (``core/main.py`` sends the ``--task`` text as the
first message, and with prompt extensions off, as Harbor runs it, no workspace note is
added). Every other message stays ours: upstream writes them in code.
"""

from __future__ import annotations

import base64
import json
import logging
import posixpath
import re
import shlex
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tmax.harness import upstream
from tmax.harness.base import (
    Action,
    Compaction,
    Harness,
    HarnessSettings,
    load_prompt,
    render,
    truncate_middle,
)
from tmax.harness.terminal import (
    BIN,
    TerminalError,
    TmuxTerminal,
    clean_screen,
    is_key_name,
    restart_or_end,
)
from tmax.harness.trajectory import Trajectory
from tmax.models.client import (
    ChatModel,
    Completion,
    ContextLengthExceeded,
    Message,
    ModelError,
    ToolCall,
)
from tmax.sandbox.base import ExecResult, Sandbox

log = logging.getLogger("tmax.harness.openhands")

SOFT_TIMEOUT_SEC = 10.0
SETTLE_SEC = 0.005
"""Pause between sending a command and the first look: long enough for a builtin or a
small program to finish, so most commands need a single round trip."""
OBSERVATION_CHARS = 30_000
TRUNCATION_NOTE = (
    "[... {omitted} characters of output were cut here; narrow the command down "
    "(head, tail, grep) to see them ...]"
)
EDITOR_TRUNCATION_NOTE = "[... {omitted} characters cut here; view_range shows any part ...]"
MAX_FILE_BYTES = 4_000_000
"""Largest file the editor reads or writes; bigger ones are left to execute_bash."""
SNIPPET_LINES = 4
"""Lines of context shown around an edit."""
EDITOR_COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")

Runner = Callable[[str, Sandbox, float | None], ExecResult]

# --- the tools, as the model sees them ---------------------------------------------------


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


SECURITY_RISKS = ("LOW", "MEDIUM", "HIGH")
SECURITY_RISK = {
    "type": "string",
    "enum": list(SECURITY_RISKS),
    "description": "Your own rating of how risky this action is: LOW (reads or "
    "harmless changes), MEDIUM (changes to files or the system that can be undone), HIGH "
    "(destructive or hard to undo). Recorded only; nothing asks for confirmation.",
}
"""Upstream's required rating of each sandbox action (CodeAct's security analyser, off
by default): accepted, and never acted on, as a headless run does."""
TASK_STATUSES = ("todo", "in_progress", "done")

EXECUTE_BASH = _function(
    "execute_bash",
    "Run a bash command in a persistent shell: the working directory, environment "
    "variables and background jobs carry over between calls. Chain several commands "
    "with && or ;. A command that prints nothing new for a while is left running and "
    "returns exit code -1 with its output so far; then send an empty command to "
    "wait for more, or set is_input to 'true' to send text or keys (C-c, C-d, C-z) "
    "to the running process. Long outputs are shortened in the middle.",
    {
        "command": {
            "type": "string",
            "description": "The command to run. Empty: wait for more output of the "
            "running command. With is_input 'true': text (sent with Enter) or a key "
            "such as C-c, for the running process.",
        },
        "is_input": {
            "type": "string",
            "enum": ["true", "false"],
            "description": "'true' to send the command as input to the running "
            "process instead of running it. Default 'false'.",
        },
        "timeout": {
            "type": "number",
            "description": "Optional: seconds to wait for the command to finish before "
            "returning (it keeps running). Without it, the command returns once it has "
            "printed nothing new for a few seconds.",
        },
        "security_risk": SECURITY_RISK,
    },
    ["command", "security_risk"],
)
THINK = _function(
    "think",
    "Write down your reasoning: to weigh options, plan the next steps or make sense of "
    "what you have seen. Nothing is run and nothing changes; the thought is only kept "
    "in the conversation.",
    {"thought": {"type": "string", "description": "What you are thinking."}},
    ["thought"],
)
FINISH = _function(
    "finish",
    "Finish: call this when the task is done and checked. Your work is graded as it "
    "is then; nothing can be changed afterwards.",
    {"message": {"type": "string", "description": "A short summary of what you did."}},
    ["message"],
)
TASK_TRACKER = _function(
    "task_tracker",
    "Keep a to-do list for a task with several steps. `plan` replaces the whole list "
    "with task_list (give every task, with its current status); `view` shows the list. "
    "Mark a task in_progress when you start it and done as soon as it is finished. The "
    "list is kept outside the environment and is not part of your work.",
    {
        "command": {"type": "string", "enum": ["view", "plan"]},
        "task_list": {
            "type": "array",
            "description": "`plan`: every task, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "A short unique name."},
                    "title": {"type": "string", "description": "What is to be done."},
                    "status": {"type": "string", "enum": list(TASK_STATUSES)},
                    "notes": {"type": "string", "description": "Optional details."},
                },
                "required": ["title", "status", "id"],
                "additionalProperties": False,
            },
        },
    },
    ["command"],
)
STR_REPLACE_EDITOR = _function(
    "str_replace_editor",
    "View, create and edit files. `view` shows a file with line numbers like `cat -n` "
    "(optionally only view_range), or a directory two levels deep. `create` writes a "
    "new file and refuses to overwrite one. `str_replace` replaces old_str, which must "
    "match exactly one place in the file, whitespace included, with new_str. `insert` "
    "puts new_str after line insert_line (0: at the top). `undo_edit` restores the "
    "file as it was before your last edit of it.",
    {
        "command": {"type": "string", "enum": list(EDITOR_COMMANDS)},
        "path": {"type": "string", "description": "Absolute path of a file or directory."},
        "file_text": {"type": "string", "description": "`create`: the file's content."},
        "old_str": {
            "type": "string",
            "description": "`str_replace`: the exact text to replace (unique in the file).",
        },
        "new_str": {
            "type": "string",
            "description": "`str_replace`: the replacement (empty: delete old_str). "
            "`insert`: the text to insert.",
        },
        "insert_line": {
            "type": "integer",
            "description": "`insert`: the line after which new_str goes.",
        },
        "view_range": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "`view` of a file: [first, last] lines, 1-based; last -1 "
            "means to the end.",
        },
        "security_risk": SECURITY_RISK,
    },
    ["command", "path", "security_risk"],
)
TOOLS: list[dict[str, Any]] = [EXECUTE_BASH, THINK, FINISH, TASK_TRACKER, STR_REPLACE_EDITOR]
"""CodeAct's tools with Harbor's settings (openhands-ai 1.6.0, codeact_agent.py
``_get_tools``: browsing off; in that order), less ``execute_ipython_cell``."""
EDITOR_ARGUMENTS = frozenset(STR_REPLACE_EDITOR["function"]["parameters"]["properties"])


class ToolArgumentError(ValueError):
    """A tool call the harness cannot carry out as written (a format error)."""


def _flag(value: Any, name: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ToolArgumentError(f"{name} must be 'true' or 'false', not {value!r}")


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise ToolArgumentError(f"{name} must be an integer, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise ToolArgumentError(f"{name} must be an integer, not {value!r}")


def _text(arguments: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = arguments.get(name)
    if value is None:
        if required:
            raise ToolArgumentError(f"the parameter {name!r} is required")
        return None
    if not isinstance(value, str):
        raise ToolArgumentError(f"{name} must be a string, not {type(value).__name__}")
    return value


# --- the persistent shell -----------------------------------------------------------------


@dataclass(frozen=True)
class PromptMarker:
    """One prompt the shell printed: which shell, which prompt, and the state then."""

    shell: int
    number: int
    exit_code: int
    cwd: str

    @property
    def key(self) -> tuple[int, int]:
        return self.shell, self.number


@dataclass(frozen=True)
class BashResult:
    """What ``BashSession.execute`` saw."""

    output: str
    exit_code: int
    """The command's status; -1 while it is still running."""
    cwd: str
    status: str
    """completed | soft_timeout | hard_timeout | refused | no_process | empty"""


@dataclass
class _Running:
    start: PromptMarker
    shown: int = 0
    """Characters of its output already returned."""


class BashSession:
    """A persistent bash in a tmux pane whose prompt reports each command's end."""

    def __init__(
        self, terminal: TmuxTerminal, run: Runner, soft_timeout_sec: float = SOFT_TIMEOUT_SEC
    ) -> None:
        self.terminal = terminal
        self._run = run
        self.soft_timeout_sec = soft_timeout_sec
        self.token = uuid.uuid4().hex[:12]
        self.marker = re.compile(
            rf"^###TMAX-{self.token} (\d+) (\d+) (\d+) (.*)###[ \t]*$", re.MULTILINE
        )
        self.prompt: PromptMarker | None = None
        self.running: _Running | None = None
        self.sandbox: Sandbox | None = None

    @property
    def command_file(self) -> str:
        return f"{self.terminal.state_dir}/command.sh"

    def _rcfile(self, path: str) -> str:
        """bash's startup file: the login files, then our prompt (set last, so a
        distribution's bashrc cannot replace it). If the agent's command exits the
        shell, its EXIT trap starts a new one in its place, in the same directory and
        with the prompt counter and the exit status carried over, so the command's
        output stays on the screen and its end is seen like any other."""
        return "\n".join(
            [
                "[ -r /etc/profile ] && . /etc/profile",
                'for f in "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.profile"; do',
                '  if [ -r "$f" ]; then . "$f"; break; fi',
                "done",
                "unset PROMPT_COMMAND",
                "__tmax_n=${__tmax_n:-0}",
                'PROMPT_COMMAND=\'__tmax_rc=$?; if [ -n "${__tmax_exit:-}" ]; then '
                "__tmax_rc=$__tmax_exit; unset __tmax_exit; fi; __tmax_n=$((__tmax_n + 1))'",
                f"PS1='\\n###TMAX-{self.token} $$ ${{__tmax_n}} ${{__tmax_rc}} ${{PWD}}###\\n'",
                "PS2=''",
                "trap '__tmax_exit=$?; export __tmax_n __tmax_exit; "
                f'exec "$BASH" --rcfile {shlex.quote(path)} -i\' EXIT',
                "",
            ]
        )

    def start(self, sandbox: Sandbox, *, width: int = 160, height: int = 40) -> None:
        self.sandbox = sandbox
        self.running = None
        state = self.terminal.state_dir
        rcfile = f"{state}/bashrc"
        delimiter = f"__TMAX_RC_{uuid.uuid4().hex}__"
        script = (
            f"{BIN}/mkdir -p {shlex.quote(state)} && {BIN}/chmod 700 {shlex.quote(state)} && "
            f"{BIN}/cat > {shlex.quote(rcfile)} <<'{delimiter}'\n{self._rcfile(rcfile)}{delimiter}"
        )
        result = self._run(script, sandbox, 30.0)
        if result.exit_code != 0:
            raise TerminalError(f"could not write the shell's rc file: {result.output[-500:]}")
        screen = self.terminal.start(
            sandbox,
            width=width,
            height=height,
            session="openhands",
            shell=f"bash --rcfile {shlex.quote(rcfile)} -i",
            prompt=self.marker,
        )
        markers = self.markers(screen)
        if not markers:
            raise TerminalError(f"the shell printed no prompt marker; screen: {screen[-500:]!r}")
        self.prompt = markers[-1]

    def restart(self) -> None:
        """A new shell (after the agent killed tmux), with the old one's size."""
        self.start(self._sandbox, width=self.terminal.width, height=self.terminal.height)

    def markers(self, text: str) -> list[PromptMarker]:
        return [
            PromptMarker(int(m[1]), int(m[2]), int(m[3]), m[4]) for m in self.marker.finditer(text)
        ]

    def execute(
        self, command: str, is_input: bool = False, timeout: float | None = None
    ) -> BashResult:
        cwd = self.prompt.cwd if self.prompt else ""
        if self.running is None:
            if is_input:
                return BashResult("", -1, cwd, "no_process")
            if not command.strip():
                return BashResult("", -1, cwd, "empty")
            assert self.prompt is not None
            self.running = _Running(self.prompt)
            delimiter = f"__TMAX_CMD_{uuid.uuid4().hex}__"
            target = shlex.quote(self.command_file)
            script = (
                f"{BIN}/cat > {target} <<'{delimiter}'\n{command}\n{delimiter}\n"
                # The old scrollback is no longer needed: the prompt it starts at is on
                # the screen.
                + self.terminal.keys_script(f" . {self.command_file}\n", clear_history=True)
            )
            return self._wait(timeout, self._send_and_look(script))
        if is_input:
            keys = command if is_key_name(command) else command + "\n"
            return self._wait(timeout, self._send_and_look(self.terminal.keys_script(keys)))
        if command.strip():
            return BashResult("", -1, cwd, "refused")
        return self._wait(timeout)

    def _send_and_look(self, script: str) -> tuple[int, str] | None:
        """Run ``script`` (which sends keys), give a quick command a moment to finish,
        and take the first snapshot, all in one call: a fast command costs one round
        trip."""
        if not script:
            return None
        script += f"\n{BIN}/sleep {SETTLE_SEC}\n{self.terminal.snapshot_script()}"
        result = self._run(script, self._sandbox, 30.0)
        if result.exit_code != 0:
            raise TerminalError(f"could not send keys to the shell: {result.output[-500:]}")
        return self.terminal.parse_snapshot(result.output)

    @property
    def _sandbox(self) -> Sandbox:
        if self.sandbox is None:
            raise TerminalError("the shell is not started")
        return self.sandbox

    def _wait(self, timeout: float | None, first: tuple[int, str] | None = None) -> BashResult:
        """Poll until a new prompt appears, the output stalls (soft timeout) or
        ``timeout`` passes; then collect the output. ``first`` is a snapshot already
        taken."""
        assert self.running is not None
        start = self.running.start
        started = time.monotonic()
        last_change = started
        last_seen: tuple[int, str] | None = None
        delay = self.terminal.poll_initial_sec
        while True:
            history, screen = first or self.terminal.snapshot()
            first = None
            markers = self.markers(screen)
            if markers and markers[-1].key != start.key:
                # The screen is enough when the command's first prompt is still on it.
                whole = history == 0 or any(m.key == start.key for m in markers)
                return self._collect(markers[-1], screen if whole else None)
            now = time.monotonic()
            if (history, screen) != last_seen:
                last_seen, last_change = (history, screen), now
            if timeout is not None:
                if now - started >= timeout:
                    return self._collect(None, None, "hard_timeout")
                remaining = timeout - (now - started)
            else:
                if now - last_change >= self.soft_timeout_sec:
                    return self._collect(None, None, "soft_timeout")
                remaining = self.soft_timeout_sec - (now - last_change)
            time.sleep(max(0.0, min(delay, remaining)))
            delay = min(delay * 1.5, self.terminal.poll_max_sec)

    def _collect(
        self, end: PromptMarker | None, screen: str | None, status: str = "completed"
    ) -> BashResult:
        """The running command's output between its start prompt and ``end`` (or all
        of it so far), less what was already shown."""
        assert self.running is not None
        running = self.running
        text = self.terminal.capture(full_history=True) if screen is None else screen
        matches = list(self.marker.finditer(text))
        begin = next(
            (m for m in reversed(matches) if (int(m[1]), int(m[2])) == running.start.key), None
        )
        stop = matches[-1] if end is not None and matches else None
        body = text[begin.end() if begin else 0 : stop.start() if stop else len(text)]
        body = body.removeprefix("\n")
        first, newline, rest = body.partition("\n")
        if self.command_file in first:  # the `. file` line the harness typed
            body = rest if newline else ""
        body = clean_screen(self.marker.sub("", body))  # no marker ever reaches the model
        if begin is None:
            output = body  # the start scrolled away or the screen was cleared: show it all
        else:
            output = body[running.shown :] if len(body) >= running.shown else body
        if end is None:
            running.shown = len(body)
            return BashResult(output.strip("\n"), -1, running.start.cwd, status)
        self.running = None
        self.prompt = end
        return BashResult(output.strip("\n"), end.exit_code, end.cwd, "completed")


# --- the file editor ----------------------------------------------------------------------


def numbered(text: str, first_line: int = 1) -> str:
    """Lines with their numbers, as ``cat -n`` prints them."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, first_line))


def view_text(text: str, path: str, view_range: list[int] | None) -> str:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    count = len(lines)
    if view_range is None:
        return f"Contents of {path}, with line numbers:\n{numbered(text)}"
    if len(view_range) != 2:
        raise ToolArgumentError("view_range must be two integers: [first, last]")
    first, last = view_range
    if not 1 <= first <= max(count, 1):
        raise ToolArgumentError(
            f"view_range starts at line {first}, but {path} has {count} lines (first is 1)"
        )
    if last == -1:
        last = count
    if last < first or last > count:
        raise ToolArgumentError(
            f"view_range ends at line {last}; it must be between {first} and {count}, or -1"
        )
    shown = "\n".join(lines[first - 1 : last])
    return f"Lines {first}-{last} of {path}:\n{numbered(shown, first)}"


def snippet(text: str, first: int, last: int) -> str:
    """Lines ``first``..``last`` (1-based) with a few lines around them, numbered."""
    lines = text.split("\n")
    start = max(1, first - SNIPPET_LINES)
    stop = min(len(lines), last + SNIPPET_LINES)
    return numbered("\n".join(lines[start - 1 : stop]), start)


def replace_once(text: str, old: str, new: str, path: str) -> tuple[str, str]:
    """``text`` with the one occurrence of ``old`` replaced; and the report."""
    if not old:
        raise ToolArgumentError("old_str is empty; give the exact text to replace")
    count = text.count(old)
    if count == 0:
        raise ToolArgumentError(
            f"No replacement was made: old_str does not occur verbatim in {path}. Check "
            "whitespace and indentation (view the file to copy the exact text)."
        )
    if count > 1:
        lines, position = [], text.find(old)
        while position >= 0:
            lines.append(text.count("\n", 0, position) + 1)
            position = text.find(old, position + 1)
        raise ToolArgumentError(
            f"No replacement was made: old_str occurs {count} times in {path} (starting on "
            f"lines {', '.join(map(str, lines))}). Include more surrounding text so that it "
            "matches exactly one place."
        )
    position = text.find(old)
    edited = text[:position] + new + text[position + len(old) :]
    first = text.count("\n", 0, position) + 1
    last = first + new.count("\n")
    report = (
        f"Edited {path}. The changed region now reads:\n{snippet(edited, first, last)}\n"
        "Check that it is what you meant; undo_edit takes the edit back."
    )
    return edited, report


def insert_after(text: str, line: int, new: str, path: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not 0 <= line <= len(lines):
        raise ToolArgumentError(
            f"insert_line {line} is out of range: {path} has {len(lines)} lines (use 0 to "
            f"{len(lines)})"
        )
    block = new if new.endswith("\n") or line == len(lines) else new + "\n"
    if line == len(lines) and lines and not lines[-1].endswith("\n"):
        block = "\n" + block
    edited = "".join(lines[:line]) + block + "".join(lines[line:])
    last = line + max(1, new.count("\n") + (0 if new.endswith("\n") else 1))
    report = (
        f"Inserted the text after line {line} of {path}. The region now reads:\n"
        f"{snippet(edited, line + 1, last)}\n"
        "Check the indentation and placement; undo_edit takes the edit back."
    )
    return edited, report


@dataclass(frozen=True)
class PathInfo:
    kind: str
    """file | directory | missing | other | unreadable"""
    data: bytes = b""
    listing: str = ""
    size: int = 0


class FileEditor:
    """``str_replace_editor``: text edits on the host, file I/O through ``run``."""

    def __init__(self, run: Runner, sandbox: Sandbox) -> None:
        self._run = run
        self.sandbox = sandbox
        self.history: dict[str, list[str | None]] = {}
        """Per path, the contents before each edit (None: the file did not exist)."""
        # Each read returns at most this much file per call, base64-encoded, so that it
        # fits the sandbox's output limit.
        self.chunk_bytes = max(4096, (sandbox.limits.output_limit_bytes - 4096) * 3 // 4)

    def __call__(self, arguments: dict[str, Any]) -> str:
        """Carry out one call; a ``ToolArgumentError`` explains a call that is wrong as
        written, and other problems come back as the result text."""
        command = _text(arguments, "command", required=True)
        if command not in EDITOR_COMMANDS:
            raise ToolArgumentError(
                f"unknown command {command!r}; use one of {', '.join(EDITOR_COMMANDS)}"
            )
        raw_path = _text(arguments, "path", required=True) or ""
        if not raw_path.startswith("/"):
            raise ToolArgumentError(f"the path {raw_path!r} is not absolute (it must start with /)")
        path = posixpath.normpath(raw_path)
        try:
            return getattr(self, command)(path, arguments)
        except EditorProblem as problem:
            return f"ERROR: {problem}"

    # --- commands ---------------------------------------------------------------------

    def view(self, path: str, arguments: dict[str, Any]) -> str:
        view_range = arguments.get("view_range")
        if isinstance(view_range, str):
            try:
                view_range = json.loads(view_range)
            except json.JSONDecodeError:
                raise ToolArgumentError("view_range must be a list of two integers") from None
        if view_range is not None:
            if not isinstance(view_range, list):
                raise ToolArgumentError("view_range must be a list of two integers")
            view_range = [_integer(v, "view_range") for v in view_range]
        info = self._read(path)
        if info.kind == "directory":
            if view_range is not None:
                raise ToolArgumentError("view_range applies to files, not directories")
            return (
                f"Files and directories in {path}, two levels deep (hidden ones left out):\n"
                f"{info.listing}"
            )
        return view_text(self._text(path, info), path, view_range)

    def create(self, path: str, arguments: dict[str, Any]) -> str:
        file_text = _text(arguments, "file_text", required=True) or ""
        info = self._read(path, contents=False)
        if info.kind != "missing":
            raise EditorProblem(
                f"{path} already exists; `create` does not overwrite. Edit it with "
                "str_replace or insert, or remove it first."
            )
        self._write(path, file_text, make_parents=True)
        self.history.setdefault(path, []).append(None)
        return f"Created {path} ({len(file_text.splitlines())} lines)."

    def str_replace(self, path: str, arguments: dict[str, Any]) -> str:
        old = _text(arguments, "old_str", required=True) or ""
        new = _text(arguments, "new_str") or ""
        if old == new:
            raise ToolArgumentError("old_str and new_str are the same; nothing would change")
        text = self._text(path, self._read(path))
        try:
            edited, report = replace_once(text, old, new, path)
        except ToolArgumentError as problem:
            return f"ERROR: {problem}"
        self._write(path, edited)
        self.history.setdefault(path, []).append(text)
        return report

    def insert(self, path: str, arguments: dict[str, Any]) -> str:
        if arguments.get("insert_line") is None:
            raise ToolArgumentError("the parameter 'insert_line' is required")
        line = _integer(arguments["insert_line"], "insert_line")
        new = _text(arguments, "new_str", required=True) or ""
        text = self._text(path, self._read(path))
        try:
            edited, report = insert_after(text, line, new, path)
        except ToolArgumentError as problem:
            return f"ERROR: {problem}"
        self._write(path, edited)
        self.history.setdefault(path, []).append(text)
        return report

    def undo_edit(self, path: str, arguments: dict[str, Any]) -> str:
        edits = self.history.get(path)
        if not edits:
            raise EditorProblem(f"there is no edit of {path} to undo")
        previous = edits.pop()
        if previous is None:
            result = self._run(f"{BIN}/rm -f -- {shlex.quote(path)}", self.sandbox, 30.0)
            if result.exit_code != 0:
                raise EditorProblem(f"could not remove {path}: {result.output.strip()}")
            return f"Undid the creation of {path}: the file is removed."
        self._write(path, previous)
        return f"Undid the last edit of {path}. It now reads:\n{numbered(previous)}"

    # --- files in the sandbox ---------------------------------------------------------

    def _read(self, path: str, contents: bool = True) -> PathInfo:
        quoted = shlex.quote(path)
        first = f'{BIN}/head -c {self.chunk_bytes} "$p" | {BIN}/base64 -w0' if contents else "true"
        script = f"""p={quoted}
if [ -d "$p" ]; then
  echo DIR
  {BIN}/find "$p" -mindepth 1 -maxdepth 2 -name '.*' -prune -o \\( -type d -printf '%p/\\n' \\) \\
    -o -print | LC_ALL=C {BIN}/sort
elif [ -f "$p" ]; then
  if [ -r "$p" ]; then echo "FILE $({BIN}/stat -L -c %s "$p")"; {first}
  else echo UNREADABLE; fi
elif [ -e "$p" ] || [ -L "$p" ]; then echo OTHER
else echo MISSING; fi"""
        result = self._run(script, self.sandbox, 60.0)
        header, _, body = result.output.partition("\n")
        kind, _, size_text = header.partition(" ")
        if kind == "DIR":
            return PathInfo("directory", listing=body.rstrip("\n"))
        if kind in ("MISSING", "OTHER", "UNREADABLE"):
            return PathInfo(kind.lower())
        if kind != "FILE" or not size_text.strip().isdigit():
            raise EditorProblem(f"could not read {path}: {result.output.strip()[:300]}")
        size = int(size_text)
        if not contents:
            return PathInfo("file", size=size)
        if size > MAX_FILE_BYTES:
            raise EditorProblem(
                f"{path} is {size} bytes, too large for the editor; use execute_bash "
                "(head, tail, grep, sed -n) instead"
            )
        data = base64.b64decode(body.strip() or b"")
        while len(data) < size:
            more = self._run(
                f"{BIN}/tail -c +{len(data) + 1} {quoted} | {BIN}/head -c {self.chunk_bytes} "
                f"| {BIN}/base64 -w0",
                self.sandbox,
                60.0,
            )
            chunk = base64.b64decode(more.output.strip() or b"")
            if not chunk:
                break  # the file shrank while we read it
            data += chunk
        return PathInfo("file", data=data, size=size)

    def _text(self, path: str, info: PathInfo) -> str:
        if info.kind == "missing":
            raise EditorProblem(f"{path} does not exist")
        if info.kind == "directory":
            raise EditorProblem(f"{path} is a directory; only `view` works on directories")
        if info.kind != "file":
            raise EditorProblem(f"{path} is not a readable regular file")
        if b"\0" in info.data:
            raise EditorProblem(f"{path} is a binary file; the editor handles text only")
        try:
            return info.data.decode("utf-8")
        except UnicodeDecodeError:
            raise EditorProblem(f"{path} is not UTF-8 text; the editor handles text only") from None

    def _write(self, path: str, text: str, make_parents: bool = False) -> None:
        data = text.encode("utf-8", errors="surrogateescape")
        if len(data) > MAX_FILE_BYTES:
            raise EditorProblem(f"the new content of {path} is over {MAX_FILE_BYTES} bytes")
        encoded = base64.encodebytes(data).decode("ascii")
        delimiter = f"__TMAX_FILE_{uuid.uuid4().hex}__"
        quoted = shlex.quote(path)
        parents = (
            f"{BIN}/mkdir -p -- {shlex.quote(posixpath.dirname(path))} && " if make_parents else ""
        )
        script = f"{parents}{BIN}/base64 -d > {quoted} <<'{delimiter}'\n{encoded}{delimiter}"
        result = self._run(script, self.sandbox, 60.0)
        if result.exit_code != 0:
            raise EditorProblem(f"could not write {path}: {result.output.strip()[:300]}")


class EditorProblem(Exception):
    """The call was well formed but cannot be done (the file is missing, ...)."""


# --- the task tracker ---------------------------------------------------------------------


class TaskTracker:
    """``task_tracker``: a to-do list kept by the harness, outside the sandbox (upstream
    keeps it in the session's directory, not the workspace). ``plan`` replaces the list,
    ``view`` shows it."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, str]] | None = None

    def __call__(self, arguments: dict[str, Any]) -> str:
        command = _text(arguments, "command", required=True)
        if command == "view":
            if self.tasks is None:
                return load_prompt("openhands", "no_task_list.md").strip()
            return self.render()
        if command != "plan":
            raise ToolArgumentError(f"unknown command {command!r}; use view or plan")
        if "task_list" not in arguments:
            raise ToolArgumentError("the plan command needs task_list")
        raw = arguments["task_list"]
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                raise ToolArgumentError("task_list must be a list of tasks") from None
        if not isinstance(raw, list):
            raise ToolArgumentError("task_list must be a list of tasks")
        tasks = []
        for number, task in enumerate(raw, 1):
            if not isinstance(task, dict):
                raise ToolArgumentError(f"task {number} must be an object with id, title, status")
            tasks.append(  # missing fields are filled in, as upstream does
                {
                    "id": str(task.get("id", f"task-{number}")),
                    "title": str(task.get("title", "(untitled)")),
                    "status": str(task.get("status", "todo")),
                    "notes": str(task.get("notes", "")),
                }
            )
        self.tasks = tasks
        return f"The task list now has {len(tasks)} task(s):\n{self.render()}"

    def render(self) -> str:
        assert self.tasks is not None
        marks = {"todo": "[ ]", "in_progress": "[~]", "done": "[x]"}
        lines = []
        for number, task in enumerate(self.tasks, 1):
            mark = marks.get(task["status"], "[ ]")
            lines.append(f"{number}. {mark} {task['title']} ({task['id']}, {task['status']})")
            if task["notes"]:
                lines.append(f"   {task['notes']}")
        return "\n".join(lines) if lines else "(the task list is empty)"


# --- the condenser ------------------------------------------------------------------------

CONDENSER_MAX_EVENTS = 100
"""Events in the history past which the condenser summarises (openhands-ai 1.6.0
``LLMSummarizingCondenserConfig.max_size``)."""
CONDENSER_KEEP_FIRST = 1
"""Events at the start that are always kept (``keep_first``: the system message)."""
CONDENSER_EVENT_CHARS = 10_000
"""Each forgotten event is cut to this many characters for the summary request
(``max_event_length``)."""


def turn_events(turn: list[Message]) -> int:
    """How many events of OpenHands' history one turn makes: an action and an
    observation per tool call (a reply without a call: a message and the answer)."""
    calls = len(turn[0].get("tool_calls") or []) if turn and turn[0]["role"] == "assistant" else 0
    return 2 * max(calls, 1)


def split_turns(
    messages: list[Message],
) -> tuple[list[Message], str | None, list[list[Message]]]:
    """The head (the system prompt and the task), an earlier summary if there is one,
    and the turns: each an assistant message and the results or notes that follow."""
    head, rest = messages[:2], messages[2:]
    summary = None
    if rest and rest[0]["role"] == "user":
        summary, rest = str(rest[0]["content"]), rest[1:]
    turns: list[list[Message]] = []
    for message in rest:
        if message["role"] == "assistant" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return head, summary, turns


def event_text(turn: list[Message]) -> list[str]:
    """A turn as the condenser shows it to the model: one entry per event."""
    entries = []
    for message in turn:
        content = str(message.get("content") or "")
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            entries.append(
                "\n".join(
                    [f"The agent: {content}".rstrip()]
                    + [
                        f"Tool call {c['function']['name']}: {c['function']['arguments']}"
                        for c in calls
                    ]
                )
            )
        else:
            entries.append(f"Result: {content}")
    return [truncate_middle(entry, CONDENSER_EVENT_CHARS) for entry in entries]


# --- upstream prompts ---------------------------------------------------------------------

UPSTREAM_PROMPTS = "agenthub/codeact_agent/prompts"
UPSTREAM_SYSTEM = "system_prompt_long_horizon.j2"
"""``AgentConfig.resolved_system_prompt_filename`` in openhands-ai 1.6.0: plan mode is on
by default (``enable_plan_mode``), which picks this template, and Harbor does not change
it (harbor 0.26.0 ``agents/installed/openhands.py`` sets no ``AGENT_*`` for it)."""
UPSTREAM_SYSTEM_VARIABLES: dict[str, Any] = {"cli_mode": False}
"""What ``Agent.get_system_message`` passes: ``AgentConfig.cli_mode``, false unless set
(``python -m openhands.core.main``, which Harbor runs, does not set it)."""


def upstream_system_prompt() -> str:
    """CodeAct's system message, rendered as ``PromptManager.get_system_message`` does
    (its ``refine_prompt`` changes nothing off Windows). Undefined variables are errors
    here (StrictUndefined), so a template that wants more than we give stops the run."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    path = upstream.upstream_path("openhands", f"{UPSTREAM_PROMPTS}/{UPSTREAM_SYSTEM}")
    environment = Environment(loader=FileSystemLoader(path.parent), undefined=StrictUndefined)
    return environment.get_template(path.name).render(**UPSTREAM_SYSTEM_VARIABLES).strip()


# --- the harness --------------------------------------------------------------------------


class OpenHandsHarness(Harness):
    name = "openhands"
    version = "1.0"

    def __init__(
        self,
        settings: HarnessSettings | None = None,
        *,
        soft_timeout_sec: float = SOFT_TIMEOUT_SEC,
        width: int = 160,
        height: int = 40,
        condenser: bool = True,
    ) -> None:
        super().__init__(settings)
        self.width, self.height = width, height
        self.terminal = TmuxTerminal(self.run)
        self.shell = BashSession(self.terminal, self.run, soft_timeout_sec)
        self.editor: FileEditor | None = None
        self.tool_calls_used = 0
        self.tasks = TaskTracker()
        self.condenser = condenser
        """Summarise forgotten turns as OpenHands' default condenser does (on unless
        turned off; see ``compact``)."""

    @property
    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        if upstream.check_mode(self.settings.prompts) == "upstream":
            system, user = upstream_system_prompt(), instruction  # the task as Harbor passes it
        else:
            system = load_prompt("openhands", "system.md").strip()
            user = render(
                load_prompt("openhands", "instance.md"), instruction=instruction.strip()
            ).strip()
        self.shell.start(sandbox, width=self.width, height=self.height)
        self.editor = FileEditor(self.run, sandbox)
        trajectory.system(system)
        trajectory.user(user)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        if not completion.tool_calls:
            message = load_prompt("openhands", "no_tool.md").strip()
            trajectory.observe(message)
            return Action(messages=[{"role": "user", "content": message}], format_error=True)
        action = Action()
        finished_by: str | None = None
        for call in completion.tool_calls:
            if finished_by is not None:
                result = f"(not run: {finished_by})"
            elif self.tool_calls_used >= self.settings.max_tool_calls:
                result = "(not run: the tool-call budget is used up)"
            else:
                try:
                    result, done = self._call(call)
                except ToolArgumentError as problem:
                    result, done = f"ERROR: {problem}", False
                    action.format_error = True
                else:
                    action.tool_calls += 1
                    self.tool_calls_used += 1
                if done:
                    finished_by = "the episode already finished"
                    action.done, action.exit_status = True, "finished"
            trajectory.observe(result, call.id)
            action.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return action

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
        """OpenHands' default condenser (openhands-ai 1.6.0, ``LLMSummarizingCondenser``
        as ``core/config/utils.py`` sets it when no condenser is configured): once the
        history holds more than 100 events, or the context is full (upstream's
        condensation request), the model summarises the turns between the first
        messages and the latest 48 events, and the conversation goes on from the system
        prompt, the task, the summary and those latest turns."""
        if not self.condenser:
            return None
        head, summary, turns = split_turns(messages)
        events = len(head) + (summary is not None) + sum(turn_events(t) for t in turns)
        if not overflow and events <= CONDENSER_MAX_EVENTS:
            return None
        room = CONDENSER_MAX_EVENTS // 2 - CONDENSER_KEEP_FIRST - 1
        tail: list[list[Message]] = []
        for turn in reversed(turns):
            if sum(turn_events(t) for t in tail) + turn_events(turn) > room:
                break
            tail.insert(0, turn)
        forgotten = turns[: len(turns) - len(tail)]
        if not forgotten:
            return None
        request = render(
            load_prompt("openhands", "condense.md"),
            previous_summary=summary or "(none)",
            events="\n\n".join(
                f"<event>\n{entry}\n</event>" for turn in forgotten for entry in event_text(turn)
            ),
        ).strip()
        try:
            completion = model.complete(
                [{"role": "user", "content": request}],
                tools=None,
                max_tokens=self.settings.max_turn_tokens,
                temperature=self.settings.temperature,
                top_p=self.settings.top_p,
            )
        except (ContextLengthExceeded, ModelError) as error:
            log.info("openhands: condensing the history failed: %s", error)
            return None
        note = render(load_prompt("openhands", "summary.md"), summary=completion.content).strip()
        trajectory.system(
            f"The history was condensed: {len(forgotten)} turns replaced by a summary."
        )
        trajectory.steps[-1]["extra"] = {
            "context_management": {"type": "condensation", "overflow": overflow},
            "summary": completion.content,
        }
        kept = [message for turn in tail for message in turn]
        return Compaction([*head, {"role": "user", "content": note}, *kept], [completion])

    def _call(self, call: ToolCall) -> tuple[str, bool]:
        """Run one tool call: (result text, whether it finishes the episode)."""
        try:
            arguments = call.parsed_arguments()
        except ValueError as error:
            raise ToolArgumentError(str(error)) from None
        if call.name == "finish":
            return "(finished)", True
        if call.name == "execute_bash":
            return self._bash(arguments), False
        if call.name == "think":  # nothing runs: the thought stays in the conversation
            return load_prompt("openhands", "think.md").strip(), False
        if call.name == "task_tracker":
            return self.tasks(arguments), False
        if call.name == "str_replace_editor":
            unknown = sorted(set(arguments) - EDITOR_ARGUMENTS)
            if unknown:  # upstream refuses the call rather than ignore them
                raise ToolArgumentError(
                    f"unexpected arguments {', '.join(unknown)}; the editor takes "
                    f"{', '.join(sorted(EDITOR_ARGUMENTS))}"
                )
            assert self.editor is not None
            result = self.editor(arguments)
            return truncate_middle(result, OBSERVATION_CHARS, EDITOR_TRUNCATION_NOTE), False
        names = ", ".join(tool["function"]["name"] for tool in TOOLS)
        raise ToolArgumentError(f"there is no tool {call.name!r}; the tools are {names}")

    def _bash(self, arguments: dict[str, Any]) -> str:
        command = _text(arguments, "command", required=True) or ""
        is_input = _flag(arguments.get("is_input"), "is_input")
        timeout = arguments.get("timeout")
        if timeout is not None:
            try:
                timeout = float(timeout)
            except (TypeError, ValueError):
                raise ToolArgumentError(
                    f"timeout must be a number of seconds, not {timeout!r}"
                ) from None
            if timeout <= 0:
                raise ToolArgumentError("timeout must be positive")
            timeout = min(timeout, self.settings.command_timeout_sec)
        try:
            result = self.shell.execute(command, is_input, timeout)
        except TerminalError as error:
            restart_or_end(self.shell, error, "openhands shell")
            return "[The shell had stopped; a new one was started. Run the command again.]"
        return format_bash_result(result, command, self.shell.soft_timeout_sec, timeout)


def format_bash_result(
    result: BashResult, command: str, soft_timeout: float, hard_timeout: float | None
) -> str:
    """The observation of an ``execute_bash`` call (OpenHands' suffix lines)."""
    if result.status == "refused":
        shown = command if len(command) <= 200 else command[:200] + "..."
        return render(load_prompt("openhands", "still_running.md"), command=shown).strip()
    if result.status in ("no_process", "empty"):
        name = "no_process.md" if result.status == "no_process" else "empty_command.md"
        return load_prompt("openhands", name).strip()
    output = truncate_middle(result.output, OBSERVATION_CHARS, TRUNCATION_NOTE)
    if result.status == "completed":
        note = f"[The command completed with exit code {result.exit_code}.]"
    else:
        name, seconds = (
            ("hard_timeout.md", hard_timeout)
            if result.status == "hard_timeout"
            else ("soft_timeout.md", soft_timeout)
        )
        note = render(load_prompt("openhands", name), seconds=f"{seconds:g}").strip()
    parts = [output] if output else []
    parts += [note, f"[Current working directory: {result.cwd}]"]
    return "\n".join(parts)
