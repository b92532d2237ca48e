"""The paper's own harness: parsing, execution, endings (rules: docs/harnesses.md)."""

from __future__ import annotations

from itertools import cycle

import pytest

from tests.harness.conftest import LOG_TASK
from tmax.harness import HarnessSettings, make_harness, run_agent
from tmax.harness.base import SUBMIT_SENTINEL, truncate_middle
from tmax.harness.tmax import first_bash_call, format_observation, own_prompts
from tmax.models.client import Completion, ScriptedModel, ToolCall, bash_call
from tmax.sandbox import ExecResult, Sandbox

INSTRUCTION = (LOG_TASK / "instruction.md").read_text()
SOLUTION = "grep -c '^\\[ERROR\\]' /app/service.log > /app/error_count.txt"
SUBMIT = bash_call(f"echo {SUBMIT_SENTINEL}")
PROMPTS = own_prompts(max_tool_calls=64, observation_chars=10_000)

pytestmark = pytest.mark.slow


# --- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "problem"),
    [
        (Completion("THOUGHT: I will look around."), "no tool call"),
        (Completion("", (ToolCall("a", "python", '{"code": "1"}'),)), "unknown tool"),
        (Completion("", (ToolCall("a", "bash", '{"command": "ls"'),)), "not valid JSON"),
        (Completion("", (ToolCall("a", "bash", '["ls"]'),)), "must be a JSON object"),
        (Completion("", (ToolCall("a", "bash", '{"command": 3}'),)), "not a string"),
    ],
)
def test_unusable_calls_are_named(completion: Completion, problem: str) -> None:
    command, _, error = first_bash_call(completion)
    assert command is None
    assert error is not None and problem in error


def test_the_first_of_several_calls_is_read_and_an_empty_command_is_a_command() -> None:
    two = Completion("", (ToolCall("a", "bash", '{"command": " ls "}'), ToolCall("b", "x", "")))
    assert first_bash_call(two) == ("ls", "a", None)
    assert first_bash_call(bash_call("ls -la", call_id="c7")) == ("ls -la", "c7", None)
    no_command = Completion("", (ToolCall("e", "bash", '{"cmd": "ls"}'),))
    assert first_bash_call(no_command) == ("", "e", None)


def test_long_output_shows_a_hint_then_head_and_tail_then_the_exit_code() -> None:
    output = "".join(f"line {i}\n" for i in range(5000))
    text = format_observation(ExecResult(output, 3, 0.1), PROMPTS)
    assert text.startswith("[This output has 48889 characters")
    head, tail = text.index("line 0\nline 1\n"), text.index("line 4999\n\n(exit_code=3)")
    assert head < text.index("not shown") < tail
    assert text.endswith("\n\n(exit_code=3)")
    assert len(text) < 10_600
    assert format_observation(ExecResult("ok\n\n", 0, 0.1), PROMPTS) == "ok\n\n(exit_code=0)"
    assert format_observation(ExecResult(" \n", 1, 0.1), PROMPTS) == "(no output)\n\n(exit_code=1)"
    at_limit = "x" * 10_000
    assert format_observation(ExecResult(at_limit, 0, 0.1), PROMPTS).startswith(at_limit)


def test_truncate_middle_counts_what_it_cut() -> None:
    assert truncate_middle("abcdefghij", 4) == "ab\n[... 6 characters omitted ...]\nij"
    assert truncate_middle("abc", 4) == "abc"


# --- episodes in a real sandbox ---------------------------------------------------------


def test_tmax_solves_a_task_with_a_persistent_shell(box: Sandbox) -> None:
    model = ScriptedModel(
        [
            Completion("THOUGHT: first I look."),  # no call: corrected, not fatal
            bash_call("cd /app && export LEVEL=ERROR"),
            bash_call('pwd; echo "$LEVEL"; ' + SOLUTION.replace("/app/", "")),
            SUBMIT,
        ]
    )
    run = run_agent(make_harness("tmax"), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    assert (run.turns, run.tool_calls, run.format_errors) == (4, 3, 1)
    messages = model.requests[-1]["messages"]
    assert messages[0]["role"] == "system" and "THOUGHT" in messages[0]["content"]
    assert "<task>" in messages[1]["content"] and "error_count.txt" in messages[1]["content"]
    correction = messages[3]
    assert correction["role"] == "user" and "no tool call" in correction["content"]
    last_observation = messages[-1]
    assert last_observation["role"] == "tool"
    assert last_observation["content"] == "/app\nERROR\n\n(exit_code=0)"  # cwd and env persisted
    assert model.requests[0]["tools"][0]["function"]["name"] == "bash"
    assert box.verify(LOG_TASK / "tests").reward == 1.0
    steps = run.trajectory.to_dict()["steps"]
    assert [s["source"] for s in steps[:2]] == ["system", "user"]
    assert steps[-1]["tool_calls"][0]["arguments"] == {"command": f"echo {SUBMIT_SENTINEL}"}


def test_tmax_runs_the_first_of_several_calls(box: Sandbox) -> None:
    """Upstream runs tool_calls[0] and ignores the rest (sample_solutions.py:140)."""
    two = Completion(
        "THOUGHT: two at once",
        (
            ToolCall("a", "bash", '{"command": "echo first > /tmp/which"}'),
            ToolCall("b", "bash", '{"command": "echo second > /tmp/which"}'),
        ),
    )
    model = ScriptedModel([two, bash_call("cat /tmp/which", call_id="c"), SUBMIT])
    run = run_agent(make_harness("tmax"), model, box, INSTRUCTION)
    assert (run.exit_status, run.tool_calls, run.format_errors) == ("submitted", 3, 0)
    messages = model.requests[-1]["messages"]
    answers = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["a", "c"]  # "b" neither ran nor answered
    assert answers == [
        {"role": "tool", "tool_call_id": "a", "content": "(no output)\n\n(exit_code=0)"},
        {"role": "tool", "tool_call_id": "c", "content": "first\n\n(exit_code=0)"},
    ]


def test_an_unusable_call_is_stripped_from_the_reply(box: Sandbox) -> None:
    wrong_tool = Completion("THOUGHT: python", (ToolCall("p", "python", '{"code": "1"}'),))
    bad_json = Completion("", (ToolCall("j", "bash", '{"command": "ls'),))
    model = ScriptedModel([wrong_tool, bad_json, SUBMIT])
    run = run_agent(make_harness("tmax"), model, box, INSTRUCTION)
    assert (run.exit_status, run.format_errors) == ("submitted", 2)
    messages = model.requests[-1]["messages"]
    assert messages[2] == {"role": "assistant", "content": "THOUGHT: python"}
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == "p"
    assert messages[4] == {"role": "assistant", "content": ""}
    assert messages[5]["role"] == "user" and "not valid JSON" in messages[5]["content"]


@pytest.mark.parametrize(
    "command",
    [
        f"echo not yet; echo {SUBMIT_SENTINEL}",  # not the first line
        f"echo {SUBMIT_SENTINEL}; false",  # a failed command
        f"grep -c {SUBMIT_SENTINEL} /app/service.log",  # only in the command
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPU''T",  # only in the output
    ],
)
def test_the_sentinel_anywhere_in_command_or_output_submits(command: str, box: Sandbox) -> None:
    """Vanillux2Agent/agent.py:211 and sample_solutions.py:159."""
    model = ScriptedModel([bash_call(command), bash_call("true")])
    run = run_agent(make_harness("tmax"), model, box, INSTRUCTION)
    assert (run.exit_status, run.turns, run.tool_calls) == ("submitted", 1, 1)


def test_the_budget_is_steps_and_format_errors_count_in_a_row(box: Sandbox) -> None:
    """Vanillux2Agent/agent.py:138 (64 steps in all) and :184 (the count resets)."""
    answers = cycle(["THOUGHT: hmm", bash_call("true")])
    model = ScriptedModel(lambda messages: next(answers))
    settings = HarnessSettings(max_tool_calls=6, max_format_errors=2)
    run = run_agent(make_harness("tmax", settings), model, box, INSTRUCTION)
    assert (run.exit_status, run.turns, run.tool_calls, run.format_errors) == (
        "max_tool_calls",
        6,
        3,
        3,
    )


def test_budgets_end_the_episode(box: Sandbox) -> None:
    endless = ScriptedModel(lambda messages: bash_call("true"))
    settings = HarnessSettings(max_tool_calls=3)
    run = run_agent(make_harness("tmax", settings), endless, box, INSTRUCTION)
    assert (run.exit_status, run.tool_calls) == ("max_tool_calls", 3)

    chatty = ScriptedModel(lambda messages: "THOUGHT: hmm")
    settings = HarnessSettings(max_format_errors=2)
    run = run_agent(make_harness("tmax", settings), chatty, box, INSTRUCTION)
    assert (run.exit_status, run.format_errors) == ("format_errors", 2)

    big = ScriptedModel(
        lambda messages: Completion(
            "", bash_call("true").tool_calls, prompt_tokens=900, completion_tokens=200
        )
    )
    settings = HarnessSettings(max_total_tokens=1000, max_turn_tokens=500)
    run = run_agent(make_harness("tmax", settings), big, box, INSTRUCTION)
    assert run.exit_status == "token_budget" and run.turns == 1
    assert big.requests[0]["max_tokens"] == 500


def test_per_turn_budget_shrinks_near_the_total(box: Sandbox) -> None:
    model = ScriptedModel(
        lambda messages: Completion(
            "", bash_call("true").tool_calls, prompt_tokens=700, completion_tokens=100
        )
    )
    settings = HarnessSettings(max_total_tokens=1000, max_turn_tokens=500, max_tool_calls=2)
    run_agent(make_harness("tmax", settings), model, box, INSTRUCTION)
    assert [r["max_tokens"] for r in model.requests] == [500, 200]


@pytest.mark.parametrize("interleaved", [True, False])
def test_interleaved_thinking_keeps_or_drops_earlier_reasoning(
    interleaved: bool, box: Sandbox
) -> None:
    thinking = Completion(
        "THOUGHT: look", bash_call("ls").tool_calls, reasoning="the log is in /app"
    )
    model = ScriptedModel([thinking, SUBMIT])
    settings = HarnessSettings(interleaved_thinking=interleaved, temperature=0.3)
    run_agent(make_harness("tmax", settings), model, box, INSTRUCTION)
    earlier = model.requests[-1]["messages"][2]
    assert earlier["role"] == "assistant"
    assert ("reasoning_content" in earlier) is interleaved
    assert model.requests[-1]["temperature"] == 0.3


def test_out_of_memory_ends_the_episode(box: Sandbox) -> None:
    from tmax.sandbox.episode import sandbox_for_task

    hog = "x=$(head -c 400M /dev/zero | tr '\\0' a); echo ${#x}"
    model = ScriptedModel([bash_call(hog), SUBMIT])
    with sandbox_for_task(LOG_TASK, "bwrap", run_id="pytest", memory_mb=128) as box:
        run = run_agent(make_harness("tmax"), model, box, INSTRUCTION)
    assert run.exit_status == "out_of_memory"
    assert "OOM" in (run.detail or "")


def test_out_of_memory_between_commands_ends_the_episode() -> None:
    """A background job is OOM-killed while the model thinks: no command of the harness
    sees it, the per-turn check does."""
    import time

    from tmax.sandbox.episode import sandbox_for_task

    hog = "(sleep 0.2; x=$(head -c 400M /dev/zero | tr '\\0' a)) > /dev/null 2>&1 &"

    def slow_thinker(messages: object) -> Completion:
        time.sleep(3)  # the hog runs out of memory meanwhile
        return Completion("THOUGHT: still thinking")  # no call: no command runs

    answers = iter([lambda m: bash_call(hog), slow_thinker, lambda m: SUBMIT])
    model = ScriptedModel(lambda messages: next(answers)(messages))
    with sandbox_for_task(LOG_TASK, "bwrap", run_id="pytest", memory_mb=128) as box:
        run = run_agent(make_harness("tmax"), model, box, INSTRUCTION)
    assert run.exit_status == "out_of_memory"
    assert (run.turns, run.tool_calls) == (2, 1)


def test_the_tasks_agent_time_limit_ends_the_episode(box: Sandbox) -> None:
    slow = ScriptedModel(lambda messages: bash_call("sleep 0.3"))
    run = run_agent(make_harness("tmax"), slow, box, INSTRUCTION, timeout_sec=0.5)
    assert run.exit_status == "agent_timeout"
    assert 1 <= run.tool_calls <= 3
