"""``evaluation.prompts: upstream``: finding upstream packages and using their templates.

The fake packages below are written here in our own words; the tests against the real
upstream packages (skipped where they are not installed) only check that loading works
and that the task reaches the prompt, never upstream sentences.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.conftest import LOG_TASK
from tmax.harness import HarnessSettings, make_harness, run_agent
from tmax.harness import upstream as up
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.harness.mini_swe_agent import format_observation
from tmax.models.client import Completion, Message, ScriptedModel, ToolCall, bash_call
from tmax.sandbox import Sandbox

INSTRUCTION = (LOG_TASK / "instruction.md").read_text()
SUBMIT = bash_call(f"echo {SUBMIT_SENTINEL}")
UPSTREAM = HarnessSettings(prompts="upstream")

FAKE_MINI_CONFIG = """\
agent:
  system_template: "Fake system words."
  instance_template: |
    Fake task header: {{task}}
    Fake machine line: {{system}} {{machine}}
  step_limit: 0
environment:
  env:
    FAKE_UPSTREAM_VAR: "from-the-fake-config"
  timeout: 7
model:
  observation_template: "fake rc={{ output.returncode }} out={{ output.output | trim }}"
  format_error_template: "fake error: {{ error }} ({{ finish_reason }}, {{ has_tool_calls }})"
"""
FAKE_MINI_TOOL = """\
BASH_TOOL = {"type": "function", "function": {"name": "bash", "description": "fake tool",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
    "required": ["command"]}}}
"""
FAKE_TMAX_PROMPTS = """\
system_template: "Fake tmax system."
instance_template: "Fake tmax task: {{task}}"
observation:
  max_chars: 40
  head_chars: 10
  tail_chars: 10
  too_long_hint: "Fake hint."
format_error_template: "Fake format error: {{error}}"
"""
FAKE_TMAX_TOOLS = """\
_DEFAULT_TOOL_SCHEMAS = [{"type": "function", "function": {"name": "bash",
    "description": "fake tmax tool", "parameters": {"type": "object",
    "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
"""
FAKE_TMAX_AGENT = """\
def _append_format_error(messages):
    content = _format_error_message("A fake sentence about the call.")
"""
FAKE_TERMINUS_PROMPT = """\
Fake terminus opening, literal {{braces}} kept.
Fake task slot: {instruction}
Fake screen slot: {terminal_state}
"""
FAKE_CODEACT_PROMPTS = {
    "system_prompt.j2": "Fake CodeAct base ({% if cli_mode %}cli{% else %}not cli{% endif %}).",
    "system_prompt_long_horizon.j2": "{% include 'system_prompt.j2' %}\nFake planning words.\n",
}
TERMINUS_DONE = json.dumps({"analysis": "a", "plan": "p", "commands": [], "task_complete": True})
FINISH = Completion(
    "", (ToolCall("f", "finish", json.dumps({"message": "done"})),), finish_reason="tool_calls"
)


@pytest.fixture(autouse=True)
def fresh_lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No lookup leaks between tests (they are cached per process)."""

    def clear() -> None:
        for cached in (up.package_dir, up.upstream_yaml, up.literal_assignment, up.site_dirs):
            cached.cache_clear()

    clear()
    yield
    clear()


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def fake_mini(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write(
        tmp_path / "mini",
        {
            "minisweagent/config/mini.yaml": FAKE_MINI_CONFIG,
            "minisweagent/models/utils/actions_toolcall.py": FAKE_MINI_TOOL,
            "mini_swe_agent-2.4.6.dist-info/METADATA": "Name: mini-swe-agent\n",
        },
    )
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", str(root))
    return root


@pytest.fixture
def fake_tmax(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write(
        tmp_path / "tmax-checkout",
        {
            "rl_data/generator/vanillux_prompts.yaml": FAKE_TMAX_PROMPTS,
            "rl_data/generator/sample_solutions.py": FAKE_TMAX_TOOLS,
            "Vanillux2Agent/agent.py": FAKE_TMAX_AGENT,
        },
    )
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", str(root))
    return root


@pytest.fixture
def fake_harbor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write(
        tmp_path / "harbor-site",
        {
            "harbor/agents/terminus_2/templates/terminus-json-plain.txt": FAKE_TERMINUS_PROMPT,
            "harbor-0.26.0.dist-info/METADATA": "Name: harbor\n",
        },
    )
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", str(root))
    return root


@pytest.fixture
def fake_openhands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    prompts = "openhands/agenthub/codeact_agent/prompts"
    root = write(
        tmp_path / "openhands-site",
        {
            **{f"{prompts}/{name}": text for name, text in FAKE_CODEACT_PROMPTS.items()},
            "openhands_ai-1.6.0.dist-info/METADATA": "Name: openhands-ai\n",
        },
    )
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", str(root))
    return root


# --- finding and reading ----------------------------------------------------------------


def test_a_missing_package_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", str(tmp_path))
    monkeypatch.setenv("TMAX_HARBOR_PYTHON", str(tmp_path / "no-python"))
    monkeypatch.setitem(
        up.UPSTREAM,
        "tmax",
        up.UpstreamSource("hamishivi/tmax", "tmax_no_such_package", "1cce58a2", "clone it"),
    )
    with pytest.raises(up.UpstreamMissing, match=r"hamishivi/tmax.*Install it: clone it"):
        make_harness("tmax", UPSTREAM).start(INSTRUCTION, None, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"evaluation\.prompts is 'theirs'"):
        up.check_mode("theirs")


@pytest.mark.parametrize(
    ("harness", "package"), [("terminus-2", "harbor"), ("openhands", "openhands")]
)
def test_a_missing_package_stops_the_episode_before_the_terminal_starts(
    harness: str, package: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", str(tmp_path))
    monkeypatch.setenv("TMAX_HARBOR_PYTHON", str(tmp_path / "no-python"))
    source = up.UPSTREAM[harness]
    monkeypatch.setitem(
        up.UPSTREAM,
        harness,
        up.UpstreamSource(source.distribution, f"{package}_absent", "1.0", "get it somehow"),
    )
    with pytest.raises(up.UpstreamMissing, match=rf"{harness} harness.*Install it: get it"):
        make_harness(harness, UPSTREAM).start(INSTRUCTION, None, None)  # type: ignore[arg-type]


def test_files_and_literals_are_read_without_importing(fake_tmax: Path) -> None:
    assert up.upstream_path("tmax", "Vanillux2Agent/agent.py").is_file()
    schemas = up.literal_assignment(
        "tmax", "rl_data/generator/sample_solutions.py", "_DEFAULT_TOOL_SCHEMAS"
    )
    assert schemas[0]["function"]["description"] == "fake tmax tool"
    sentence = up.string_arguments("tmax", "Vanillux2Agent/agent.py", "_format_error_message")
    assert sentence == ["A fake sentence about the call."]
    with pytest.raises(up.UpstreamMissing, match="does not exist"):
        up.upstream_path("tmax", "rl_data/no_such_file.yaml")


def test_another_interpreters_site_packages_are_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Harbor env (Python 3.12) is asked for its site-packages, not imported."""
    site = write(tmp_path / "site", {"harbor/agents/x.txt": "fake"})
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho \'["{site}", "{site}"]\'\n')
    python.chmod(0o755)
    monkeypatch.setenv("TMAX_UPSTREAM_PATH", "")
    monkeypatch.setenv("TMAX_HARBOR_PYTHON", str(python))
    assert up.site_dirs(str(python)) == (site,)
    assert up.upstream_text("terminus-2", "agents/x.txt") == "fake"


# --- harnesses with upstream templates ------------------------------------------------------


def test_mini_swe_agent_uses_the_upstream_config(fake_mini: Path, box: Sandbox) -> None:
    model = ScriptedModel(
        [
            Completion("no call here", finish_reason="stop"),
            bash_call('echo "$FAKE_UPSTREAM_VAR"'),
            SUBMIT,
        ]
    )
    run = run_agent(make_harness("mini-swe-agent", UPSTREAM), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    messages = model.requests[-1]["messages"]
    assert messages[0]["content"] == "Fake system words."
    assert messages[1]["content"].startswith(f"Fake task header: {INSTRUCTION.strip()}")
    assert "Fake machine line: Linux " in messages[1]["content"]
    assert messages[2] == {"role": "user", "content": messages[2]["content"]}
    assert (
        messages[2]["content"].startswith("fake error: ")
        and "(stop, False)" in messages[2]["content"]
    )
    assert messages[-1]["content"] == "fake rc=0 out=from-the-fake-config"
    assert model.requests[0]["tools"][0]["function"]["description"] == "fake tool"
    assert make_harness("mini-swe-agent", UPSTREAM).config.timeout_sec == 7


def test_tmax_uses_the_upstream_templates(fake_tmax: Path, box: Sandbox) -> None:
    unknown = Completion("", (ToolCall("p", "python", "{}"),))
    model = ScriptedModel([unknown, bash_call("seq 1 30"), SUBMIT])
    run = run_agent(make_harness("tmax", UPSTREAM), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    messages = model.requests[-1]["messages"]
    assert messages[0]["content"] == "Fake tmax system."
    assert messages[1]["content"] == f"Fake tmax task: {INSTRUCTION.strip()}"
    assert messages[3]["content"] == "Fake format error: A fake sentence about the call."
    long = messages[-1]["content"]  # 81 characters: past the fake 40
    assert long.startswith("Fake hint.") and "1\n2\n3\n4\n5" in long and "29\n30" in long
    assert model.requests[0]["tools"][0]["function"]["description"] == "fake tmax tool"


def test_terminus_2_opens_with_harbors_template(fake_harbor: Path, box: Sandbox) -> None:
    """Filled as Harbor fills it (``str.format``); the later messages stay ours."""
    model = ScriptedModel([TERMINUS_DONE, TERMINUS_DONE])
    run = run_agent(make_harness("terminus-2", UPSTREAM), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    first = model.requests[0]["messages"][0]["content"]
    assert first.startswith("Fake terminus opening, literal {braces} kept.\n")
    assert f"Fake task slot: {INSTRUCTION}\nFake screen slot: Current Terminal Screen:\n" in first
    assert "{instruction}" not in first and "{terminal_state}" not in first


def test_openhands_system_prompt_is_codeacts_template(fake_openhands: Path, box: Sandbox) -> None:
    """The long-horizon template (plan mode, upstream's default) with its include, as
    CodeAct's PromptManager renders it; the task goes in as given."""
    model = ScriptedModel([FINISH])
    run = run_agent(make_harness("openhands", UPSTREAM), model, box, INSTRUCTION)
    assert run.exit_status == "finished"
    system, user = model.requests[0]["messages"][:2]
    assert system == {
        "role": "system",
        "content": "Fake CodeAct base (not cli).\nFake planning words.",
    }
    assert user == {"role": "user", "content": INSTRUCTION}


# --- the real upstream packages, where installed ------------------------------------------


def installed(harness: str) -> Path:
    try:
        return up.package_dir(harness)
    except up.UpstreamMissing as missing:
        pytest.skip(str(missing))


def test_the_installed_mini_swe_agent_renders_the_task(
    monkeypatch: pytest.MonkeyPatch, box: Sandbox
) -> None:
    monkeypatch.delenv("TMAX_UPSTREAM_PATH", raising=False)
    installed("mini-swe-agent")
    model = ScriptedModel([SUBMIT])
    run = run_agent(make_harness("mini-swe-agent", UPSTREAM), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    assert INSTRUCTION.strip() in model.requests[0]["messages"][1]["content"]
    assert model.requests[0]["tools"][0]["function"]["name"] == "bash"


def test_our_mini_observation_is_upstreams_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Own prompts still lay the observation out exactly as upstream's template does."""
    monkeypatch.delenv("TMAX_UPSTREAM_PATH", raising=False)
    installed("mini-swe-agent")
    template = up.upstream_yaml("mini-swe-agent", "config/mini.yaml")["model"]
    for output, returncode, info in [
        ("plain\n", 0, ""),
        ("<tag> & 'quote' é\n", 2, ""),
        ("x" * 10_000, 0, ""),
        ("partial", -1, "stopped"),
    ]:
        rendered = up.render_jinja(
            template["observation_template"],
            output={"output": output, "returncode": returncode, "exception_info": info},
        )
        assert rendered == format_observation(output, returncode, 10_000, info)


def test_the_harbor_env_holds_the_terminus_2_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMAX_UPSTREAM_PATH", raising=False)
    installed("terminus-2")
    path = up.upstream_path("terminus-2", "agents/terminus_2/templates/terminus-json-plain.txt")
    assert path.stat().st_size > 0


def first_messages(harness: str, settings: HarnessSettings, box: Sandbox) -> list[Message]:
    model = ScriptedModel([TERMINUS_DONE, TERMINUS_DONE] if harness == "terminus-2" else [FINISH])
    run_agent(make_harness(harness, settings), model, box, INSTRUCTION)
    return model.requests[0]["messages"]


def test_the_installed_harbor_opens_terminus_2_with_the_task(
    monkeypatch: pytest.MonkeyPatch, box: Sandbox
) -> None:
    monkeypatch.delenv("TMAX_UPSTREAM_PATH", raising=False)
    installed("terminus-2")
    theirs = first_messages("terminus-2", UPSTREAM, box)[0]["content"]
    ours = first_messages("terminus-2", HarnessSettings(), box)[0]["content"]
    assert INSTRUCTION.strip() in theirs and theirs != ours
    assert "{instruction}" not in theirs and "{terminal_state}" not in theirs


def test_the_installed_openhands_renders_codeacts_system_prompt(
    monkeypatch: pytest.MonkeyPatch, box: Sandbox
) -> None:
    monkeypatch.delenv("TMAX_UPSTREAM_PATH", raising=False)
    installed("openhands")
    theirs = first_messages("openhands", UPSTREAM, box)
    ours = first_messages("openhands", HarnessSettings(), box)
    assert theirs[1]["content"] == INSTRUCTION
    assert theirs[0]["content"] != ours[0]["content"]
    assert "{%" not in theirs[0]["content"] and "{{" not in theirs[0]["content"]


def test_a_tmax_checkout_renders_the_task(box: Sandbox) -> None:
    installed("tmax")  # TMAX_UPSTREAM_PATH=<a hamishivi/tmax checkout>
    model = ScriptedModel([SUBMIT])
    run = run_agent(make_harness("tmax", UPSTREAM), model, box, INSTRUCTION)
    assert run.exit_status == "submitted"
    assert INSTRUCTION.strip() in model.requests[0]["messages"][1]["content"]
    assert json.dumps(model.requests[0]["tools"][0]).count('"bash"') == 1
