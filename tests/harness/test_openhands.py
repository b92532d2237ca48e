"""The OpenHands CodeAct harness: native tools over a persistent shell and a file editor.

The editor's text operations are pure; everything else plays a ScriptedModel in a real
bwrap sandbox (count-error-lines) with a 1-second soft timeout, so waiting tests stay
quick. Tests never assert wall-clock times.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import count
from typing import Any

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.harness import run_agent
from tmax.harness.base import AgentRun, HarnessSettings
from tmax.harness.openhands import (
    OpenHandsHarness,
    TaskTracker,
    ToolArgumentError,
    insert_after,
    replace_once,
    view_text,
)
from tmax.harness.trajectory import Trajectory
from tmax.models.client import Completion, Message, ScriptedModel, ToolCall
from tmax.sandbox import Sandbox

LOG_TASK = FIXTURE_TASKS / "count-error-lines"
_ids = count()


def call(name: str, raw: str | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(f"call_{next(_ids)}", name, raw if raw is not None else json.dumps(arguments))


def reply(*calls: ToolCall, text: str = "") -> Completion:
    return Completion(content=text, tool_calls=calls, finish_reason="tool_calls")


def bash(command: str, **extra: Any) -> Completion:
    return reply(call("execute_bash", command=command, **extra))


def edit(**arguments: Any) -> Completion:
    return reply(call("str_replace_editor", **arguments))


FINISH = reply(call("finish", message="done"))

# --- the editor's text operations ---------------------------------------------------------

TEXT = "alpha\nbeta\ngamma\nbeta\n"


def test_replace_once_needs_exactly_one_match() -> None:
    edited, report = replace_once(TEXT, "gamma", "GAMMA", "/f")
    assert edited == "alpha\nbeta\nGAMMA\nbeta\n"
    assert "3\tGAMMA" in report
    with pytest.raises(ToolArgumentError, match="does not occur verbatim"):
        replace_once(TEXT, "delta", "x", "/f")
    with pytest.raises(ToolArgumentError, match=r"occurs 2 times .* lines 2, 4"):
        replace_once(TEXT, "beta", "x", "/f")


def test_insert_goes_after_the_given_line() -> None:
    assert insert_after(TEXT, 0, "top", "/f")[0] == "top\n" + TEXT
    assert insert_after(TEXT, 2, "mid\n", "/f")[0] == "alpha\nbeta\nmid\ngamma\nbeta\n"
    assert insert_after("a\nb", 2, "c", "/f")[0] == "a\nb\nc"
    with pytest.raises(ToolArgumentError, match="out of range"):
        insert_after(TEXT, 5, "x", "/f")


def test_view_numbers_lines_like_cat_n() -> None:
    assert view_text(TEXT, "/f", None).split("\n")[1:] == [
        "     1\talpha",
        "     2\tbeta",
        "     3\tgamma",
        "     4\tbeta",
    ]
    assert view_text(TEXT, "/f", [2, 3]).split("\n")[1:] == ["     2\tbeta", "     3\tgamma"]
    assert view_text(TEXT, "/f", [3, -1]).split("\n")[1:] == ["     3\tgamma", "     4\tbeta"]
    for bad in ([0, 2], [3, 2], [1, 9], [1]):
        with pytest.raises(ToolArgumentError):
            view_text(TEXT, "/f", bad)


def test_a_reply_without_tool_calls_is_a_format_error() -> None:
    harness = OpenHandsHarness()
    action = harness.act(Completion("I am done."), None, Trajectory("openhands", "1", "m"))  # type: ignore[arg-type]
    assert action.format_error and not action.done
    assert action.messages[0]["role"] == "user" and "finish" in action.messages[0]["content"]


# --- episodes in a sandbox ----------------------------------------------------------------


def play(box: Sandbox, script: list[Completion], **settings: Any) -> tuple[AgentRun, list[str]]:
    """Run the script; return the run and every tool result (or reminder), in order."""
    model = ScriptedModel(script)
    harness = OpenHandsHarness(HarnessSettings(**settings), soft_timeout_sec=1.0)
    run = run_agent(harness, model, box, (LOG_TASK / "instruction.md").read_text())
    results = [
        result["content"]
        for step in run.trajectory.steps
        for result in step.get("observation", {}).get("results", [])
    ]
    return run, results


def results_of(box: Sandbox, script: list[Completion], **settings: Any) -> list[str]:
    """Tool results of ``script`` followed by finish."""
    run, results = play(box, [*script, FINISH], **settings)
    assert run.exit_status == "finished" and results[-1] == "(finished)"
    return results[:-1]


def test_bash_and_the_editor_solve_the_task(box: Sandbox) -> None:
    run, results = play(
        box,
        [
            bash("grep -c '^\\[ERROR\\]' /app/service.log"),
            edit(command="create", path="/app/error_count.txt", file_text="2\n"),
            FINISH,
        ],
    )
    assert (run.exit_status, run.tool_calls, run.format_errors) == ("finished", 3, 0)
    assert results[0] == (
        "2\n[The command completed with exit code 0.]\n[Current working directory: /app]"
    )
    assert results[1].startswith("Created /app/error_count.txt")
    assert results[2] == "(finished)"
    assert box.verify(LOG_TASK / "tests").reward == 1.0
    assert run.trajectory.steps[0]["source"] == "system"
    calls = [s["tool_calls"][0]["function_name"] for s in run.trajectory.steps[2:]]
    assert calls == ["execute_bash", "str_replace_editor", "finish"]


def test_a_no_op_agent_scores_zero(box: Sandbox) -> None:
    run, _ = play(box, [FINISH])
    assert run.exit_status == "finished"
    assert box.verify(LOG_TASK / "tests").reward == 0.0


def test_the_shell_persists(box: Sandbox) -> None:
    results = results_of(
        box,
        [bash("cd /tmp && export GREETING=hello"), bash('pwd; echo "$GREETING"; false')],
    )
    assert results[0].endswith("[Current working directory: /tmp]")
    assert results[1] == (
        "/tmp\nhello\n[The command completed with exit code 1.]\n[Current working directory: /tmp]"
    )


def test_commands_arrive_intact(box: Sandbox) -> None:
    script = "cat > /tmp/t.py <<'EOF'\ndef f():\n\treturn 1;\nEOF\ncat -A /tmp/t.py"
    results = results_of(box, [bash(script)])
    assert results[0].startswith("def f():$\n^Ireturn 1;$\n")


def test_a_silent_command_is_left_running_until_interrupted(box: Sandbox) -> None:
    results = results_of(
        box,
        [
            bash("echo started; sleep 30"),
            bash("ls"),
            bash(""),
            bash("C-c", is_input="true"),
            bash("echo after"),
        ],
    )
    started, refused, waited, interrupted, after = results
    assert started.startswith("started\n[The command is still running")
    assert "(exit code -1)" in started and "empty command" in started and "C-c" in started
    assert "`ls` was NOT run" in refused
    assert "(exit code -1)" in waited and "started" not in waited  # only new output
    assert "[The command completed with exit code 130.]" in interrupted
    assert after.startswith("after\n[The command completed with exit code 0.]")


def test_input_goes_to_the_running_process(box: Sandbox) -> None:
    results = results_of(
        box,
        [bash("read -r name; echo hello $name"), bash("world", is_input="true")],
    )
    assert "(exit code -1)" in results[0]
    assert results[1].startswith("world\nhello world\n[The command completed with exit code 0.]")


def test_a_hard_timeout_replaces_the_soft_one(box: Sandbox) -> None:
    results = results_of(box, [bash("sleep 2; echo woke", timeout=10), bash("sleep 30", timeout=1)])
    assert results[0].startswith("woke\n[The command completed with exit code 0.]")
    assert "after its timeout of 1 seconds (exit code -1)" in results[1]


def test_waiting_or_typing_with_nothing_running_is_refused(box: Sandbox) -> None:
    results = results_of(box, [bash(""), bash("C-c", is_input="true")])
    assert "nothing to wait for" in results[0]
    assert "no command is running" in results[1]


def test_exit_keeps_the_shell_and_its_status(box: Sandbox) -> None:
    results = results_of(box, [bash("cd /tmp; echo bye; exit 3"), bash("pwd")])
    assert results[0] == (
        "bye\n[The command completed with exit code 3.]\n[Current working directory: /tmp]"
    )
    assert results[1].startswith("/tmp\n")


def test_long_output_is_cut_to_30000_characters(box: Sandbox) -> None:
    results = results_of(box, [bash("seq 1 20000")])
    output, _, suffix = results[0].rpartition("\n[The command completed")
    assert len(output) < 30_200
    assert output.startswith("1\n2\n3\n") and output.endswith("\n19999\n20000")
    assert "characters of output were cut" in output
    assert suffix.startswith(" with exit code 0.]")


def test_the_editor_views_edits_and_undoes(box: Sandbox) -> None:
    path = "/app/notes/todo.txt"
    results = results_of(
        box,
        [
            edit(command="view", path="/app"),
            edit(command="create", path=path, file_text="one\ntwo\nthree\n"),
            edit(command="create", path=path, file_text="again\n"),
            edit(command="str_replace", path=path, old_str="two", new_str="TWO"),
            edit(command="insert", path=path, insert_line=1, new_str="one and a half"),
            edit(command="view", path=path, view_range=[2, 3]),
            edit(command="undo_edit", path=path),
            edit(command="undo_edit", path=path),
            edit(command="str_replace", path=path, old_str="four", new_str="4"),
            edit(command="view", path=path),
            edit(command="undo_edit", path=path),
            edit(command="view", path=path),
        ],
    )
    listing, created, again, replaced, inserted, ranged, undo1, undo2 = results[:8]
    missing, viewed, undo3, gone = results[8:]
    assert "/app/service.log" in listing.split("\n")
    assert created.startswith(f"Created {path}")
    assert again.startswith("ERROR:") and "already exists" in again
    assert "2\tTWO" in replaced
    assert "2\tone and a half" in inserted
    assert ranged.split("\n")[1:] == ["     2\tone and a half", "     3\tTWO"]
    assert undo1.split("\n")[1:] == ["     1\tone", "     2\tTWO", "     3\tthree"]
    assert undo2.split("\n")[1:] == ["     1\tone", "     2\ttwo", "     3\tthree"]
    assert missing.startswith("ERROR:") and "does not occur" in missing
    assert viewed.split("\n")[1:] == ["     1\tone", "     2\ttwo", "     3\tthree"]
    assert "removed" in undo3
    assert gone.startswith("ERROR:") and "does not exist" in gone
    assert box.run(f"test -e {path}").exit_code == 1


def test_the_editor_reads_and_writes_files_larger_than_one_transfer(box: Sandbox) -> None:
    box.run("seq 1 60000 > /tmp/big.txt")  # 339 kB: several reads through the pipe
    last_line = {"old_str": "\n60000\n", "new_str": "\nend\n"}
    results = results_of(
        box,
        [
            edit(command="view", path="/tmp/big.txt"),
            edit(command="view", path="/tmp/big.txt", view_range=[59999, -1]),
            edit(command="str_replace", path="/tmp/big.txt", **last_line),
        ],
    )
    whole, tail, replaced = results
    assert len(whole) < 30_200 and "view_range shows any part" in whole
    assert tail.split("\n")[1:] == [" 59999\t59999", " 60000\t60000"]
    assert "60000\tend" in replaced
    check = "(seq 1 59999; echo end) | md5sum; md5sum < /tmp/big.txt"
    first, second = box.run(check).output.split("\n")[:2]
    assert first == second


def test_the_editor_refuses_binary_files(box: Sandbox) -> None:
    box.run("printf 'a\\0b' > /tmp/blob")
    results = results_of(box, [edit(command="view", path="/tmp/blob")])
    assert results[0].startswith("ERROR:") and "binary" in results[0]


@pytest.mark.parametrize(
    ("bad_call", "problem"),
    [
        (call("str_replace_editor", command="view"), "'path' is required"),
        (call("str_replace_editor", path="/app"), "'command' is required"),
        (call("str_replace_editor", command="delete", path="/app"), "unknown command"),
        (call("str_replace_editor", command="view", path="app"), "not absolute"),
        (call("str_replace_editor", command="create", path="/tmp/x"), "'file_text' is required"),
        (call("str_replace_editor", command="insert", path="/tmp/x", new_str="a"), "insert_line"),
        (call("execute_bash", is_input="true"), "'command' is required"),
        (call("execute_bash", command="ls", is_input="maybe"), "is_input"),
        (call("execute_bash", command="ls", timeout="soon"), "timeout"),
        (call("execute_bash", raw='{"command": "ls"'), "not valid JSON"),
        (call("browse", url="https://example.com"), "no tool 'browse'"),
    ],
)
def test_malformed_calls_are_answered_with_an_error(
    box: Sandbox, bad_call: ToolCall, problem: str
) -> None:
    run, results = play(box, [reply(bad_call), FINISH])
    assert run.format_errors == 1 and run.tool_calls == 1  # only finish ran
    assert results[0].startswith("ERROR:") and problem in results[0]


def test_several_calls_in_one_reply_run_in_order(box: Sandbox) -> None:
    run, results = play(
        box,
        [
            reply(
                call("execute_bash", command="echo one > /tmp/order"),
                call("execute_bash", command="echo two >> /tmp/order; cat /tmp/order"),
                call("finish", message="done"),
                call("execute_bash", command="echo three"),
            )
        ],
    )
    assert run.exit_status == "finished" and run.turns == 1 and run.tool_calls == 3
    assert results[1].startswith("one\ntwo\n[The command completed")
    assert results[3] == "(not run: the episode already finished)"
    assert box.run("cat /tmp/order").output == "one\ntwo\n"


def test_a_reply_without_a_call_gets_a_reminder(box: Sandbox) -> None:
    run, results = play(box, [Completion("Let me think about it."), FINISH])
    assert run.format_errors == 1
    assert "did not call a tool" in results[0]


# --- CodeAct's tool set (openhands-ai 1.6.0) ----------------------------------------------


def test_the_tools_are_codeacts_in_its_order() -> None:
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in OpenHandsHarness().tools}
    assert list(tools) == ["execute_bash", "think", "finish", "task_tracker", "str_replace_editor"]
    assert tools["execute_bash"]["required"] == ["command", "security_risk"]
    assert tools["str_replace_editor"]["required"] == ["command", "path", "security_risk"]
    assert tools["execute_bash"]["properties"]["security_risk"]["enum"] == ["LOW", "MEDIUM", "HIGH"]
    assert tools["think"]["required"] == ["thought"]
    assert tools["finish"]["required"] == ["message"]
    assert tools["task_tracker"]["properties"]["command"]["enum"] == ["view", "plan"]


def test_the_task_tracker_plans_and_shows_the_list() -> None:
    tracker = TaskTracker()
    assert "no task list" in tracker({"command": "view"})
    result = tracker(
        {
            "command": "plan",
            "task_list": [
                {"id": "read", "title": "Read the log", "status": "done"},
                {"title": "Count the errors", "status": "in_progress", "notes": "grep -c"},
                {"id": "write", "title": "Write the count"},
            ],
        }
    )
    assert result.startswith("The task list now has 3 task(s)")
    assert tracker({"command": "view"}).split("\n") == [
        "1. [x] Read the log (read, done)",
        "2. [~] Count the errors (task-2, in_progress)",
        "   grep -c",
        "3. [ ] Write the count (write, todo)",
    ]
    with pytest.raises(ToolArgumentError, match="needs task_list"):
        tracker({"command": "plan"})
    with pytest.raises(ToolArgumentError, match="must be an object"):
        tracker({"command": "plan", "task_list": ["read the log"]})


def test_think_and_the_task_tracker_run_nothing_and_count_as_calls(box: Sandbox) -> None:
    plan = [{"id": "1", "title": "count", "status": "todo"}]
    run, results = play(
        box,
        [
            reply(call("think", thought="First look at the log.")),
            reply(call("task_tracker", command="plan", task_list=plan)),
            reply(call("task_tracker", command="view")),
            FINISH,
        ],
        max_tool_calls=3,
    )
    assert run.exit_status == "max_tool_calls" and run.tool_calls == 3
    assert results[0] == "(Thought noted; nothing was run.)"
    assert results[1].startswith("The task list now has 1 task(s)")
    assert results[2] == "1. [ ] count (1, todo)"


def test_security_risk_is_accepted_and_not_acted_on(box: Sandbox) -> None:
    results = results_of(
        box,
        [
            bash("rm -f /tmp/x && echo gone", security_risk="HIGH"),
            bash("echo fine", security_risk="unheard-of"),
            edit(command="create", path="/tmp/y", file_text="y\n", security_risk="LOW"),
        ],
    )
    assert results[0].startswith("gone\n[The command completed with exit code 0.]")
    assert results[1].startswith("fine\n")
    assert results[2].startswith("Created /tmp/y")


def test_the_editor_refuses_arguments_it_does_not_have(box: Sandbox) -> None:
    run, results = play(box, [edit(command="view", path="/app", line=3), FINISH])
    assert run.format_errors == 1
    assert results[0].startswith("ERROR: unexpected arguments line")


# --- the condenser --------------------------------------------------------------------------


def history(turns: int, calls_per_turn: int = 1) -> list[Message]:
    messages: list[Message] = [
        {"role": "system", "content": "system"},
        {"role": "user", "content": "the task"},
    ]
    for turn in range(turns):
        completion = reply(
            *[call("execute_bash", command=f"echo {turn}") for _ in range(calls_per_turn)]
        )
        messages.append(completion.assistant_message(False))
        messages += [
            {"role": "tool", "tool_call_id": c.id, "content": f"output {turn}"}
            for c in completion.tool_calls
        ]
    return messages


def condense(messages: list[Message], overflow: bool = False) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(["NOTES"])
    harness = OpenHandsHarness()
    trajectory = Trajectory("openhands", "1", "m")
    result = harness.compact(
        messages,
        model,
        None,
        trajectory,
        context_tokens=1000,
        overflow=overflow,  # type: ignore[arg-type]
    )
    return result, model


def test_the_history_is_condensed_past_100_events() -> None:
    assert condense(history(49))[0] is None  # 2 + 98 events
    result, model = condense(history(50))  # 102 events
    assert result is not None and len(result.completions) == 1
    messages = result.messages
    assert messages[:2] == history(0)
    assert messages[2]["role"] == "user" and "NOTES" in messages[2]["content"]
    kept = messages[3:]
    assert len(kept) == 48 and kept[0]["role"] == "assistant"  # the latest 24 calls
    assert kept[-1]["content"] == "output 49"
    request = model.requests[0]["messages"][0]["content"]
    assert "echo 0" in request and "output 25" in request and "output 26" not in request
    # The summary is carried into the next round, not counted as a turn.
    again, model = condense([*messages, *history(60)[3:]][: 3 + 100])
    assert again is not None and "NOTES" in model.requests[0]["messages"][0]["content"]


def test_a_full_context_is_condensed_whatever_the_count() -> None:
    assert condense(history(10))[0] is None
    result, _ = condense(history(30), overflow=True)
    assert result is not None and len(result.messages) == 3 + 48
    assert condense(history(20), overflow=True)[0] is None  # nothing older than the tail


def test_the_condenser_keeps_the_episode_going_past_the_token_budget(box: Sandbox) -> None:
    # About 75 estimated tokens a turn over a 900-token start: the context reaches 3,000
    # after some 28 turns, when more than the latest 24 can be condensed away.
    calls = [bash(f"echo {n}") for n in range(36)]

    def script(messages: Sequence[Message]) -> Completion:
        if str(messages[-1]["content"]).startswith("You keep the running notes"):
            return Completion("NOTES")
        return calls.pop(0) if calls else FINISH

    model = ScriptedModel(script)
    settings = HarnessSettings(max_total_tokens=3000, max_tool_calls=64)
    harness = OpenHandsHarness(settings, soft_timeout_sec=1.0)
    run = run_agent(harness, model, box, "Count the errors.")
    assert (run.exit_status, run.tool_calls, run.compactions) == ("finished", 37, 1)
    condensed = [s for s in run.trajectory.steps if s["source"] == "system"][1]
    assert condensed["extra"]["summary"] == "NOTES"
