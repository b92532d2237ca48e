"""A mini-SWE-agent harness (tool-calling mode, as Harbor runs it: ``-c mini``).

The rules follow mini-swe-agent 2.4.6 (docs/harnesses.md cites the lines):

* **Several calls per reply** all run, in order, each answered by its own tool
  message; a call that submits ends the episode there. One malformed call (bad
  JSON, another tool, no ``command``) rejects the whole reply, nothing runs.
* **Fresh shell:** every command is ``/bin/sh -c COMMAND`` (what Python's
  ``subprocess`` with ``shell=True`` runs; dash on Debian and Ubuntu) in the task's
  working directory: ``cd`` and exported variables do not persist. The environment
  adds ``PAGER=cat``, ``MANPAGER=cat``, ``LESS=-R``, ``PIP_PROGRESS_BAR=off`` and
  ``TQDM_DISABLE=1``; a command gets 30 seconds, then its return code is -1 and an
  ``exception_info`` says why.
* **Observation:** ``{"returncode", "output"}`` as indented JSON (Jinja's ``tojson``
  escaping); from 10,000 characters on, ``output_head``/``output_tail`` (5,000 each),
  ``elided_chars`` and ``"warning": "Output too long."``.
* **Budget:** ``max_tool_calls`` model calls (upstream's ``step_limit``, which counts
  every model call; Harbor leaves it unlimited, we keep the run's budget). A reply
  that cannot be parsed is *dropped* from the conversation and answered by a user
  message; three in a row end the episode.
* **Submission:** ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` whose first output
  line is the sentinel, with return code 0.

With ``prompts: upstream`` the system, instance, observation and format-error
templates, the environment variables and the tool schema are read from the installed
``minisweagent`` package (tmax.harness.upstream) and rendered with Jinja.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from tmax.harness import upstream
from tmax.harness.base import (
    SUBMIT_SENTINEL,
    Action,
    Harness,
    bash_tool,
    is_submission,
    load_prompt,
    render,
)
from tmax.harness.trajectory import Trajectory
from tmax.models.client import Completion, Message
from tmax.sandbox.base import ExecResult, Sandbox

BASH_DESCRIPTION = (
    "Run a command in a new shell and return its exit code and output. Each call "
    "starts fresh in the task's working directory."
)
SHELL = "/bin/sh"
"""subprocess.Popen(shell=True), as upstream's LocalEnvironment runs commands."""
COMMAND_TIMEOUT_SEC = 30
"""LocalEnvironmentConfig.timeout (mini.yaml does not change it)."""
MAX_FORMAT_ERRORS_IN_A_ROW = 3
"""AgentConfig.max_consecutive_format_errors (mini.yaml does not change it)."""
ENVIRONMENT = {
    "PAGER": "cat",
    "MANPAGER": "cat",
    "LESS": "-R",
    "PIP_PROGRESS_BAR": "off",
    "TQDM_DISABLE": "1",
}
"""mini.yaml's ``environment.env``: no pagers, no progress bars."""

UPSTREAM_CONFIG = "config/mini.yaml"
UPSTREAM_TOOL = "models/utils/actions_toolcall.py"


@dataclass(frozen=True)
class MiniConfig:
    """The parts of a mini-swe-agent config this harness uses."""

    tool: dict[str, Any]
    environment: dict[str, str] = field(default_factory=lambda: dict(ENVIRONMENT))
    timeout_sec: int = COMMAND_TIMEOUT_SEC
    max_format_errors_in_a_row: int = MAX_FORMAT_ERRORS_IN_A_ROW
    upstream: dict[str, Any] | None = None
    """The upstream YAML (``prompts: upstream``); None for our own prompts."""


def upstream_config() -> MiniConfig:
    config = upstream.upstream_yaml("mini-swe-agent", UPSTREAM_CONFIG)
    environment = config.get("environment") or {}
    agent = config.get("agent") or {}
    return MiniConfig(
        tool=upstream.literal_assignment("mini-swe-agent", UPSTREAM_TOOL, "BASH_TOOL"),
        environment={k: str(v) for k, v in (environment.get("env") or {}).items()},
        timeout_sec=int(environment.get("timeout", COMMAND_TIMEOUT_SEC)),
        max_format_errors_in_a_row=int(
            agent.get("max_consecutive_format_errors", MAX_FORMAT_ERRORS_IN_A_ROW)
        ),
        upstream=config,
    )


def fresh_shell(command: str, workdir: str, environment: dict[str, str]) -> str:
    """Wrap ``command`` so it runs in a child ``/bin/sh`` started in ``workdir`` with
    ``environment`` added: nothing it changes (cwd, variables) outlives it."""
    assignments = "".join(f"{k}={shlex.quote(v)} " for k, v in environment.items())
    return (
        f"cd {shlex.quote(workdir)} 2>/dev/null || cd /; "
        f"{assignments}{SHELL} -c {shlex.quote(command)}"
    )


def _tojson(value: Any) -> str:
    """Jinja's ``tojson`` filter (HTML-safe JSON), which upstream's template uses."""
    text = json.dumps(value, sort_keys=True)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(char, escape)
    return text


def format_observation(
    output: str, returncode: int, limit: int = 10_000, exception_info: str = ""
) -> str:
    """The observation as upstream's template lays it out: indented JSON, the output
    split into head and tail from ``limit`` characters on."""
    extra = f', "exception_info": {_tojson(exception_info)}' if exception_info else ""
    if len(output) < limit:
        lines = [f'  "returncode": {returncode},', f'  "output": {_tojson(output)}{extra}']
    else:
        half = limit // 2
        lines = [
            f'  "returncode": {returncode},',
            f'  "output_head": {_tojson(output[:half])},',
            f'  "output_tail": {_tojson(output[-half:])},',
            f'  "elided_chars": {len(output) - limit},',
            f'  "warning": "Output too long."{extra}',
        ]
    return "{\n" + "\n".join(lines) + "\n}"


def parse_calls(completion: Completion) -> tuple[list[tuple[str, str]], str | None]:
    """Every call of the reply as (command, call id), or the problem that rejects the
    whole reply (upstream's parse_toolcall_actions)."""
    if not completion.tool_calls:
        return [], "the reply has no tool call; every reply needs at least one"
    actions = []
    for call in completion.tool_calls:
        problems = []
        arguments: Any = {}
        try:
            arguments = json.loads(call.arguments)
        except ValueError as error:
            problems.append(f"the arguments of a call are not valid JSON ({error})")
        if call.name != "bash":
            problems.append(f"there is no tool {call.name!r}; the only tool is bash")
        if not isinstance(arguments, dict) or "command" not in arguments:
            problems.append("a bash call has no 'command' argument")
        if problems:
            return [], "; ".join(problems)
        actions.append((str(arguments["command"]), call.id))
    return actions, None


class MiniSweAgentHarness(Harness):
    name = "mini-swe-agent"
    version = "2.4.6"
    budget_counts_turns = True
    format_errors_reset = True

    _config: MiniConfig | None = None

    @property
    def config(self) -> MiniConfig:
        if self._config is None:
            if upstream.check_mode(self.settings.prompts) == "upstream":
                self._config = upstream_config()
            else:
                self._config = MiniConfig(tool=bash_tool(BASH_DESCRIPTION))
        return self._config

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [self.config.tool]

    @property
    def format_error_limit(self) -> int:
        return self.config.max_format_errors_in_a_row

    def start(self, instruction: str, sandbox: Sandbox, trajectory: Trajectory) -> list[Message]:
        self.workdir = sandbox.workdir
        self.started = time.monotonic()
        self.model_calls = 0
        task = instruction.strip()
        if self.config.upstream is None:
            system = load_prompt("mini-swe-agent", "system.md").strip()
            user = render(
                load_prompt("mini-swe-agent", "instance.md"),
                instruction=task,
                sentinel=SUBMIT_SENTINEL,
            ).strip()
        else:
            self.template_vars = self._upstream_vars(sandbox, task)
            agent = self.config.upstream["agent"]
            system = upstream.render_jinja(agent["system_template"], **self.template_vars)
            user = upstream.render_jinja(agent["instance_template"], **self.template_vars)
        trajectory.system(system)
        trajectory.user(user)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _upstream_vars(self, sandbox: Sandbox, task: str) -> dict[str, Any]:
        """What upstream's templates may use: the config sections, the machine's
        ``uname`` (read in the sandbox, where upstream runs) and the task."""
        assert self.config.upstream is not None
        uname = self.run("uname -s; uname -n; uname -r; uname -v; uname -m", sandbox)
        fields = (uname.output.splitlines() + [""] * 5)[:5]
        variables: dict[str, Any] = {}
        for section in ("agent", "environment", "model"):
            variables.update(self.config.upstream.get(section) or {})
        names = ("system", "node", "release", "version", "machine")
        variables.update(zip(names, fields, strict=True))
        variables.update(processor="", task=task, model_cost=0.0)
        return variables

    def _vars(self, **extra: Any) -> dict[str, Any]:
        return {
            **self.template_vars,
            "n_model_calls": self.model_calls,
            "elapsed_seconds": int(time.monotonic() - self.started),
            **extra,
        }

    def act(self, completion: Completion, sandbox: Sandbox, trajectory: Trajectory) -> Action:
        self.model_calls += 1
        actions, problem = parse_calls(completion)
        if problem is not None:
            message = self._format_error(completion, problem)
            trajectory.observe(message)
            # Upstream never adds a reply it could not parse to the conversation.
            return Action(
                messages=[{"role": "user", "content": message}], format_error=True, drop_reply=True
            )
        replies: list[Message] = []
        for ran, (command, call_id) in enumerate(actions, start=1):
            result = self.run(
                fresh_shell(command, self.workdir, self.config.environment),
                sandbox,
                timeout=self.config.timeout_sec,
            )
            if is_submission(result.output, result.exit_code) and not result.timed_out:
                trajectory.observe("(submitted)", call_id)
                return Action(messages=replies, tool_calls=ran, done=True, exit_status="submitted")
            observation = self._observation(result)
            trajectory.observe(observation, call_id)
            replies.append({"role": "tool", "tool_call_id": call_id, "content": observation})
        return Action(messages=replies, tool_calls=len(actions))

    def _observation(self, result: ExecResult) -> str:
        returncode, exception_info = result.exit_code, ""
        if result.timed_out:
            returncode = -1
            exception_info = render(
                load_prompt("mini-swe-agent", "timeout.md").strip(),
                timeout=self.config.timeout_sec,
            )
        if self.config.upstream is None:
            return format_observation(
                result.output, returncode, self.settings.observation_chars, exception_info
            )
        output = {"output": result.output, "returncode": returncode}
        output["exception_info"] = exception_info
        template = self.config.upstream["model"]["observation_template"]
        return upstream.render_jinja(template, **self._vars(output=output))

    def _format_error(self, completion: Completion, problem: str) -> str:
        cut_off = completion.finish_reason == "length" or (
            completion.finish_reason == "tool_calls" and not completion.tool_calls
        )
        if self.config.upstream is not None:
            return upstream.render_jinja(
                self.config.upstream["model"]["format_error_template"],
                **self._vars(
                    error=problem,
                    actions=[],
                    has_tool_calls=bool(completion.tool_calls),
                    finish_reason=completion.finish_reason,
                ),
            )
        name = "cut_off.md" if cut_off else "format_error.md"
        return render(
            load_prompt("mini-swe-agent", name),
            problem=problem,
            finish_reason=completion.finish_reason,
            sentinel=SUBMIT_SENTINEL,
        ).strip()
