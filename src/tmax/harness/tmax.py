"""The paper's own harness (a mini-SWE-agent descendant, §4 and App. C).

One ``bash`` tool over a persistent shell; every reply is a THOUGHT section and
exactly one call. An observation is the command's output — cut to its first and last
5,000 characters when it passes 10,000 — and always ends with ``(exit_code=N)``.
The agent submits by running ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``; a reply
without exactly one well-formed call gets a corrective message instead.
"""

from __future__ import annotations

from typing import Any

from tmax.harness.base import (
    SUBMIT_SENTINEL,
    Action,
    Harness,
    bash_tool,
    is_submission,
    load_prompt,
    render,
    reply_to_calls,
    single_bash_command,
    truncate_middle,
)
from tmax.harness.trajectory import Trajectory
from tmax.models.client import Completion, Message
from tmax.sandbox.base import ExecResult, Sandbox

BASH_DESCRIPTION = (
    "Run a bash command in a persistent shell (the working directory and exported "
    "variables persist between calls) and return its output and exit code."
)


def format_observation(result: ExecResult, limit: int, timeout: float) -> str:
    """What the model sees after a command: its output, head and tail kept past
    ``limit`` characters, then ``(exit_code=N)``."""
    output = result.output
    if len(output) > limit:
        note = render(
            load_prompt("tmax", "too_long.md").strip(),
            total=len(output),
            omitted="{omitted}",
        )
        output = truncate_middle(output, limit, note)
    if result.timed_out:
        output += "\n" + render(load_prompt("tmax", "timeout.md").strip(), timeout=int(timeout))
    if output and not output.endswith("\n"):
        output += "\n"
    return f"{output}(exit_code={result.exit_code})"


class TmaxHarness(Harness):
    name = "tmax"
    version = "1.0"

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [bash_tool(BASH_DESCRIPTION)]

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        system = load_prompt("tmax", "system.md").strip()
        user = render(
            load_prompt("tmax", "instance.md"),
            instruction=instruction.strip(),
            sentinel=SUBMIT_SENTINEL,
            max_tool_calls=self.settings.max_tool_calls,
        ).strip()
        trajectory.system(system)
        trajectory.user(user)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        command, call_id, problem = single_bash_command(completion)
        if command is None:
            message = render(
                load_prompt("tmax", "format_error.md"), problem=problem, sentinel=SUBMIT_SENTINEL
            ).strip()
            trajectory.observe(message, call_id)
            return Action(messages=reply_to_calls(completion, message), format_error=True)
        timeout = self.settings.command_timeout_sec
        result = self.run(command, sandbox, timeout=timeout)
        if is_submission(result.output, result.exit_code):
            trajectory.observe("(submitted)", call_id)
            return Action(tool_calls=1, done=True, exit_status="submitted")
        observation = format_observation(result, self.settings.observation_chars, timeout)
        trajectory.observe(observation, call_id)
        return Action(messages=reply_to_calls(completion, observation), tool_calls=1)
