"""The Terminus-2 harness: its JSON answers, keystrokes into tmux, and how it ends.

Parser tests are pure; episode tests play a ScriptedModel in a real bwrap sandbox on
the count-error-lines fixture and score it with the task's own verifier.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.harness import make_harness, run_agent
from tmax.harness.base import AgentRun, HarnessSettings
from tmax.harness.terminus2 import (
    DEFAULT_DURATION_SEC,
    MAX_DURATION_SEC,
    Terminus2Harness,
    parse_response,
    unwind,
)
from tmax.models.client import ContextLengthExceeded, Message, ScriptedModel
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


def test_a_fenced_answer_is_read_with_warnings_as_harbor_does() -> None:
    body = answer(("ls\n", 0.1))
    parsed = parse_response(f"```json\n{body}\n```")
    assert not parsed.errors
    assert parsed.commands[0].keystrokes == "ls\n"
    assert any("before" in w for w in parsed.warnings)
    assert any("after" in w for w in parsed.warnings)


def test_text_around_the_object_is_a_warning() -> None:
    body = answer(("ls\n", 0.1))
    text = f"Let me look around.\n{body}\nThat should do it."
    parsed = parse_response(text)
    assert not parsed.errors
    assert parsed.commands[0].keystrokes == "ls\n"
    assert any("before" in w for w in parsed.warnings)
    assert any("after" in w for w in parsed.warnings)


def test_a_raw_newline_inside_a_string_is_an_error_as_in_harbor() -> None:
    raw = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\n", "duration": 0.1}]}'
    parsed = parse_response(raw)
    assert parsed.errors and not parsed.commands
    assert "not valid JSON" in parsed.errors[0]


def test_missing_analysis_and_plan_are_errors_as_in_harbor() -> None:
    parsed = parse_response(json.dumps({"commands": [{"keystrokes": "ls\n", "duration": 1}]}))
    assert parsed.errors == ["required fields are missing: analysis, plan"]
    assert not parsed.commands


def test_missing_commands_is_an_error_even_when_completing() -> None:
    assert parse_response(json.dumps({"analysis": "a", "plan": "p"})).errors
    done = parse_response(json.dumps({"analysis": "a", "plan": "p", "task_complete": True}))
    assert done.errors and not done.task_complete


def test_a_bad_command_is_only_a_warning_when_completing() -> None:
    parsed = parse_response(answer(complete=True, commands=[{"duration": 1}]))
    assert not parsed.errors and parsed.task_complete and parsed.commands == []
    assert any("'keystrokes' is missing" in w for w in parsed.warnings)


def test_a_cut_off_answer_gets_its_closing_braces() -> None:
    text = '{"analysis": "a", "plan": "p", "commands": [], "task_complete": true'
    parsed = parse_response(text)
    assert not parsed.errors and parsed.task_complete
    assert parsed.warnings[0].startswith("auto-corrected: closing braces")


def test_the_answer_is_found_after_braces_in_prose() -> None:
    body = answer(("ls\n", 0.1))
    text = f"Let me look around {{first}}.\n{body}\nDone."
    parsed = parse_response(text)
    assert not parsed.errors and parsed.commands[0].keystrokes == "ls\n"
    assert parsed.warnings == [
        "auto-corrected: the JSON object was taken out of the surrounding text; "
        "please answer correctly"
    ]


def test_fields_out_of_order_and_unknown_command_fields_are_warnings() -> None:
    text = json.dumps(
        {"plan": "p", "analysis": "a", "commands": [{"keystrokes": "ls\n", "duration": 1, "x": 1}]}
    )
    parsed = parse_response(text)
    assert not parsed.errors
    assert any("order" in w for w in parsed.warnings)
    assert any("unknown fields: x" in w for w in parsed.warnings)


@pytest.mark.parametrize(
    ("commands", "problem"),
    [
        ("ls", "must be a list"),
        (["ls"], "must be an object"),
        ([{"keystrokes": "a\n", "duration": 1}, {"duration": 1}], "command 2: 'keystrokes'"),
        ([{"duration": 1}], "'keystrokes' is missing"),
        ([{"keystrokes": 5, "duration": 1}], "'keystrokes' must be a string"),
    ],
)
def test_malformed_commands_are_errors(commands: Any, problem: str) -> None:
    parsed = parse_response(json.dumps({"analysis": "a", "plan": "p", "commands": commands}))
    assert any(problem in e for e in parsed.errors), parsed.errors


def test_durations_are_defaulted_with_warnings_and_capped_silently() -> None:
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
        DEFAULT_DURATION_SEC,  # a numeric string is not a number to Harbor
    ]
    assert len(parsed.warnings) == 3  # the missing one and the two that are not numbers


def test_a_command_without_newline_before_another_is_a_warning() -> None:
    parsed = parse_response(answer(("ls", 0.1), ("pwd\n", 0.1)))
    assert any("same line" in w for w in parsed.warnings)


def test_task_complete_is_read_as_harbor_reads_it() -> None:
    for text, complete in (("true", True), ("Yes", True), ("1", True), ("no", False)):
        parsed = parse_response(answer(task_complete=text))
        assert parsed.task_complete is complete and not parsed.warnings
    parsed = parse_response(answer(task_complete=[1]))  # truthy, with a warning
    assert parsed.task_complete and parsed.warnings


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


def test_a_usable_answer_withdraws_a_completion_but_an_unusable_one_does_not(
    box: Sandbox,
) -> None:
    run, model = play(
        box,
        [
            answer(complete=True),
            answer(("true\n", 0.1)),  # withdraws it
            answer(complete=True),
            "not json",  # Harbor skips this turn before its completion logic
            answer(complete=True),
        ],
    )
    assert (run.exit_status, run.turns, run.format_errors) == ("submitted", 5, 1)
    turns = user_turns(model)
    assert sum("task_complete" in t and "confirm" in t for t in turns[1:]) == 2


def test_an_unusable_answer_is_corrected_and_nothing_is_typed(box: Sandbox) -> None:
    run, model = play(
        box, ["I think we should run ls.", answer(complete=True), answer(complete=True)]
    )
    assert run.format_errors == 1
    correction = user_turns(model)[1]
    assert "no JSON object" in correction and "nothing was sent" in correction
    assert run.trajectory.steps[1].get("tool_calls") is None  # steps[0] is the prompt


def test_warnings_come_before_the_next_observation(box: Sandbox) -> None:
    script = [answer(complete=False, commands=[{"keystrokes": "echo hi\n"}])]
    _, model = play(box, [*script, answer(complete=True), answer(complete=True)])
    observation = user_turns(model)[1]
    assert observation.startswith("Previous response had warnings:\n- command 1 has no 'duration'")
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


# --- limits as in Harbor -------------------------------------------------------------------


def test_the_tool_call_budget_and_format_error_limit_do_not_end_an_episode(box: Sandbox) -> None:
    settings = HarnessSettings(max_tool_calls=2, max_format_errors=1)
    model = ScriptedModel(
        [
            answer(("true\n", 0.1), ("true\n", 0.1)),
            "not json",
            "still not json",
            answer((SOLVE, 0.2)),
            answer(complete=True),
            answer(complete=True),
        ]
    )
    harness = make_harness("terminus-2", settings)
    run = run_agent(harness, model, box, "Count the errors.", timeout_sec=600)
    assert (run.exit_status, run.turns, run.tool_calls, run.format_errors) == ("submitted", 6, 3, 2)
    assert box.verify(LOG_TASK / "tests").reward == 1.0


def test_max_turns_caps_the_episode_when_set(box: Sandbox) -> None:
    model = ScriptedModel([answer(("true\n", 0.1))] * 3)
    harness = make_harness("terminus-2", HarnessSettings(max_turns=2))
    run = run_agent(harness, model, box, "Count the errors.", timeout_sec=600)
    assert (run.exit_status, run.turns) == ("max_turns", 2)


def test_without_max_turns_only_the_time_limit_ends_the_episode(box: Sandbox) -> None:
    model = ScriptedModel(lambda _: answer(("true\n", 0.05)))
    harness = make_harness("terminus-2", HarnessSettings(max_tool_calls=1, max_format_errors=1))
    assert harness.turn_limit is None
    run = run_agent(harness, model, box, "Count the errors.", timeout_sec=3.0)
    assert run.exit_status == "agent_timeout" and run.turns > 2


# --- summarising a full context -------------------------------------------------------------

SUMMARY, QUESTIONS, ANSWERS = "S: looked at the log.", "Q: what is left?", "A: count the errors."


def handing_over(script: list[str]) -> Callable[[Sequence[Message]], str]:
    """A model that plays ``script`` and answers the three summarising requests."""
    turns = iter(script)

    def reply(messages: Sequence[Message]) -> str:
        last = str(messages[-1]["content"])
        if last.startswith("Another agent is about to take over"):
            return SUMMARY
        if last.startswith("You are taking over"):
            return QUESTIONS
        if last.startswith("The agent taking over has these questions"):
            return ANSWERS
        return next(turns)

    return reply


def test_a_nearly_full_context_is_summarised_and_the_work_goes_on(box: Sandbox) -> None:
    # The prompt is about 850 estimated tokens and the numbers about 1,200: the second
    # turn's context leaves less than a quarter of 2,400 free, so the work is handed over.
    model = ScriptedModel(
        handing_over(
            [
                answer(("seq 1 1000\n", 0.5)),
                answer((SOLVE, 0.2)),
                answer(complete=True),
                answer(complete=True),
            ]
        )
    )
    settings = HarnessSettings(max_total_tokens=2400, max_turn_tokens=200)
    run = run_agent(make_harness("terminus-2", settings), model, box, "Count the errors.")
    assert (run.exit_status, run.compactions) == ("submitted", 1)
    assert box.verify(LOG_TASK / "tests").reward == 1.0
    handed_over = model.requests[5]["messages"]  # after two turns and three summarising calls
    assert [m["role"] for m in handed_over] == ["user", "user", "assistant", "user"]
    assert handed_over[0]["content"].startswith("You are working in a Linux terminal")
    assert SUMMARY in handed_over[1]["content"] and "Count the errors." in handed_over[1]["content"]
    assert handed_over[2]["content"] == QUESTIONS
    assert ANSWERS in handed_over[3]["content"]
    answers_request = model.requests[4]["messages"]
    assert answers_request[-2:][0] == {"role": "assistant", "content": SUMMARY}
    assert QUESTIONS in answers_request[-1]["content"]
    assert run.usage.calls == 7  # four turns and three summarising calls, all counted
    system = [s for s in run.trajectory.steps if s["source"] == "system"]
    assert len(system) == 1 and system[0]["extra"]["summary_calls"] == [SUMMARY, QUESTIONS, ANSWERS]


def test_summarising_can_be_turned_off(box: Sandbox) -> None:
    model = ScriptedModel(handing_over([answer(("seq 1 400\n", 0.3))] * 5))
    settings = HarnessSettings(max_total_tokens=2000, max_turn_tokens=200)
    harness = Terminus2Harness(settings, summarize=False)
    run = run_agent(harness, model, box, "Count the errors.")
    assert (run.exit_status, run.compactions) == ("token_budget", 0)


def test_an_overflowing_request_is_summarised_instead_of_ending_the_episode(box: Sandbox) -> None:
    script = handing_over([answer(("echo one\n", 0.1)), answer(("echo two\n", 0.1))])
    overflowed: list[int] = []

    def reply(messages: Sequence[Message]) -> str:
        if len(messages) == 5 and not overflowed:  # the third turn's request
            overflowed.append(1)
            raise ContextLengthExceeded("this model's maximum context length is 2048")
        if any(str(m["content"]).startswith("The previous agent") for m in messages):
            return answer(complete=True)
        return script(messages)

    model = ScriptedModel(reply)
    run = run_agent(make_harness("terminus-2"), model, box, "Count the errors.")
    assert (run.exit_status, run.compactions, run.turns) == ("submitted", 1, 4)
    summary_request = model.requests[3]["messages"]  # after the refused one
    assert summary_request[-1]["content"].startswith("Another agent is about to take over")
    assert summary_request[-2]["content"] == answer(("echo two\n", 0.1))


def test_unwinding_drops_the_latest_turns_but_keeps_the_prompt() -> None:
    history: list[Message] = [{"role": "user", "content": "p" * 400}]
    for _ in range(3):
        history += [
            {"role": "assistant", "content": "a" * 400},
            {"role": "user", "content": "o" * 400},
        ]
    history.append({"role": "assistant", "content": "a" * 400})
    assert unwind(history, 800, 10_000) == history
    assert unwind(history, 800, 500) == history[:4]  # 1,600 characters at 4 per token
    assert unwind(history, 800, 1) == history[:2]
