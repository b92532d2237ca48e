"""The mini-SWE-agent harness: several calls, a fresh /bin/sh, 30 s, the JSON observation."""

from __future__ import annotations

import json
from itertools import cycle

import pytest

from tests.harness.conftest import LOG_TASK
from tmax.harness import HarnessSettings, make_harness, run_agent
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.harness.mini_swe_agent import format_observation, parse_calls
from tmax.models.client import Completion, ScriptedModel, ToolCall, bash_call
from tmax.sandbox import ExecResult, Sandbox

INSTRUCTION = (LOG_TASK / "instruction.md").read_text()
SOLUTION = "grep -c '^\\[ERROR\\]' /app/service.log > /app/error_count.txt"
SUBMIT = bash_call(f"echo {SUBMIT_SENTINEL}")

pytestmark = pytest.mark.slow


def calls(*commands: str) -> Completion:
    """One reply with a ``bash`` call per command, ids c0, c1, ..."""
    return Completion(
        "I will run these.",
        tuple(
            ToolCall(f"c{i}", "bash", json.dumps({"command": command}))
            for i, command in enumerate(commands)
        ),
        finish_reason="tool_calls",
    )


# --- parsing and formatting ------------------------------------------------------------


def test_every_call_is_read_and_one_bad_call_rejects_the_reply() -> None:
    assert parse_calls(calls("ls", "pwd")) == ([("ls", "c0"), ("pwd", "c1")], None)
    bad = Completion("", (*calls("ls").tool_calls, ToolCall("x", "python", "{}")))
    actions, problem = parse_calls(bad)
    assert actions == [] and problem is not None and "python" in problem
    assert "no tool call" in (parse_calls(Completion("just text"))[1] or "")
    missing = Completion("", (ToolCall("m", "bash", '{"cmd": "ls"}'),))
    assert "'command'" in (parse_calls(missing)[1] or "")


def test_the_observation_is_indented_json_split_from_10000_characters() -> None:
    short = format_observation("a <b> & 'c'\n", 0)
    assert short.splitlines()[0] == "{" and short.splitlines()[-1] == "}"
    assert "\\u003cb\\u003e \\u0026 \\u0027c\\u0027" in short  # Jinja's tojson escaping
    assert json.loads(short) == {"returncode": 0, "output": "a <b> & 'c'\n"}
    body = json.loads(format_observation("x" * 25_000, 0))
    assert list(body) == ["returncode", "output_head", "output_tail", "elided_chars", "warning"]
    assert body["elided_chars"] == 15_000
    assert len(body["output_head"]) == len(body["output_tail"]) == 5_000
    assert "output" in json.loads(format_observation("x" * 9_999, 0))
    assert "output_head" in json.loads(format_observation("x" * 10_000, 0))
    late = json.loads(format_observation("partial", -1, exception_info="stopped"))
    assert late == {"returncode": -1, "output": "partial", "exception_info": "stopped"}


# --- episodes in a real sandbox ---------------------------------------------------------


def test_each_command_runs_in_a_fresh_sh_with_upstreams_variables(box: Sandbox) -> None:
    model = ScriptedModel(
        [
            bash_call("cd /tmp && export LEVEL=ERROR"),
            bash_call('pwd; echo "[$LEVEL]"; echo "$0"'),
            bash_call('echo "$PAGER $MANPAGER $LESS $PIP_PROGRESS_BAR $TQDM_DISABLE"'),
            SUBMIT,
        ]
    )
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    observations = [json.loads(m["content"]) for m in model.requests[-1]["messages"][3::2]]
    assert observations[1] == {"returncode": 0, "output": "/app\n[]\n/bin/sh\n"}
    assert observations[2] == {"returncode": 0, "output": "cat cat -R off 1\n"}
    assert box.verify(LOG_TASK / "tests").reward == 0.0  # it never solved it


def test_several_calls_in_one_reply_all_run_in_order(box: Sandbox) -> None:
    model = ScriptedModel(
        [calls("echo one > /tmp/log", "echo two >> /tmp/log", "cat /tmp/log"), SUBMIT]
    )
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert (run.exit_status, run.turns, run.tool_calls) == ("submitted", 2, 4)
    answers = model.requests[-1]["messages"][3:]
    assert [m["role"] for m in answers] == ["tool"] * 3
    assert [m["tool_call_id"] for m in answers] == ["c0", "c1", "c2"]
    assert json.loads(answers[2]["content"])["output"] == "one\ntwo\n"


def test_a_submitting_call_ends_the_reply(box: Sandbox) -> None:
    model = ScriptedModel([calls(SOLUTION, f"echo {SUBMIT_SENTINEL}", "rm /app/error_count.txt")])
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert (run.exit_status, run.tool_calls) == ("submitted", 2)
    assert box.verify(LOG_TASK / "tests").reward == 1.0  # the rm after it never ran


def test_the_sentinel_must_be_the_first_line_of_a_successful_command(box: Sandbox) -> None:
    model = ScriptedModel(
        [
            bash_call(f"echo not yet; echo {SUBMIT_SENTINEL}"),  # not the first line
            bash_call(f"echo {SUBMIT_SENTINEL}; false"),  # failed
            SUBMIT,
        ]
    )
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert run.exit_status == "submitted" and run.tool_calls == 3


def test_an_unparsable_reply_is_dropped_and_three_in_a_row_end_the_episode(
    box: Sandbox,
) -> None:
    answers = cycle(["THOUGHT: hmm", "THOUGHT: still", bash_call("true")])
    model = ScriptedModel(lambda messages: next(answers))
    settings = HarnessSettings(max_tool_calls=9, max_format_errors=64)
    run = run_agent(make_harness("mini-swe-agent", settings), model, box, INSTRUCTION)
    # Two errors, then a good call resets the count: the step budget ends it.
    assert (run.exit_status, run.turns, run.format_errors) == ("max_tool_calls", 9, 6)
    messages = model.requests[2]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user", "user"]
    assert "no tool call" in messages[2]["content"]

    chatty = ScriptedModel(lambda messages: "THOUGHT: hmm")
    run = run_agent(make_harness("mini-swe-agent", settings), chatty, box, INSTRUCTION)
    assert (run.exit_status, run.turns, run.format_errors) == ("format_errors", 3, 3)


def test_a_command_gets_30_seconds_whatever_the_settings(box: Sandbox) -> None:
    harness = make_harness("mini-swe-agent", HarnessSettings(command_timeout_sec=120))
    asked: list[float | None] = []
    real_run = harness.run

    def run(command: str, sandbox: Sandbox, timeout: float | None = None) -> ExecResult:
        asked.append(timeout)
        if "sleep" not in command:
            return real_run(command, sandbox, timeout)
        return ExecResult("half a line", 124, 30.0, timed_out=True)

    harness.run = run  # type: ignore[method-assign]
    model = ScriptedModel([bash_call("sleep 100"), SUBMIT])
    run_agent(harness, model, box, INSTRUCTION)
    assert asked[0] == 30
    body = json.loads(model.requests[-1]["messages"][-1]["content"])
    assert body["returncode"] == -1 and body["output"] == "half a line"
    assert "30 seconds" in body["exception_info"]


def test_mini_swe_agent_solves_a_task(box: Sandbox) -> None:
    model = ScriptedModel([bash_call("ls /app"), bash_call(SOLUTION), SUBMIT])
    run = run_agent(make_harness("mini-swe-agent"), model, box, INSTRUCTION)
    assert (run.exit_status, run.tool_calls) == ("submitted", 3)
    assert box.verify(LOG_TASK / "tests").reward == 1.0
