"""A mini-SWE-agent-style harness (tool-calling mode, as Harbor runs it).

One ``bash`` tool, one call per turn, and every command in a fresh subshell: the
working directory and exported variables do not persist, unlike the tmax harness.
The observation is a small JSON object ``{"returncode", "output"}``; past 10,000
characters the output becomes ``output_head``/``output_tail`` with the count of
elided characters. Submitting is the same sentinel as the tmax harness.
"""

from __future__ import annotations

import json
import shlex
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
)
from tmax.harness.trajectory import Trajectory
from tmax.models.client import Completion, Message
from tmax.sandbox.base import ExecResult, Sandbox

BASH_DESCRIPTION = (
    "Run a bash command in a new shell and return its exit code and output. Each call "
    "starts fresh in the task's working directory."
)


def fresh_shell(command: str, workdir: str) -> str:
    """Wrap ``command`` so it runs in a child shell started in ``workdir``: nothing it
    changes (cwd, variables, functions) outlives it."""
    return f"cd {shlex.quote(workdir)} 2>/dev/null || cd /; bash -c {shlex.quote(command)}"


def format_observation(result: ExecResult, limit: int) -> str:
    output = result.output
    body: dict[str, Any] = {"returncode": result.exit_code}
    if result.timed_out:
        body["warning"] = "The command timed out and was stopped."
    if len(output) < limit:
        body["output"] = output
    else:
        half = limit // 2
        body["warning"] = "Output too long."
        body["output_head"] = output[:half]
        body["elided_chars"] = len(output) - 2 * half
        body["output_tail"] = output[-half:]
    return json.dumps(body, ensure_ascii=False)


class MiniSweAgentHarness(Harness):
    name = "mini-swe-agent"
    version = "2.0"

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [bash_tool(BASH_DESCRIPTION)]

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        self.workdir = sandbox.workdir
        system = load_prompt("mini-swe-agent", "system.md").strip()
        user = render(
            load_prompt("mini-swe-agent", "instance.md"),
            instruction=instruction.strip(),
            sentinel=SUBMIT_SENTINEL,
        ).strip()
        trajectory.system(system)
        trajectory.user(user)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        command, call_id, problem = single_bash_command(completion)
        if command is None:
            message = render(
                load_prompt("mini-swe-agent", "format_error.md"),
                problem=problem,
                sentinel=SUBMIT_SENTINEL,
            ).strip()
            trajectory.observe(message, call_id)
            return Action(messages=reply_to_calls(completion, message), format_error=True)
        result = self.run(
            fresh_shell(command, self.workdir), sandbox, timeout=self.settings.command_timeout_sec
        )
        if is_submission(result.output, result.exit_code):
            trajectory.observe("(submitted)", call_id)
            return Action(tool_calls=1, done=True, exit_status="submitted")
        observation = format_observation(result, self.settings.observation_chars)
        trajectory.observe(observation, call_id)
        return Action(messages=reply_to_calls(completion, observation), tool_calls=1)
