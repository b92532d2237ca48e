"""A tmux terminal inside a sandbox: what the Terminus-2 and OpenHands harnesses type into.

The toolbox ships its own tmux (``/opt/tmax/bin/tmux``), so every image gets the same
terminal whether or not it has tmux. The server runs inside the sandbox and outlives
each ``sandbox.run`` call; every interaction (start, keys, captures, polls) is one
``run`` call through the harness, so its time counts as harness overhead.

    terminal = TmuxTerminal(harness.run)
    screen = terminal.start(sandbox)            # bash --login, 160x40, waits for a prompt
    terminal.send_keys("ls -la\\n")              # text, then Enter
    terminal.send_keys("C-c")                   # a tmux key name: that key
    update = terminal.incremental_output()      # what appeared since the last look

How keystrokes are sent (``key_plan``), the rule the harness prompts describe:

* A keystroke string that is exactly one tmux key name — ``C-c``, ``C-d``, ``M-x``,
  ``^C``, ``Enter``, ``Escape``, ``Tab``, ``Up``, ``F5``, ... — sends that key; trailing
  newlines after it each add an Enter (``"C-c\\n"`` is Ctrl-C, then Enter).
* Anything else is literal text (``send-keys -l``, so ``"Enter"`` inside a sentence is
  five letters), and every ``"\\n"`` in it is the Enter key, i.e. a carriage return as a
  real keyboard sends it. ``"ls\\n"`` runs ``ls``; ``"ls"`` leaves it typed on the line;
  ``"a\\nb\\n"`` types two lines. ``"\\r\\n"`` counts as one newline.

tmux would eat a semicolon that ends an argument (its command separator; ``\\;`` is its
escape), so trailing semicolons of a text chunk are sent as hex keys (``-H 3b``) and
``find . -exec rm {} \\;`` arrives intact.

New output (``incremental_output``) is worked out inside the sandbox, so a long
scrollback never crosses the pipe. One tmux call captures the scrollback and screen,
clears the scrollback and captures the screen again; an awk script compares the first
capture with the screen kept from the previous call. The scrollback only ever holds
what scrolled off since then, so if the previous screen's lines (all but its last, the
cursor line, which may have been typed on) start the capture, everything from that
last line on is new: the prompt line the command was typed on is shown again,
completed. If they do not (the screen was cleared or redrawn, a full-screen program
took over, more than ``history_limit`` lines arrived) or nothing changed, the visible
screen is returned instead, and says so. The agent never scrolls back (keys sent with
``send-keys`` bypass tmux's own bindings), so clearing the scrollback hides nothing.
"""

from __future__ import annotations

import logging
import re
import shlex
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tmax.sandbox.base import SESSION_DIR, TOOLBOX, ExecResult, Sandbox, SandboxError

log = logging.getLogger("tmax.harness.terminal")

TMUX = f"{TOOLBOX}/bin/tmux"
BIN = f"{TOOLBOX}/bin"
STATE_ROOT = f"{SESSION_DIR}/tmux"
"""Per-terminal state inside the sandbox: the tmux socket and the last capture."""
HISTORY_LIMIT = 100_000
"""Scrollback rows tmux keeps between two looks (each look clears it). Bounded because
the tmux server's memory counts against the sandbox's limit (about 80 MB at 160 wide);
more new output than this between two looks falls back to the visible screen."""
TERMINALS = ("tmux-256color", "screen-256color", "xterm-256color")
"""TERM inside the pane: the first one whose terminfo entry the image has."""

Runner = Callable[[str, Sandbox, float | None], ExecResult]
"""``Harness.run``: run a command in the sandbox's control session, timing it."""

_NAMED_KEYS = (
    "Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|IC|DC|Insert|Delete|"
    "PageUp|PgUp|PageDown|PgDn|PPage|NPage|KPEnter|F[1-9]|F1[0-2]"
)
KEY_NAME = re.compile(
    rf"(?:[CMS]-)+(?:{_NAMED_KEYS}|\S)|(?:{_NAMED_KEYS})|\^[A-Za-z@\[\]\\^_?]",
)
"""A single tmux key name: ``C-c``, ``M-b``, ``C-M-x``, ``^D``, ``Escape``, ``F5``."""

CUT_NOTE = "[... output limited to {limit} bytes; {omitted} interior bytes omitted ...]"
"""Put where ``incremental_output(limit_bytes=...)`` cut new output (Terminus-2's note)."""
_BROKEN = "\ufffd"

_DIFF_AWK = r"""
# stdin: the scrollback and screen, a line `mark`, then the screen again after the
# history was cleared. `prev` holds that second screen from the previous call, which
# is where the next scrollback starts. Output: "NEW|SCREEN <bytes> <omitted>", text.
function blank(x) { return x ~ /^[ \t]*$/ }
function emit(kind, a, from, to,   i, n, half, need, piece, out, rest) {
  n = 0
  for (i = from; i <= to; i++) n += length(a[i]) + (i > from)
  if (limit <= 0 || n <= limit) {
    printf "%s %d 0\n", kind, n
    for (i = from; i <= to; i++) printf "%s%s", (i > from ? "\n" : ""), a[i]
    return
  }
  half = int(limit / 2); out = ""; need = half
  for (i = from; need > 0; i++) {
    piece = (i > from ? "\n" : "") a[i]
    if (length(piece) >= need) { out = out substr(piece, 1, need); need = 0 }
    else { out = out piece; need -= length(piece) }
  }
  rest = ""; need = half
  for (i = to; need > 0; i--) {
    piece = (i > from ? "\n" : "") a[i]
    if (length(piece) >= need) { rest = substr(piece, length(piece) - need + 1) rest; need = 0 }
    else { rest = piece rest; need -= length(piece) }
  }
  printf "%s %d %d\n%s\n%s\n%s", kind, n, n - 2 * half, out, cut, rest
}
BEGIN { while ((getline line < prev) > 0) p[++np] = line; close(prev) }
$0 == mark && !screen { screen = 1; next }
{ if (screen) s[++ns] = $0; else c[++nc] = $0 }
END {
  if (!screen) exit 3
  while (nc > 0 && blank(c[nc])) nc--
  while (ns > 0 && blank(s[ns])) ns--
  # New output: everything from the previous screen's last line on, provided the
  # lines above it are unchanged (that last line is where the cursor was, and may
  # have been typed on or redrawn since).
  same = (nc == np); prefix = (np > 0 && nc >= np)
  for (i = 1; i <= np && (same || prefix); i++)
    if (c[i] != p[i]) { same = 0; if (i < np) prefix = 0 }
  if (prefix && !same) emit("NEW", c, np, nc)
  else emit("SCREEN", s, 1, ns)
  printf "" > prev
  for (i = 1; i <= ns; i++) print s[i] > prev
  close(prev)
}
"""

TEXT_CHUNK_BYTES = 2000
"""Literal text per ``send-keys -l`` argument."""
CLIENT_MESSAGE_BYTES = 8000
"""Arguments per tmux client call: tmux rejects commands over its 16 KiB message size."""

T = TypeVar("T")


class TerminalError(SandboxError):
    """The terminal could not be started or stopped answering."""


def is_key_name(keys: str) -> bool:
    """Whether ``keys`` is exactly one tmux key name (sent as that key, not as text)."""
    return KEY_NAME.fullmatch(keys) is not None


def key_plan(keys: str) -> list[tuple[str, str]]:
    """How a keystroke string is sent: ``("key", name)`` and ``("text", literal)`` steps.

    >>> key_plan("ls -la\\n")
    [('text', 'ls -la'), ('key', 'Enter')]
    >>> key_plan("C-c")
    [('key', 'C-c')]
    """
    keys = keys.replace("\r\n", "\n").replace("\0", "")
    body = keys.rstrip("\n")
    if body and is_key_name(body):
        return [("key", body)] + [("key", "Enter")] * (len(keys) - len(body))
    plan: list[tuple[str, str]] = []
    for index, line in enumerate(keys.split("\n")):
        if index:
            plan.append(("key", "Enter"))
        if line:
            plan.append(("text", line))
    return plan


def _chunks(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` UTF-8 bytes, on character bounds."""
    pieces, current, size = [], [], 0
    for char in text:
        width = len(char.encode("utf-8", errors="surrogatepass"))
        if size + width > limit and current:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(char)
        size += width
    if current:
        pieces.append("".join(current))
    return pieces


def clean_screen(text: str) -> str:
    """Trailing spaces off every line, trailing blank lines off the end."""
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n")


def restart_or_end(restartable: Any, error: Exception, what: str) -> None:
    """After the agent broke its terminal (``kill -9 -1``, say), start a new one once;
    if that fails too, the episode is over (``sandbox_died``)."""
    from tmax.harness.base import EpisodeOver

    log.warning("%s failed (%s); starting a new one", what, error)
    try:
        restartable.restart()
    except TerminalError as again:
        raise EpisodeOver("sandbox_died", f"the {what} could not be restarted: {again}") from None


@dataclass(frozen=True)
class TerminalOutput:
    """What the terminal shows after an action."""

    text: str
    is_screen: bool
    """True: the visible screen (new output could not be told apart, or there was none)."""
    total_bytes: int = 0
    omitted_bytes: int = 0
    """Bytes cut from the middle of the new output (``limit_bytes``)."""


class TmuxTerminal:
    """One tmux session with one pane, driven through ``run`` (see the module docstring)."""

    def __init__(
        self,
        run: Runner | None = None,
        *,
        history_limit: int = HISTORY_LIMIT,
        poll_initial_sec: float = 0.01,
        poll_max_sec: float = 0.25,
    ) -> None:
        self._run = run or (lambda command, sandbox, timeout=None: sandbox.run(command, timeout))
        self.history_limit = history_limit
        self.poll_initial_sec = poll_initial_sec
        self.poll_max_sec = poll_max_sec
        self.sandbox: Sandbox | None = None
        self.session = "tmax"
        self.width, self.height = 160, 40
        self._start_options: dict[str, Any] = {}

    # --- plumbing ---------------------------------------------------------------------

    @property
    def state_dir(self) -> str:
        return f"{STATE_ROOT}/{self.session}"

    @property
    def _tmux(self) -> str:
        """The tmux client command line, on this terminal's own socket (the agent's own
        ``tmux`` calls use the default socket and cannot reach it)."""
        return f"{TMUX} -S {shlex.quote(self.state_dir + '/sock')}"

    @property
    def _target(self) -> str:
        return shlex.quote(self.session)

    @property
    def _revive(self) -> list[str]:
        """A tmux command that restarts the pane's shell if it has exited. tmux's
        pane-died hook does this too, but misses an exit now and then."""
        return ["if-shell", "-F", "-t", self.session, "#{pane_dead}", "respawn-pane"]

    def _exec(self, script: str, timeout: float = 30.0) -> ExecResult:
        if self.sandbox is None:
            raise TerminalError("the terminal is not started")
        return self._run(script, self.sandbox, timeout)

    def _checked(self, script: str, what: str, timeout: float = 30.0) -> ExecResult:
        result = self._exec(script, timeout)
        if result.exit_code != 0:
            raise TerminalError(f"tmux {what} failed ({result.exit_code}): {result.output[-500:]}")
        return result

    # --- lifecycle --------------------------------------------------------------------

    def start(
        self,
        sandbox: Sandbox,
        *,
        width: int = 160,
        height: int = 40,
        session: str = "tmax",
        shell: str = "bash --login",
        prompt: re.Pattern[str] | None = None,
        startup_timeout: float = 15.0,
    ) -> str:
        """Start a tmux server (replacing any earlier one of this session) and a pane
        running ``shell`` in the sandbox's workdir; wait for a prompt (``prompt``,
        default: any visible text) and return the screen.

        ``shell`` is split like a shell would and run without one (tmux execs it); if
        its program is ``bash`` and the image has none, the toolbox's bash stands in.
        Outside, the control session's ``LC_ALL=C`` is dropped and ``LANG`` defaults to
        C.UTF-8, so readline shows non-ASCII text as text. If the shell exits (the agent
        typed ``exit``), tmux starts it again in the same pane.
        """
        if not re.fullmatch(r"[A-Za-z0-9_-]+", session):
            raise ValueError(f"tmux session name {session!r}: use letters, digits, - and _")
        self.sandbox, self.session, self.width, self.height = sandbox, session, width, height
        self._start_options = {"shell": shell, "prompt": prompt, "startup_timeout": startup_timeout}
        argv = shlex.split(shell)
        program, arguments = argv[0], " ".join(shlex.quote(a) for a in argv[1:])
        state = shlex.quote(self.state_dir)
        terminfo_dirs = "/etc/terminfo /lib/terminfo /usr/share/terminfo /usr/lib/terminfo"
        script = f"""
{self._tmux} kill-server 2>/dev/null
{BIN}/mkdir -p {state} && {BIN}/chmod 700 {state} || exit 1
{BIN}/rm -f {state}/prev
unset LC_ALL
[ -n "$LANG" ] || export LANG=C.UTF-8
term=xterm-256color
for t in {" ".join(TERMINALS)}; do
  for d in {terminfo_dirs}; do
    for f in "$d"/*/"$t"; do [ -e "$f" ] && {{ term=$t; break 3; }}; done
  done
done
export TERM="$term"
prog={shlex.quote(program)}
if [ "$prog" = bash ] && ! command -v bash >/dev/null 2>&1; then prog={BIN}/bash; fi
{self._tmux} -f /dev/null start-server \\; \\
  set-option -g history-limit {int(self.history_limit)} \\; \\
  set-option -g status off \\; \\
  set-option -g default-terminal "$term" \\; \\
  set-option -g remain-on-exit on \\; \\
  set-hook -gw pane-died "if-shell -F '#{{pane_dead}}' respawn-pane" \\; \\
  new-session -d -s {self._target} -x {int(width)} -y {int(height)} \\
    -c {shlex.quote(sandbox.workdir)} -- "$prog" {arguments}
"""
        self._checked(script, "start")
        pattern = prompt or re.compile(r"\S")
        if self.wait_for_prompt(pattern, timeout=startup_timeout) is None:
            log.warning("no prompt in the %s terminal after %.0fs", session, startup_timeout)
        return self.incremental_output().text  # also sets the baseline for new output

    def restart(self) -> str:
        """Start the terminal again as it was started (after the agent killed tmux)."""
        if self.sandbox is None:
            raise TerminalError("the terminal was never started")
        return self.start(
            self.sandbox,
            width=self.width,
            height=self.height,
            session=self.session,
            **self._start_options,
        )

    def close(self) -> None:
        """Stop the tmux server (the sandbox's own teardown would also end it)."""
        if self.sandbox is not None:
            self._exec(f"{self._tmux} kill-server 2>/dev/null; true")
            self.sandbox = None

    # --- keys -------------------------------------------------------------------------

    def send_keys(self, keys: str) -> None:
        """Send a keystroke string by the rule in the module docstring; returns at once."""
        script = self.keys_script(keys)
        if script:
            self._checked(script, "send-keys")

    def keys_script(self, keys: str, *, clear_history: bool = False) -> str:
        """The shell lines that send ``keys`` (empty when there is nothing to send), for
        callers that bundle sending with other work in one ``run``. ``clear_history``
        empties the scrollback first, in the same tmux call."""
        commands: list[list[str]] = []
        for kind, value in key_plan(keys):
            if kind == "key":
                commands.append(["send-keys", "-t", self.session, "--", value])
                continue
            for chunk in _chunks(value, TEXT_CHUNK_BYTES):
                body = chunk.rstrip(";")
                if body:
                    commands.append(["send-keys", "-t", self.session, "-l", "--", body])
                if len(body) < len(chunk):
                    semicolons = ["3b"] * (len(chunk) - len(body))
                    commands.append(["send-keys", "-t", self.session, "-H", *semicolons])
        if not commands:
            return ""
        commands.insert(0, self._revive)
        if clear_history:
            commands.insert(1, ["clear-history", "-t", self.session])
        calls: list[list[list[str]]] = []
        current: list[list[str]] = []
        size = 0
        for command in commands:
            length = sum(len(arg.encode("utf-8", errors="surrogatepass")) + 3 for arg in command)
            if current and size + length > CLIENT_MESSAGE_BYTES:
                calls.append(current)
                current, size = [], 0
            current.append(command)
            size += length
        calls.append(current)
        return " &&\n".join(
            self._tmux + " " + " \\; ".join(" ".join(shlex.quote(a) for a in c) for c in call)
            for call in calls
        )

    # --- looking at the screen --------------------------------------------------------

    def capture(self, full_history: bool = False, clear_history: bool = False) -> str:
        """The visible screen, or the whole scrollback with it; wrapped lines joined,
        trailing blanks dropped. ``clear_history`` empties the scrollback in the same
        tmux call (nothing printed in between is lost)."""
        history = " -S -" if full_history else ""
        clear = f" \\; clear-history -t {self._target}" if clear_history else ""
        result = self._checked(
            f"{self._tmux} capture-pane -p -J{history} -t {self._target}{clear}", "capture-pane"
        )
        return clean_screen(result.output)

    def snapshot(self) -> tuple[int, str]:
        """(scrollback length, visible screen) in one call: cheap enough to poll, and it
        changes whenever output arrives, even output that scrolls identical lines."""
        return self.parse_snapshot(self._checked(self.snapshot_script(), "capture-pane").output)

    def snapshot_script(self) -> str:
        """The shell line behind ``snapshot``, for bundling after other work."""
        target = self._target
        return (
            f"{self._tmux} display-message -p -t {target} '#{{history_size}}' \\; "
            f"capture-pane -p -J -t {target}"
        )

    @staticmethod
    def parse_snapshot(output: str) -> tuple[int, str]:
        first, _, screen = output.partition("\n")
        try:
            history = int(first.strip())
        except ValueError:
            history = -1
        return history, clean_screen(screen)

    def new_output(self) -> str:
        """Text that appeared since the previous call, or the visible screen when that
        cannot be determined (see ``incremental_output``)."""
        return self.incremental_output().text

    def incremental_output(
        self, limit_bytes: int | None = None, note: str = CUT_NOTE
    ) -> TerminalOutput:
        """New output since the previous call (module docstring), worked out inside the
        sandbox in one call. With ``limit_bytes``, text longer than that keeps its first
        and last ``limit_bytes // 2`` bytes around ``note`` (placeholders ``{limit}``
        and ``{omitted}``); ``omitted_bytes`` says how many were cut."""
        mark = f"__TMAX_SCREEN_{uuid.uuid4().hex}__"
        cut = f"__TMAX_CUT_{uuid.uuid4().hex}__"
        target = self._target
        # One tmux call, so no output can slip in between the captures and the clear.
        revive = " ".join(shlex.quote(arg) for arg in self._revive)
        script = (
            f"{self._tmux} {revive} \\; capture-pane -p -J -S - -t {target} \\; "
            f"display-message -p {mark} \\; clear-history -t {target} \\; "
            f"capture-pane -p -J -t {target} | LC_ALL=C {BIN}/awk -v mark={mark} "
            f"-v cut={cut} -v limit={int(limit_bytes or 0)} "
            f"-v prev={shlex.quote(self.state_dir + '/prev')} {shlex.quote(_DIFF_AWK)}"
        )
        result = self._checked(script, "capture-pane")
        header, _, body = result.output.partition("\n")
        fields = header.split()
        if len(fields) != 3 or fields[0] not in ("NEW", "SCREEN"):
            raise TerminalError(f"unexpected capture output: {result.output[:200]!r}")
        total, omitted = int(fields[1]), int(fields[2])
        head, found, tail = body.partition(f"\n{cut}\n")
        if found:
            # A byte cut may split a UTF-8 character: drop the halves of it.
            cut_note = note.format(limit=limit_bytes, omitted=omitted)
            text = f"{clean_screen(head.rstrip(_BROKEN))}\n{cut_note}\n{tail.lstrip(_BROKEN)}"
        else:
            text = body
        return TerminalOutput(clean_screen(text), fields[0] == "SCREEN", total, omitted)

    # --- waiting ----------------------------------------------------------------------

    def poll(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """Call ``check`` until it returns something other than None or ``timeout``
        seconds pass, sleeping between calls with exponential backoff."""
        deadline = time.monotonic() + timeout
        delay = self.poll_initial_sec
        while True:
            value = check()
            if value is not None:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(delay, remaining))
            delay = min(delay * 1.5, self.poll_max_sec)

    def wait_for_prompt(
        self, prompt: re.Pattern[str] | None = None, timeout: float = 10.0
    ) -> str | None:
        """Poll the screen until ``prompt`` matches it (default: the last non-blank line
        ends in ``$``, ``#``, ``>`` or ``%``); the screen, or None on timeout."""
        pattern = prompt or re.compile(r"[$#>%]\s*\Z")

        def check() -> str | None:
            screen = self.capture()
            return screen if pattern.search(screen) else None

        return self.poll(check, timeout)

    def wait_idle(self, quiet_sec: float = 0.5, timeout: float = 10.0) -> str:
        """Poll until the terminal has not changed for ``quiet_sec`` (or ``timeout``
        passes); the screen then."""
        last = self.snapshot()
        changed = time.monotonic()

        def check() -> str | None:
            nonlocal last, changed
            now = self.snapshot()
            if now != last:
                last, changed = now, time.monotonic()
            return now[1] if time.monotonic() - changed >= quiet_sec else None

        return self.poll(check, timeout) or last[1]
