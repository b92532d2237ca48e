"""The tmux terminal the Terminus-2 and OpenHands harnesses type into.

The key rule and chunking are pure; the rest starts a real bwrap sandbox (skipped, with
the reason, where bwrap or root is missing).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import FIXTURE_TASKS
from tests.sandbox.test_sandbox import _available
from tmax.harness.terminal import (
    TMUX,
    TerminalError,
    TmuxTerminal,
    _chunks,
    is_key_name,
    key_plan,
)
from tmax.sandbox import Sandbox
from tmax.sandbox.episode import sandbox_for_task

LOG_TASK = FIXTURE_TASKS / "count-error-lines"

# --- the key rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "keys", ["C-c", "C-d", "M-x", "C-M-a", "^C", "Enter", "Escape", "Tab", "Up", "F5", "F12"]
)
def test_key_names_are_keys(keys: str) -> None:
    assert is_key_name(keys)
    assert key_plan(keys) == [("key", keys)]


@pytest.mark.parametrize("keys", ["hello", "C-", "ls -la", "C-c C-c", "enter", "F13", "q", ""])
def test_other_strings_are_text(keys: str) -> None:
    assert not is_key_name(keys)


def test_newlines_are_enter_and_text_is_literal() -> None:
    assert key_plan("ls -la\n") == [("text", "ls -la"), ("key", "Enter")]
    assert key_plan("ls -la") == [("text", "ls -la")]
    assert key_plan("a\nb\n") == [
        ("text", "a"),
        ("key", "Enter"),
        ("text", "b"),
        ("key", "Enter"),
    ]
    assert key_plan("echo Enter\n") == [("text", "echo Enter"), ("key", "Enter")]
    assert key_plan("x\r\n") == [("text", "x"), ("key", "Enter")]
    assert key_plan("\n") == [("key", "Enter")]
    assert key_plan("") == []


def test_a_key_name_with_newlines_is_the_key_then_enter() -> None:
    assert key_plan("C-c\n") == [("key", "C-c"), ("key", "Enter")]


def test_text_is_cut_on_character_bounds() -> None:
    text = "é" * 1500  # 3,000 bytes
    pieces = _chunks(text, 1001)
    assert "".join(pieces) == text
    assert all(len(p.encode()) <= 1001 for p in pieces)


# --- a live terminal ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)
    with sandbox_for_task(LOG_TASK, "bwrap", run_id="pytest") as sandbox:
        yield sandbox


@pytest.fixture
def terminal(box: Sandbox) -> Iterator[TmuxTerminal]:
    terminal = TmuxTerminal()
    terminal.start(box, session="pytest")
    yield terminal
    terminal.close()


def settle(terminal: TmuxTerminal) -> None:
    """Wait until the terminal is quiet at a prompt."""
    terminal.wait_idle(quiet_sec=0.3, timeout=10)
    terminal.wait_for_prompt(timeout=10)


def run_and_look(terminal: TmuxTerminal, keys: str, limit: int | None = None) -> str:
    terminal.send_keys(keys)
    settle(terminal)
    return terminal.incremental_output(limit).text


def test_start_shows_a_login_prompt_in_the_workdir(box: Sandbox) -> None:
    terminal = TmuxTerminal()
    screen = terminal.start(box, width=120, height=30, session="pytest-start")
    try:
        assert screen.rstrip().endswith("#")
        assert "/app" in screen  # bash --login's prompt shows the image's WORKDIR
        assert run_and_look(terminal, "tput cols; tput lines\n").split("\n")[1:3] == ["120", "30"]
    finally:
        terminal.close()


def test_new_output_is_what_the_command_printed(terminal: TmuxTerminal) -> None:
    output = terminal.incremental_output()
    terminal.send_keys("echo hello\n")
    settle(terminal)
    output = terminal.incremental_output()
    assert not output.is_screen
    assert output.text.split("\n")[0].endswith("# echo hello")  # the prompt line, completed
    assert output.text.split("\n")[1] == "hello"
    # Nothing new since: the screen, marked as such.
    again = terminal.incremental_output()
    assert again.is_screen
    assert "hello" in again.text


def test_keystrokes_arrive_verbatim(terminal: TmuxTerminal) -> None:
    # Trailing semicolons and `\;` are tmux syntax; a leading dash looks like an option.
    text = run_and_look(terminal, "echo 'semi;' && echo end;\n")
    assert "semi;\nend" in text
    text = run_and_look(terminal, "find /app -name service.log -exec echo found {} \\;\n")
    assert "found /app/service.log" in text
    text = run_and_look(terminal, "-n\n")
    assert "-n: command not found" in text
    text = run_and_look(terminal, "echo 'héllo ✓' \"$LANG\"\n")
    assert "héllo ✓ C.UTF-8" in text


def test_long_input_is_sent_in_pieces(terminal: TmuxTerminal) -> None:
    word = "x" * 20_000  # far over tmux's 16 KiB command size
    seen: list[str] = []

    def counted() -> bool | None:  # the pieces may outlast a quiet spell on a busy machine
        seen.extend(terminal.incremental_output().text.split("\n"))
        return True if "20001" in seen else None

    terminal.send_keys(f"echo {word} | wc -c\n")
    assert terminal.poll(counted, timeout=60) or "20001" in seen, seen[-5:]


def test_output_past_the_limit_keeps_head_and_tail(terminal: TmuxTerminal) -> None:
    terminal.send_keys("seq 1 30000\n")
    settle(terminal)
    output = terminal.incremental_output(limit_bytes=10_000)
    assert not output.is_screen
    assert output.omitted_bytes == output.total_bytes - 10_000 > 150_000
    lines = output.text.split("\n")
    assert lines[1:4] == ["1", "2", "3"]
    assert lines[-2] == "30000"
    assert f"{output.omitted_bytes} interior bytes omitted" in output.text
    assert len(output.text.encode()) < 10_200


def test_ctrl_c_interrupts(terminal: TmuxTerminal) -> None:
    terminal.send_keys("sleep 30\n")
    terminal.wait_idle(quiet_sec=0.3, timeout=5)
    terminal.send_keys("C-c")
    assert terminal.wait_for_prompt(timeout=10) is not None
    text = terminal.incremental_output().text
    assert "^C" in text


def test_exiting_the_shell_starts_a_new_one(box: Sandbox, terminal: TmuxTerminal) -> None:
    def pane() -> tuple[str, str]:
        query = f"{TMUX} -S {terminal.state_dir}/sock display -p -t pytest "
        pid, dead = box.run(query + "'#{pane_pid} #{pane_dead}'").output.split()
        return pid, dead

    first, _ = pane()
    terminal.send_keys("exit\n")
    # The shell is gone: tmux has restarted it already, or the next keys do.
    assert terminal.poll(lambda: pane()[0] != first or pane()[1] == "1" or None, timeout=10)
    assert "alive" in run_and_look(terminal, "echo alive\n")
    assert pane()[0] != first


def test_restart_after_the_server_is_killed(box: Sandbox, terminal: TmuxTerminal) -> None:
    box.run(f"{TMUX} -S {terminal.state_dir}/sock kill-server")
    with pytest.raises(TerminalError):
        terminal.send_keys("echo gone\n")
    terminal.restart()
    assert "again" in run_and_look(terminal, "echo again\n")
