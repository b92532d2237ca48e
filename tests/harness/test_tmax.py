"""The paper's own harness and the mini-SWE-agent one: parsing, execution, endings."""

from __future__ import annotations

import json

import pytest

from tests.harness.conftest import LOG_TASK
from tmax.harness import HarnessSettings, make_harness, run_agent
from tmax.harness.base import SUBMIT_SENTINEL, single_bash_command, truncate_middle
from tmax.harness.tmax import format_observation
from tmax.models.client import Completion, ScriptedModel, ToolCall, bash_call
from tmax.sandbox import ExecResult, Sandbox

INSTRUCTION = (LOG_TASK / "instruction.md").read_text()
SOLUTION = "grep -c '^\\[ERROR\\]' /app/service.log > /app/error_count.txt"
SUBMIT = bash_call(f"echo {SUBMIT_SENTINEL}")

pytestmark = pytest.mark.slow


# --- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "problem"),
    [
        (Completion("THOUGHT: I will look around."), "no tool call"),
        (
            Completion("", (ToolCall("a", "bash", '{"command": "ls"}'),) * 2),
            "2 tool calls (exactly one is allowed)",
        ),
        (Completion("", (ToolCall("a", "python", '{"code": "1"}'),)), "unknown tool"),
        (Completion("", (ToolCall("a", "bash", '{"command": "ls"'),)), "not valid JSON"),
        (Completion("", (ToolCall("a", "bash", '["ls"]'),)), "must be a JSON object"),
        (Completion("", (ToolCall("a", "bash", '{"cmd": "ls"}'),)), "no 'command' string"),
        (Completion("", (ToolCall("a", "bash", '{"command": "  "}'),)), "no 'command' string"),
    ],
)
def test_malformed_calls_are_named(completion: Completion, problem: str) -> None:
    command, _, error = single_bash_command(completion)
    assert command is None
    assert error is not None and problem in error


def test_a_well_formed_call_is_read() -> None:
    command, call_id, error = single_bash_command(bash_call("ls -la", call_id="c7"))
    assert (command, call_id, error) == ("ls -la", "c7", None)


def test_long_output_keeps_head_and_tail_and_ends_with_the_exit_code() -> None:
    output = "".join(f"line {i}\n" for i in range(5000))
    text = format_observation(ExecResult(output, 3, 0.1), limit=10_000, timeout=120)
    assert text.startswith("line 0\nline 1\n")
    assert "line 4999\n(exit_code=3)" in text
    assert text.endswith("(exit_code=3)")
    assert "characters from the middle were left out" in text
    assert len(text) < 10_600
    short = format_observation(ExecResult("ok", 0, 0.1), limit=10_000, timeout=120)
    assert short == "ok\n(exit_code=0)"
    timed = format_observation(ExecResult("", 124, 30, timed_out=True), 10_000, timeout=30)
    assert "stopped after 30 seconds" in timed and timed.endswith("(exit_code=124)")


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
    assert last_observation["content"] == "/app\nERROR\n(exit_code=0)"  # cwd and env persisted
    assert model.requests[0]["tools"][0]["function"]["name"] == "bash"
    assert box.verify(LOG_TASK / "tests").reward == 1.0
    steps = run.trajectory.to_dict()["steps"]
    assert [s["source"] for s in steps[:2]] == ["system", "user"]
    assert steps[-1]["tool_calls"][0]["arguments"] == {"command": f"echo {SUBMIT_SENTINEL}"}


def test_mini_swe_agent_runs_each_command_in_a_fresh_shell(box: Sandbox) -> None:
    model = ScriptedModel(
        [bash_call("cd /tmp && export LEVEL=ERROR"), bash_call('pwd; echo "[$LEVEL]"'), SUBMIT]
    )
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    observation = json.loads(model.requests[-1]["messages"][-1]["content"])
    assert observation == {"returncode": 0, "output": "/app\n[]\n"}
    assert box.verify(LOG_TASK / "tests").reward == 0.0  # it never solved it


def test_mini_swe_agent_solves_a_task(box: Sandbox) -> None:
    model = ScriptedModel([bash_call("ls /app"), bash_call(SOLUTION), SUBMIT])
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert (run.exit_status, run.tool_calls) == ("submitted", 3)
    assert box.verify(LOG_TASK / "tests").reward == 1.0


def test_mini_swe_agent_splits_long_output() -> None:
    from tmax.harness.mini_swe_agent import format_observation as mini_format

    body = json.loads(mini_format(ExecResult("x" * 25_000, 0, 0.1), limit=10_000))
    assert body["elided_chars"] == 15_000
    assert len(body["output_head"]) == len(body["output_tail"]) == 5_000
    assert "output" not in body


@pytest.mark.parametrize("harness", ["tmax", "mini-swe-agent"])
def test_the_sentinel_must_be_the_first_line_of_a_successful_command(
    harness: str, box: Sandbox
) -> None:
    model = ScriptedModel(
        [
            bash_call(f"echo not yet; echo {SUBMIT_SENTINEL}"),  # not the first line
            bash_call(f"echo {SUBMIT_SENTINEL}; false"),  # failed
            SUBMIT,
        ]
    )
    run = run_agent(make_harness(harness), model, box, INSTRUCTION)
    assert run.exit_status == "submitted" and run.tool_calls == 3


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
