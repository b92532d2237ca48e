"""The SFT warm-up's expert episodes look like what the tmax harness shows (tmax.rl.sft)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from tmax.harness import HarnessSettings, make_harness
from tmax.harness.tmax import format_observation, is_submission
from tmax.rl.sft import (
    _masked_loss,
    _padded,
    _prefix_shared_loss,
    expert_command,
    run_sft,
    shared_prefix,
    solution_conversation,
    tokenize_conversation,
)
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


@pytest.mark.parametrize(
    ("solution", "command"),
    [
        ("#!/bin/bash\nset -euo pipefail\nwc -l < a > b\n", "wc -l < a > b"),
        ("#!/usr/bin/env bash\nset -e\ncd /app\nmake\n", "cd /app\nmake"),
        ("wc -l < a > b\n", "wc -l < a > b"),
        # strict mode later in the script is the script's own business
        ("#!/bin/bash\ncd /app\nset -e\nmake\n", "cd /app\nset -e\nmake"),
    ],
)
def test_the_expert_types_the_script_body(solution: str, command: str) -> None:
    """The expert's call is solve.sh without its header: strict mode typed into the
    harness's shell would outlive the command, and the header is tokens to learn."""
    assert expert_command(solution) == command
    messages, _ = solution_conversation("Do it.", solution, HarnessSettings(max_tool_calls=3))
    call = messages[-3]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(call) == {"command": command}


@pytest.mark.usefixtures("one_thread")
def test_the_shared_prefix_runs_once_with_the_same_loss_and_gradients(
    model_dir: Path, tokenizer: Any
) -> None:
    """Running the harness prompt every example shares once and repeating its keys and
    values gives what padding each example to full length gives."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    settings = HarnessSettings(max_tool_calls=3)
    batch = [
        tokenize_conversation(tokenizer, *solution_conversation(instruction, solution, settings))
        for instruction, solution in [
            ("Write the word `admin` to `/app/answer.txt`.", "echo admin > /app/answer.txt"),
            ("Sort `/app/a.txt` into `/app/b.txt`, then count its lines.",
             "sort /app/a.txt > /app/b.txt\nwc -l < /app/b.txt > /app/n.txt"),
            ("Write the word `admin` to `/app/answer.txt`.", "echo admin > /app/answer.txt"),
        ]
    ]  # fmt: skip
    cut = shared_prefix(batch)
    assert 0 < cut < min(mask.index(1) for _, mask in batch)
    assert all(ids[:cut] == batch[0][0][:cut] for ids, _ in batch)

    def loss_and_grads(loss_of: Any) -> tuple[float, list[torch.Tensor]]:
        model.zero_grad(set_to_none=True)
        loss = loss_of()
        loss.backward()
        return float(loss.detach()), [p.grad.clone() for p in model.parameters()]

    shared, shared_grads = loss_and_grads(lambda: _prefix_shared_loss(model, batch))
    padded, padded_grads = loss_and_grads(lambda: _masked_loss(model, *_padded(batch)))
    assert shared == pytest.approx(padded, rel=1e-5)
    for a, b in zip(shared_grads, padded_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_without_a_shared_prefix_nothing_is_cut() -> None:
    assert shared_prefix([([1, 2, 3], [0, 1, 1]), ([1, 2, 4], [0, 0, 1])]) == 0
    assert shared_prefix([([5, 2, 3], [0, 0, 1]), ([6, 2, 3], [0, 0, 1])]) == 0
    assert shared_prefix([([1, 2, 3, 4], [0, 0, 0, 1]), ([1, 2, 3, 5], [0, 0, 0, 1])]) == 2


@pytest.mark.usefixtures("one_thread")
def test_a_token_budget_runs_until_the_examples_tokens_reach_it(model_dir: Path) -> None:
    """The SFT control's stopping rule: whole steps until the budget is spent."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    examples = [(list(range(10, 20)), [0] * 5 + [1] * 5)]  # 10 tokens each
    curve = run_sft(model, examples, steps=None, token_budget=50, learning_rate=1e-3,
                    batch_size=2)  # fmt: skip
    assert [c["tokens"] for c in curve] == [20, 20, 20]  # 40 < 50 <= 60
    # RL that trained on nothing: a control of no steps (the SFT model as it is)
    assert run_sft(model, examples, steps=None, token_budget=0, learning_rate=1e-3,
                   batch_size=2) == []  # fmt: skip
    with pytest.raises(ValueError, match="either a number of steps or a token budget"):
        run_sft(model, examples, steps=3, token_budget=50, learning_rate=1e-3, batch_size=2)
