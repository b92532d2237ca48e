"""How fast does the tiny model learn to read a task? SFT on easy-tier reference
solutions in the tmax harness prompt, greedy decoding on held-out easy tasks.

Run: .venv/bin/python benchmarks/sft_reading.py [--steps 300] [--batch 16] [--hidden 128]

Tasks come from the sampler (the embedded default's settings, ``--tasks`` specs) and
the easy tier (``generation.tier: easy``); the first ``--heldout`` are held out. The
model is the workflow's tiny Qwen3 (``--hidden``, ``--layers``), trained by the SFT
stage's own code (the expert episode of the tmax harness, prefix-shared batches, AdamW
at ``--lr``) and, every ``--eval-every`` steps, asked for its first command on held-out
tasks, greedily, with the prompt RL and evaluation give it. It prints, per checkpoint:

- ``exact``: the share whose command is the reference solution, character for
  character (a lower bound on what the verifier would pass);
- ``verb``: the share whose command starts with the reference's program (the model
  reads which operation the task asks for; chance is about 1/8);
- the seconds so far and the last answer.

This is the figure that decides how much SFT the miniature (issue 24) can afford: the
one-command run has a few minutes for SFT on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tmax.generate.procedural import render_task  # noqa: E402
from tmax.harness import HarnessSettings  # noqa: E402
from tmax.models.tiny import build_tiny_qwen3  # noqa: E402
from tmax.models.toolcalls import parse_completion  # noqa: E402
from tmax.rl.sft import run_sft, solution_conversation, tokenize_conversation  # noqa: E402
from tmax.rl.stage import _load  # noqa: E402
from tmax.settings import RLSection  # noqa: E402
from tmax.taxonomy.model import load_taxonomy  # noqa: E402
from tmax.taxonomy.sampler import SamplerSettings, sample_spec  # noqa: E402


def easy_tasks(n: int, seed: int) -> list[tuple[str, str]]:
    """(instruction, reference command lines) of the first ``n`` specs, easy tier."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["sampler"]["n_specs"] = n
    taxonomy = load_taxonomy(None)
    settings = SamplerSettings.from_config(config, taxonomy)
    tasks = []
    for index in range(n):
        task = render_task(sample_spec(taxonomy, settings, index), seed, tier="easy")
        script = task.solution["solve.sh"].data.decode()  # type: ignore[index]
        tasks.append((task.instruction, script.split("set -euo pipefail\n", 1)[1].strip()))
    return tasks


def first_command(model, tokenizer, instruction: str, settings) -> str | None:  # type: ignore[no-untyped-def]
    """The command of the model's first tool call, greedily, as RL prompts and parses it."""
    messages, tools = solution_conversation(instruction, "true", settings)
    prompt = tokenizer.apply_chat_template(
        messages[:2], tools=tools, tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=96, do_sample=False)
    _, _, calls = parse_completion(tokenizer.decode(out[0, ids.shape[1] :]))
    if not calls or calls[0].name != "bash":
        return None
    try:  # read as RL rollouts read it
        command = calls[0].parsed_arguments().get("command")
    except ValueError:
        return None
    return command if isinstance(command, str) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--heldout", type=int, default=100)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    settings = HarnessSettings.for_rl(RLSection.of(config["rl"]))
    tasks = easy_tasks(args.tasks, args.seed)
    heldout, train = tasks[: args.heldout], tasks[args.heldout :]
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_qwen3(Path(tmp) / "model", seed=args.seed, hidden_size=args.hidden,
                         num_layers=args.layers)  # fmt: skip
        model, tokenizer = _load(Path(tmp) / "model")
    examples = [tokenize_conversation(tokenizer, *solution_conversation(i, s, settings))
                for i, s in train]  # fmt: skip
    size = sum(p.numel() for p in model.parameters())
    mean_tokens = sum(len(ids) for ids, _ in examples) / len(examples)
    print(f"{size / 1e6:.2f}M parameters; {len(train)} training tasks ({mean_tokens:.0f} "
          f"tokens each), {len(heldout)} held out; batch {args.batch}, lr {args.lr}")  # fmt: skip
    print("| steps | seconds | exact | verb | last answer |\n|---:|---:|---:|---:|---|")
    started, done = time.monotonic(), 0
    while done < args.steps:
        chunk = min(args.eval_every, args.steps - done)
        # One call per checkpoint: a fresh AdamW each time, as the stage does per run.
        run_sft(model, examples, steps=chunk, learning_rate=args.lr, batch_size=args.batch,
                seed=args.seed * 1000 + done)  # fmt: skip
        done += chunk
        elapsed = time.monotonic() - started
        answers = [first_command(model, tokenizer, i, settings) for i, _ in heldout]
        exact = sum(a == s for a, (_, s) in zip(answers, heldout, strict=True)) / len(heldout)
        verb = sum(bool(a) and a.split()[:1] == s.split()[:1]
                   for a, (_, s) in zip(answers, heldout, strict=True)) / len(heldout)  # fmt: skip
        print(f"| {done} | {elapsed:.0f} | {exact:.2f} | {verb:.2f} | `{answers[-1]!s:.70}` |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
