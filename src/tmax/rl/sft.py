"""Optional SFT warm-up on reference-solution trajectories (the paper's "SFT trap"
ablation: off for Qwen3.5, on for Qwen3-8B and for the embedded default's tiny model).

A task's reference solution becomes the episode an expert would play in the tmax
harness: the harness's own first messages, one bash call running ``solve.sh``, its
observation, then the submit call. Training is cross-entropy on the assistant tokens
only. Conversations are tokenised turn by turn, the way rollouts build their token
sequences (tmax.rl.episodes.rollout), so SFT and RL see the same tokens.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tmax.harness import HarnessSettings, make_harness
from tmax.harness.base import SUBMIT_SENTINEL
from tmax.harness.tmax import format_observation
from tmax.harness.trajectory import Trajectory
from tmax.sandbox.base import ExecResult
from tmax.tracking import Tracker

log = logging.getLogger("tmax.rl")


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


#: Lines a ``solve.sh`` opens with that are about the script file, not the work: the
#: interpreter line, and strict mode, which in the harness's shell would outlive the
#: command (a later failing command would end the session).
SCRIPT_HEADER = re.compile(r"\A(?:#![^\n]*\n)?(?:\s*set -[euxo]+(?: pipefail)?[ \t]*\n)?")


def solution_of(row: Mapping[str, Any]) -> str:
    """A task row's reference solution (``solution/solve.sh``; empty when it has none)."""
    for entry in row["files"]:
        if entry["path"] == "solution/solve.sh":
            return bytes(entry["data"]).decode("utf-8", errors="replace")
    return ""


def expert_command(solution: str) -> str:
    """The command an expert types for a reference ``solve.sh``: its body, without the
    script header (:data:`SCRIPT_HEADER`)."""
    body = SCRIPT_HEADER.sub("", solution.strip() + "\n", count=1).strip()
    return body or solution.strip()


def solution_conversation(
    instruction: str, solution: str, settings: HarnessSettings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) of an expert episode that runs the reference solution's
    commands (:func:`expert_command`)."""
    harness = make_harness("tmax", settings)
    messages = harness.start(instruction, None, Trajectory("tmax", "1", "sft"))  # type: ignore[arg-type]
    script = expert_command(solution)
    # The solution's output is not known without running it: what the harness shows
    # for a command that printed nothing and succeeded.
    observation = format_observation(ExecResult("", 0, 0.0), harness.prompts)
    messages += [
        {"role": "assistant", "content": "", "tool_calls": [_call("call_0", script)]},
        {"role": "tool", "tool_call_id": "call_0", "content": observation},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [_call("call_1", f"echo {SUBMIT_SENTINEL}")],
        },
    ]
    return messages, harness.tools or []


def tokenize_conversation(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> tuple[list[int], list[int]]:
    """(token ids, loss mask): the conversation rendered turn by turn, mask 1 on the
    assistant turns' tokens (their closing end-of-turn token included)."""

    def render(upto: int, generation_prompt: bool) -> str:
        text: str = tokenizer.apply_chat_template(
            list(messages[:upto]), tools=list(tools), tokenize=False,
            add_generation_prompt=generation_prompt,
        )  # fmt: skip
        return text

    ids: list[int] = []
    mask: list[int] = []
    rendered = ""
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = render(index, True)
        if not prompt.startswith(rendered):
            raise ValueError("the chat template is not prefix-stable; cannot tokenise turn by turn")
        piece = tokenizer.encode(prompt[len(rendered) :], add_special_tokens=False)
        ids += piece
        mask += [0] * len(piece)
        full = render(index + 1, False)
        answer = tokenizer.encode(full[len(prompt) :].rstrip("\n"), add_special_tokens=False)
        ids += answer
        mask += [1] * len(answer)
        rendered = prompt + tokenizer.decode(answer)
    return ids, mask


def _masked_loss(
    model: torch.nn.Module, input_ids: torch.Tensor, attention: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Next-token cross-entropy on labelled positions only: the LM head (the costly
    part for long prompts and a small model) runs on those positions alone."""
    hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != -100
    logits = model.get_output_embeddings()(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), targets[keep])


def shared_prefix(batch: Sequence[tuple[Sequence[int], Sequence[int]]]) -> int:
    """Length of the token prefix every example of ``batch`` starts with, cut so that
    it holds no labelled token and the first token after it is unlabelled too (its
    prediction would come from inside the prefix)."""
    first = batch[0][0]
    common = min(len(ids) for ids, _ in batch)
    for ids, _ in batch[1:]:
        common = next((i for i in range(common) if ids[i] != first[i]), common)
    labelled = min((mask.index(1) if 1 in mask else len(mask)) for _, mask in batch)
    return max(0, min(common, labelled - 1))


def _prefix_shared_loss(
    model: torch.nn.Module, batch: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> torch.Tensor:
    """:func:`_masked_loss` over ``batch`` with the prefix every example shares (the
    harness's system prompt and tool list: most of a short episode's tokens) run once
    and its keys and values repeated for each example. Same loss and gradients as
    padding every example to full length, for a fraction of the compute."""
    logits, targets, _ = labelled_logits(model, batch)
    return torch.nn.functional.cross_entropy(logits.float(), targets)


def labelled_logits(
    model: torch.nn.Module, batch: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits, target ids, row of each) at every labelled position of ``batch``, the
    prefix every example shares run once (its keys and values repeated per example)."""
    from transformers import DynamicCache

    cut = shared_prefix(batch)
    input_ids, attention, labels = _padded([(ids[cut:], mask[cut:]) for ids, mask in batch])
    rows, width = input_ids.shape
    if cut == 0:
        hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
    else:
        prefix = torch.tensor([list(batch[0][0][:cut])])
        cache = DynamicCache(config=model.config)
        model.model(input_ids=prefix, cache=cache, use_cache=True)
        cache.batch_repeat_interleave(len(batch))
        hidden = model.model(
            input_ids=input_ids,
            attention_mask=torch.cat([torch.ones((rows, cut), dtype=attention.dtype),
                                      attention], 1),
            position_ids=torch.arange(cut, cut + width).expand(rows, width),
            cache=cache, use_cache=True,
        ).last_hidden_state  # fmt: skip
    targets = labels[:, 1:]
    keep = targets != -100
    logits = model.get_output_embeddings()(hidden[:, :-1][keep])
    row_of = torch.arange(rows)[:, None].expand_as(targets)[keep]
    return logits, targets[keep], row_of


def _padded(
    batch: Sequence[tuple[Sequence[int], Sequence[int]]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input ids, attention mask, labels) of ``batch``, right-padded; labels -100
    where the loss mask is 0."""
    length = max(len(ids) for ids, _ in batch)
    input_ids = torch.zeros((len(batch), length), dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    for row, (ids, mask) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, : len(ids)] = torch.where(
            torch.tensor(mask, dtype=torch.bool), torch.tensor(ids), torch.tensor(-100)
        )
    return input_ids, attention, labels


def run_sft(
    model: torch.nn.Module,
    examples: Sequence[tuple[list[int], list[int]]],
    *,
    steps: int | None,
    learning_rate: float,
    batch_size: int,
    seed: int = 0,
    token_budget: int | None = None,
    tracker: Tracker | None = None,
) -> list[dict[str, float]]:
    """Cross-entropy on the masked tokens, AdamW at a constant rate; the loss curve
    (each entry also counts the step's ``tokens``: every token of its examples).
    ``steps`` steps, or with ``token_budget`` as many as it takes for the examples'
    tokens to reach it (the SFT control matched to an RL run's learner tokens). Each
    step's entry also goes to ``tracker`` as it is made (the job's W&B or TensorBoard
    run; the caller closes it)."""
    if not examples:
        raise ValueError("SFT needs at least one example")
    if (steps is None) == (token_budget is None):
        raise ValueError("SFT takes either a number of steps or a token budget")
    generator = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    curve = []
    started = time.monotonic()
    step = spent = 0
    while (step < steps) if steps is not None else (spent < token_budget):  # type: ignore[operator]
        step += 1
        batch = [examples[generator.randrange(len(examples))] for _ in range(batch_size)]
        loss = _prefix_shared_loss(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens = sum(len(ids) for ids, _ in batch)
        spent += tokens
        curve.append({"step": step, "loss": float(loss.detach()), "tokens": tokens})
        if tracker is not None:
            tracker.log({**curve[-1], "tokens_total": spent}, step=step)
        if step % 25 == 0 or step == steps or (token_budget is not None and spent >= token_budget):
            goal = (
                f"{step}/{steps}"
                if steps is not None
                else f"{step} ({spent}/{token_budget} tokens)"
            )
            log.info("sft step %s: loss %.4f (%.0fs)", goal, curve[-1]["loss"],
                     time.monotonic() - started)  # fmt: skip
    model.eval()
    return curve
