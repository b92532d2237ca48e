"""The Terminus-2 harness: its JSON answers, keystrokes into tmux, and how it ends.

Parser tests are pure; episode tests play a ScriptedModel in a real bwrap sandbox on
the count-error-lines fixture and score it with the task's own verifier.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.harness import make_harness, run_agent
from tmax.harness.base import AgentRun
from tmax.harness.terminus2 import DEFAULT_DURATION_SEC, MAX_DURATION_SEC, parse_response
from tmax.models.client import ScriptedModel
from tmax.sandbox import Sandbox

LOG_TASK = FIXTURE_TASKS / "count-error-lines"
SOLVE = "grep -c '^\\[ERROR\\]' /app/service.log > /app/error_count.txt\n"


def answer(*commands: tuple[str, float], complete: bool = False, **extra: Any) -> str:
    body: dict[str, Any] = {
        "analysis": "Looking at the terminal.",
        "plan": "Run the next commands.",
        "commands": [{"keystrokes": k, "duration": d} for k, d in commands],
        "task_complete": complete,
    }
    body.update(extra)
    return json.dumps(body)


# --- reading answers ----------------------------------------------------------------------


def test_a_well_formed_answer() -> None:
    parsed = parse_response(answer(("ls -la\n", 0.1), ("cd /app\n", 0.5)))
    assert not parsed.errors and not parsed.warnings
    assert [(c.keystrokes, c.duration) for c in parsed.commands] == [
        ("ls -la\n", 0.1),
        ("cd /app\n", 0.5),
    ]
    assert parsed.analysis == "Looking at the terminal." and not parsed.task_complete


def test_a_fenced_answer_is_read_without_warnings() -> None:
    body = answer(("ls\n", 0.1))
    parsed = parse_response(f"```json\n{body}\n```")
    assert not parsed.errors and not parsed.warnings
    assert parsed.commands[0].keystrokes == "ls\n"


def test_text_around_the_object_is_a_warning() -> None:
    body = answer(("ls\n", 0.1))
    text = f"Let me look around {{first}}.\n{body}\nThat should do it."
    parsed = parse_response(text)
    assert not parsed.errors
    assert parsed.commands[0].keystrokes == "ls\n"
    assert any("before" in w for w in parsed.warnings)
    assert any("after" in w for w in parsed.warnings)


def test_a_raw_newline_inside_a_string_is_tolerated() -> None:
    raw = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\n", "duration": 0.1}]}'
    parsed = parse_response(raw)
    assert not parsed.errors
    assert parsed.commands[0].keystrokes == "ls\n"


def test_missing_analysis_and_plan_are_warnings() -> None:
    parsed = parse_response(json.dumps({"commands": [], "task_complete": False}))
    assert not parsed.errors
    assert any("'analysis'" in w for w in parsed.warnings)
    assert any("'plan'" in w for w in parsed.warnings)


def test_missing_commands_is_an_error_unless_completing() -> None:
    assert parse_response(json.dumps({"analysis": "a", "plan": "p"})).errors
    done = parse_response(json.dumps({"analysis": "a", "plan": "p", "task_complete": True}))
    assert not done.errors and done.task_complete and done.commands == []


@pytest.mark.parametrize(
    ("commands", "problem"),
    [
        ("ls", "must be a list"),
        (["ls"], "must be an object"),
        ([{"duration": 1}], "'keystrokes' is missing"),
        ([{"keystrokes": 5, "duration": 1}], "'keystrokes' must be a string"),
    ],
)
def test_malformed_commands_are_errors(commands: Any, problem: str) -> None:
    parsed = parse_response(json.dumps({"analysis": "a", "plan": "p", "commands": commands}))
    assert any(problem in e for e in parsed.errors), parsed.errors


def test_durations_are_defaulted_and_capped_with_warnings() -> None:
    parsed = parse_response(
        json.dumps(
            {
                "analysis": "a",
                "plan": "p",
                "commands": [
                    {"keystrokes": "a\n"},
                    {"keystrokes": "b\n", "duration": 600},
                    {"keystrokes": "c\n", "duration": "soon"},
                    {"keystrokes": "d\n", "duration": -3},
                    {"keystrokes": "e\n", "duration": "2.5"},
                ],
            }
        )
    )
    assert not parsed.errors
    assert [c.duration for c in parsed.commands] == [
        DEFAULT_DURATION_SEC,
        MAX_DURATION_SEC,
        DEFAULT_DURATION_SEC,
        0.0,
        2.5,
    ]
    assert len(parsed.warnings) == 5


def test_a_command_without_newline_before_another_is_a_warning() -> None:
    parsed = parse_response(answer(("ls", 0.1), ("pwd\n", 0.1)))
    assert any("same line" in w for w in parsed.warnings)


def test_task_complete_as_a_string_is_read_with_a_warning() -> None:
    parsed = parse_response(json.dumps({"analysis": "", "plan": "", "task_complete": "true"}))
    assert parsed.task_complete and parsed.warnings
    parsed = parse_response(answer(complete=False, task_complete=[1]))
    assert not parsed.task_complete and parsed.warnings


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I will now list the files.",
        '{"analysis": "cut off", "commands": [{"keystrokes": "ls\\n"',
        "{not json at all}",
        '{"keystrokes": "ls\\n", "duration": 1}',
    ],
)
def test_unusable_answers_are_errors(text: str) -> None:
    parsed = parse_response(text)
    assert parsed.errors and not parsed.commands


# --- episodes in a sandbox ----------------------------------------------------------------


def play(box: Sandbox, script: list[str]) -> tuple[AgentRun, ScriptedModel]:
    model = ScriptedModel(script)
    harness = make_harness("terminus-2")
    run = run_agent(harness, model, box, (LOG_TASK / "instruction.md").read_text())
    return run, model


def user_turns(model: ScriptedModel) -> list[str]:
    return [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]


def test_keystrokes_solve_the_task_after_confirming(box: Sandbox) -> None:
    run, model = play(
        box,
        [
            answer(("cat /app/service.log\n", 0.2)),
            answer((SOLVE, 0.2), ("cat /app/error_count.txt\n", 0.2)),
            answer(complete=True),
            answer(complete=True),
        ],
    )
    assert (run.exit_status, run.turns, run.tool_calls, run.format_errors) == ("submitted", 4, 3, 0)
    first, *later = user_turns(model)
    assert "Task Description:" in first and "/app/error_count.txt" in first
    assert first.rstrip().endswith("#")  # the screen: a prompt
    assert later[0].startswith("New Terminal Output:\n") and "[ERROR]" in later[0]
    assert later[1].split("\n")[-2] == "2"  # cat printed the count
    assert "task_complete" in later[2]  # the confirmation request
    assert box.verify(LOG_TASK / "tests").reward == 1.0
    steps = [s for s in run.trajectory.steps if s["source"] == "agent"]
    assert [c["function_name"] for c in steps[1]["tool_calls"]] == ["bash_command"] * 2
    assert steps[1]["tool_calls"][0]["arguments"] == {"keystrokes": SOLVE, "duration": 0.2}
    assert steps[3]["tool_calls"][-1]["function_name"] == "mark_task_complete"
    assert "system" not in {s["source"] for s in run.trajectory.steps}


def test_a_no_op_agent_scores_zero(box: Sandbox) -> None:
    run, _ = play(box, [answer(complete=True), answer(complete=True)])
    assert (run.exit_status, run.tool_calls) == ("submitted", 0)
    assert box.verify(LOG_TASK / "tests").reward == 0.0


def test_anything_between_two_completions_withdraws_the_first(box: Sandbox) -> None:
    run, model = play(
        box,
        [
            answer(complete=True),
            answer(("true\n", 0.1)),
            answer(complete=True),
            "not json",
            answer(complete=True),
            answer(complete=True),
        ],
    )
    assert (run.exit_status, run.turns, run.format_errors) == ("submitted", 6, 1)
    turns = user_turns(model)
    assert sum("task_complete" in t and "confirm" in t for t in turns[1:]) == 3


def test_an_unusable_answer_is_corrected_and_nothing_is_typed(box: Sandbox) -> None:
    run, model = play(
        box, ["I think we should run ls.", answer(complete=True), answer(complete=True)]
    )
    assert run.format_errors == 1
    correction = user_turns(model)[1]
    assert "no JSON object" in correction and "nothing was sent" in correction
    assert run.trajectory.steps[1].get("tool_calls") is None  # steps[0] is the prompt


def test_warnings_come_before_the_next_observation(box: Sandbox) -> None:
    script = [json.dumps({"commands": [{"keystrokes": "echo hi\n", "duration": 0.2}]})]
    _, model = play(box, [*script, answer(complete=True), answer(complete=True)])
    observation = user_turns(model)[1]
    assert observation.startswith("Previous response had warnings:\n- the field 'analysis'")
    assert "New Terminal Output:\n" in observation and "\nhi\n" in observation


def test_long_output_is_cut_to_10000_bytes(box: Sandbox) -> None:
    _, model = play(
        box,
        [
            answer(("seq 1 50000\n", 1.5)),
            answer(("seq 1 300000\n", 3.0)),
            answer(complete=True),
            answer(complete=True),
        ],
    )
    long, longer = user_turns(model)[1:3]
    body = long.removeprefix("New Terminal Output:\n")
    assert len(body.encode()) <= 10_000 + 100
    assert "interior bytes omitted" in body
    assert body.split("\n")[1:3] == ["1", "2"]
    assert body.split("\n")[-2] == "50000"
    # More than tmux keeps between two looks: the visible screen, which is short anyway.
    assert len(longer.encode()) <= 10_000 + 100
    assert "300000" in longer
