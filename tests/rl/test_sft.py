"""The SFT warm-up's expert episodes look like what the tmax harness shows (tmax.rl.sft)."""

from __future__ import annotations

import json

from tmax.harness import HarnessSettings, make_harness
from tmax.harness.tmax import format_observation, is_submission
from tmax.rl.sft import solution_conversation
from tmax.sandbox.base import ExecResult


def test_an_expert_episode_is_a_harness_episode() -> None:
    settings = HarnessSettings(max_tool_calls=8)
    messages, tools = solution_conversation("Count the lines.", "wc -l < in.txt > out.txt\n",
                                            settings)  # fmt: skip
    harness = make_harness("tmax", settings)
    assert tools == harness.tools
    solve, observation, submit = messages[-3:]
    assert json.loads(solve["tool_calls"][0]["function"]["arguments"]) == {
        "command": "wc -l < in.txt > out.txt"
    }
    # The observation the harness would show for the solution (no output, exit 0).
    assert observation["content"] == format_observation(ExecResult("", 0, 0.0), harness.prompts)
    assert observation["content"].endswith("(exit_code=0)")
    command = json.loads(submit["tool_calls"][0]["function"]["arguments"])["command"]
    assert is_submission(command, "")
