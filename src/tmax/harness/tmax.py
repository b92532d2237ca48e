"""The paper's own harness (a mini-SWE-agent descendant, §4 and App. C).

One ``bash`` tool over a persistent shell; every reply is a THOUGHT section and a
call. The rules follow the upstream evaluation agent (hamishivi/tmax@1cce58a2,
``Vanillux2Agent/agent.py``; docs/harnesses.md cites the lines):

* **Budget:** ``max_tool_calls`` (64) *steps*, i.e. model calls: a reply without a
  usable call uses a step too. Format errors end the episode only after
  ``max_format_errors`` in a row; a usable call resets the count.
* **Several calls:** the first is run; the rest are ignored (and not answered).
* **Observation:** stdout and stderr, trailing whitespace removed, ``(no output)``
  when empty; past 10,000 characters a hint, then the first and last 5,000; then a
  blank line and ``(exit_code=N)``.
* **Submission:** the sentinel ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` anywhere in
  the command, or anywhere in the observation (the command still runs first).

With ``prompts: upstream`` the system, instance, too-long and format-error texts and
the tool schema are read from an hamishivi/tmax checkout (tmax.harness.upstream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tmax.harness import upstream
from tmax.harness.base import (
    SUBMIT_SENTINEL,
    Action,
    Harness,
    bash_tool,
    load_prompt,
    render,
)
from tmax.harness.trajectory import Trajectory
from tmax.models.client import Completion, Message
from tmax.sandbox.base import ExecResult, Sandbox

BASH_DESCRIPTION = (
    "Run a bash command in a persistent shell (the working directory and exported "
    "variables persist between calls) and return its output and exit code."
)
NO_OUTPUT = "(no output)"

UPSTREAM_PROMPTS = "rl_data/generator/vanillux_prompts.yaml"
UPSTREAM_TOOLS = "rl_data/generator/sample_solutions.py"
UPSTREAM_TOOLS_JSON = "sft/preprocessing/config/tool_schemas.json"
UPSTREAM_AGENT = "Vanillux2Agent/agent.py"


@dataclass(frozen=True)
class TmaxPrompts:
    """Everything the model reads that is not a command's output."""

    system: str
    instance: str
    """With ``{{ instruction }}`` (own) or ``{{task}}`` (upstream) in it."""
    format_error: str
    """The whole correction message; ``{problem}`` is filled in (own) or ignored."""
    too_long_hint: str
    """With ``{total}`` filled in (own)."""
    tool: dict[str, Any]
    max_chars: int = 10_000
    head_chars: int = 5_000
    tail_chars: int = 5_000
    upstream: bool = False


def own_prompts(max_tool_calls: int, observation_chars: int) -> TmaxPrompts:
    half = observation_chars // 2
    return TmaxPrompts(
        system=load_prompt("tmax", "system.md").strip(),
        instance=render(
            load_prompt("tmax", "instance.md"),
            instruction="{{ instruction }}",
            sentinel=SUBMIT_SENTINEL,
            max_tool_calls=max_tool_calls,
        ).strip(),
        format_error=render(
            load_prompt("tmax", "format_error.md"), problem="{problem}", sentinel=SUBMIT_SENTINEL
        ).strip(),
        too_long_hint=load_prompt("tmax", "too_long.md").strip(),
        tool=bash_tool(BASH_DESCRIPTION),
        max_chars=observation_chars,
        head_chars=half,
        tail_chars=half,
    )


def upstream_prompts() -> TmaxPrompts:
    """The eval agent's templates, read from a hamishivi/tmax checkout. The correction
    text is the template filled with the one sentence the agent passes to it."""
    templates = upstream.upstream_yaml("tmax", UPSTREAM_PROMPTS)
    observation = templates["observation"]
    try:  # the agent prefers the SFT config's schemas when the checkout has them
        tools = json.loads(upstream.upstream_text("tmax", UPSTREAM_TOOLS_JSON))
    except upstream.UpstreamMissing:
        tools = upstream.literal_assignment("tmax", UPSTREAM_TOOLS, "_DEFAULT_TOOL_SCHEMAS")
    error = upstream.string_arguments("tmax", UPSTREAM_AGENT, "_format_error_message")
    if not error:
        raise upstream.UpstreamMissing(f"no format-error sentence found in {UPSTREAM_AGENT}")
    return TmaxPrompts(
        system=templates["system_template"],
        instance=templates["instance_template"],
        format_error=templates["format_error_template"].replace("{{error}}", error[0]),
        too_long_hint=observation.get("too_long_hint", ""),
        tool=tools[0],
        max_chars=int(observation.get("max_chars", 10_000)),
        head_chars=int(observation.get("head_chars", 5_000)),
        tail_chars=int(observation.get("tail_chars", 5_000)),
        upstream=True,
    )


def format_observation(result: ExecResult, prompts: TmaxPrompts) -> str:
    """What the model sees after a command (Vanillux2Agent._format_tool_result)."""
    output = result.output.rstrip()
    if not output:
        body = NO_OUTPUT
    elif len(output) <= prompts.max_chars:
        body = output
    else:
        head, tail = output[: prompts.head_chars], output[-prompts.tail_chars :]
        elided = len(output) - prompts.head_chars - prompts.tail_chars
        hint = prompts.too_long_hint.strip()
        if not prompts.upstream:
            hint = render(hint, total=len(output))
        body = render(
            load_prompt("tmax", "truncated.md").rstrip("\n"),
            hint=hint,
            head=head,
            tail=tail,
            elided=elided,
            head_chars=prompts.head_chars,
            tail_chars=prompts.tail_chars,
        )
    return f"{body}\n\n(exit_code={result.exit_code})"


def first_bash_call(completion: Completion) -> tuple[str | None, str | None, str | None]:
    """The command of the reply's first tool call, as the upstream agent reads it
    (sample_solutions._extract_tool_call): (command, call id, problem). Later calls
    are ignored; a missing ``command`` is an empty command, which runs."""
    if not completion.tool_calls:
        return None, None, "no tool call"
    call = completion.tool_calls[0]
    if call.name != "bash":
        return None, call.id, f"unknown tool {call.name!r} (the only tool is bash)"
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return None, None, "the bash call's arguments are not valid JSON"
    if not isinstance(arguments, dict):
        return None, call.id, "the bash call's arguments must be a JSON object"
    command = arguments.get("command", "")
    if not isinstance(command, str):
        return None, call.id, "the bash call's 'command' is not a string"
    return command.strip(), call.id, None


def is_submission(command: str, observation: str) -> bool:
    """Upstream's test: the sentinel anywhere in the command or in what the model sees."""
    return SUBMIT_SENTINEL in command or SUBMIT_SENTINEL in observation


class TmaxHarness(Harness):
    name = "tmax"
    version = "1.1"
    budget_counts_turns = True
    format_errors_reset = True

    _prompts: TmaxPrompts | None = None

    @property
    def prompts(self) -> TmaxPrompts:
        if self._prompts is None:
            mode = upstream.check_mode(self.settings.prompts)
            self._prompts = (
                upstream_prompts()
                if mode == "upstream"
                else own_prompts(self.settings.max_tool_calls, self.settings.observation_chars)
            )
        return self._prompts

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [self.prompts.tool]

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        prompts = self.prompts
        task = instruction.strip()
        if prompts.upstream:  # a literal replacement, as upstream does (no Jinja)
            user = prompts.instance.replace("{{task}}", task)
        else:
            user = prompts.instance.replace("{{ instruction }}", task)
        trajectory.system(prompts.system)
        trajectory.user(user)
        return [{"role": "system", "content": prompts.system}, {"role": "user", "content": user}]

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        command, call_id, problem = first_bash_call(completion)
        if command is None:
            message = self.prompts.format_error
            if not self.prompts.upstream:
                message = message.replace("{problem}", problem or "no usable tool call")
            trajectory.observe(message, call_id)
            # Upstream drops the unusable calls from the assistant turn and answers
            # with a tool message when it has a call id, else a user message.
            reply = completion.assistant_message(self.settings.interleaved_thinking)
            reply.pop("tool_calls", None)
            reply["content"] = reply.get("content") or ""
            role: Message = (
                {"role": "tool", "tool_call_id": call_id, "content": message}
                if call_id
                else {"role": "user", "content": message}
            )
            return Action(messages=[role], format_error=True, reply=reply)
        result = self.run(command, sandbox, timeout=self.settings.command_timeout_sec)
        observation = format_observation(result, self.prompts)
        trajectory.observe(observation, call_id)
        answer: Message = {"role": "tool", "tool_call_id": call_id, "content": observation}
        if is_submission(command, observation):
            return Action(messages=[answer], tool_calls=1, done=True, exit_status="submitted")
        return Action(messages=[answer], tool_calls=1)
