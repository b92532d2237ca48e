"""RL speed: trainer step vs a plain cross-entropy step, engine rollouts vs bare
``model.generate``, and the embedded default's training time and reward curve.

Run (after ./setup.sh): .venv/bin/python benchmarks/rl.py [--quick]
                         .venv/bin/python benchmarks/rl.py --from-results results

Trainer step: the DPPO update (sequence log-probs with the FP32 LM head, the mask and
the loss, backward, AdamW) on a batch of synthetic episodes, against a plain
cross-entropy step (``model(input_ids, labels=...)``, backward, AdamW) on the same
tokens and the same model, one torch thread, medians over repeats. Rollouts: the
engine's sampling loop (which also returns the behaviour log-probs) against
``model.generate(do_sample=True, top_k=0)`` on the same prompts. Episode threads: as
many threads as a group has episodes, each asking for one prompt per call (what
rollouts do), through the engine's request batching against one call at a time.
vLLM (needs the vLLM environment ./setup.sh builds): the episode workload through 1 and
2 real vLLM servers (fp32) against TransformersEngine, seconds per GB of a weight push into
a vLLM server against load_state_dict, and the train/inference mismatch on vLLM's bf16 path
with and without vLLM's FP32 LM head.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import torch

from tmax.models.tiny import ensure_tiny_model
from tmax.rl.engines.local import TransformersEngine
from tmax.rl.episodes.rollout import Sample
from tmax.rl.learners.learner import LocalLearner
from tmax.rl.loss import group_advantages
from tmax.rl.trainer import Group, RLSettings, Trainer


def synthetic_groups(vocab: int, groups: int, size: int, length: int, seed: int) -> list[Group]:
    """Episodes shaped like tmax ones: a prompt, then a response third of the tokens."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for g in range(groups):
        samples = []
        for k in range(size):
            tokens = torch.randint(0, vocab, (length,), generator=generator).tolist()
            response = length // 3
            mask = [0] * (length - response) + [1] * response
            logprobs = [0.0] * (length - response) + [-8.0] * response
            samples.append(Sample(f"t{g}", tokens, mask, logprobs, float((g + k) % 2), 0,
                                  "submitted", 1, 2, response))  # fmt: skip
        out.append(Group(f"t{g}", samples, 0, g))
    return out


def median_time(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def trainer_vs_cross_entropy(model_dir: Path, repeats: int, length: int) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    vocab = model.config.vocab_size
    groups = synthetic_groups(vocab, groups=2, size=4, length=length, seed=0)
    samples = [s for g in groups for s in g.samples]
    advantages = group_advantages(torch.tensor([g.rewards for g in groups])).flatten().tolist()
    trainer = Trainer(None, None, LocalLearner(model, lr=1e-6),  # type: ignore[arg-type]
                      RLSettings(micro_batch_tokens=1 << 30), Path("/tmp"))  # fmt: skip
    tokens = torch.tensor([s.tokens for g in groups for s in g.samples])
    labels = tokens.clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def cross_entropy_step() -> None:
        loss = model(input_ids=tokens, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def dppo_step() -> None:
        trainer.update(samples, advantages)

    cross_entropy_step()
    dppo_step()  # warm up both
    plain = median_time(cross_entropy_step, repeats)
    ours = median_time(dppo_step, repeats)
    n_tokens = tokens.numel()
    print(f"batch: {tokens.shape[0]} episodes x {length} tokens; one torch thread")
    print(f"plain cross-entropy step: {plain * 1000:7.1f} ms  {n_tokens / plain:9.0f} tokens/s")
    print(f"DPPO trainer step       : {ours * 1000:7.1f} ms  {n_tokens / ours:9.0f} tokens/s")
    print(f"overhead: {ours / plain:.2f}x the plain step (target <= 1.3x)")


def rollouts_vs_generate(model_dir: Path, repeats: int, new_tokens: int) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    engine = TransformersEngine(model)
    prompts = [[11 + i, 200 + i, 37, 99, 5, 1000 + i] * 20 for i in range(8)]
    batch = torch.tensor(prompts)

    def bare() -> None:
        model.generate(batch, attention_mask=torch.ones_like(batch), do_sample=True, top_k=0,
                       top_p=1.0, max_new_tokens=new_tokens, min_new_tokens=new_tokens)  # fmt: skip

    def ours() -> None:
        engine.generate(prompts, max_tokens=new_tokens, temperature=1.0, stop_token_ids=[])

    bare()
    ours()
    plain = median_time(bare, repeats)
    mine = median_time(ours, repeats)
    n = len(prompts) * new_tokens
    print(f"rollouts: {len(prompts)} prompts x {new_tokens} new tokens")
    print(f"bare model.generate: {n / plain:8.0f} tokens/s")
    print(f"TransformersEngine : {n / mine:8.0f} tokens/s (with behaviour log-probs) = "
          f"{plain / mine:.2f}x generate's speed")  # fmt: skip


def episode_threads(model_dir: Path, repeats: int, new_tokens: int, threads: int) -> None:
    """``threads`` callers, one prompt per call, 4 calls each (turns): merged into
    batches by the engine against a lock that admits one call at a time."""
    from tmax.rl.engines.local import RequestBatcher

    prompts = [[11 + i, 200 + i, 37, 99, 5, 1000 + i] * 20 for i in range(threads)]

    def run(engine: TransformersEngine) -> None:
        def episode(index: int) -> None:
            for turn in range(4):
                engine.generate([prompts[index]], max_tokens=new_tokens, temperature=1.0,
                                stop_token_ids=[], seed=index * 10 + turn)  # fmt: skip

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(episode, range(threads)))

    batched = TransformersEngine(model_dir)
    serial = TransformersEngine(model_dir)
    # The same sampling loop, but every call runs alone: the engine before batching.
    serial._batcher = RequestBatcher(serial._run_batch, threading.Lock(), max_rows=1)
    run(batched)
    run(serial)
    alone = median_time(lambda: run(serial), repeats)
    merged = median_time(lambda: run(batched), repeats)
    n = threads * 4 * new_tokens
    print(f"episode threads: {threads} threads x 4 turns x {new_tokens} new tokens, one prompt "
          "per call")  # fmt: skip
    print(f"one call at a time : {n / alone:8.0f} tokens/s")
    print(f"merged into batches: {n / merged:8.0f} tokens/s = {alone / merged:.2f}x")


def episodes(engine: object, prompts: list[list[int]], new_tokens: int) -> None:
    """One thread per episode, 4 turns each, one prompt per call (what rollouts do)."""

    def episode(index: int) -> None:
        for turn in range(4):
            engine.generate([prompts[index]], max_tokens=new_tokens, temperature=1.0,  # type: ignore[attr-defined]
                            stop_token_ids=[], seed=index * 10 + turn)  # fmt: skip

    with ThreadPoolExecutor(len(prompts)) as pool:
        list(pool.map(episode, range(len(prompts))))


def vllm_settings(model_dir: Path, **changes: object) -> object:
    from tmax.rl.engines.remote import EngineSettings

    return EngineSettings(**{"model_dir": str(model_dir), "dtype": "float32",
                             "max_model_len": 2048, "weight_transfer": "tmax_gloo",
                             **changes})  # type: ignore[arg-type]  # fmt: skip


@contextmanager
def vllm_engine(model_dir: Path, count: int = 1, **changes: object) -> Iterator[object]:
    """``count`` real vLLM servers over ``model_dir`` (tmax.rl.engines.remote) and the engine."""
    from tmax.rl.engines.remote import VLLMEngine, local_servers, read_key

    settings = vllm_settings(model_dir, **changes)
    with (
        tempfile.TemporaryDirectory() as folder,
        local_servers(Path(folder), settings, count) as urls,  # type: ignore[arg-type]
    ):
        engine = VLLMEngine(urls, read_key(Path(folder)), settings=settings,  # type: ignore[arg-type]
                            host="127.0.0.1")  # fmt: skip
        try:
            yield engine
        finally:
            engine.close()


def vllm_vs_transformers(model_dir: Path, repeats: int, new_tokens: int, threads: int,
                         servers: tuple[int, ...] = (1, 2),
                         running: object | None = None) -> None:  # fmt: skip
    """The episode workload through vLLM's server (fp32, continuous batching; HTTP per
    turn) against TransformersEngine in this process (our batcher), same model: through
    ``servers`` servers started here, or the ``running`` engine over ``model_dir``."""
    prompts = [[11 + i, 200 + i, 37, 99, 5, 1000 + i] * 20 for i in range(threads)]
    local = TransformersEngine(model_dir)
    episodes(local, prompts, new_tokens)
    here = median_time(lambda: episodes(local, prompts, new_tokens), repeats)
    n = threads * 4 * new_tokens
    print(f"vLLM vs transformers: {threads} episode threads x 4 turns x {new_tokens} new tokens")
    print(f"TransformersEngine (this process): {n / here:8.0f} tokens/s")

    def measure(engine: object) -> None:
        episodes(engine, prompts, new_tokens)
        there = median_time(lambda: episodes(engine, prompts, new_tokens), repeats)
        count = engine.servers  # type: ignore[attr-defined]
        print(f"vLLM, {count} server(s)            : {n / there:8.0f} tokens/s = "
              f"{here / there:.2f}x TransformersEngine")  # fmt: skip

    if running is not None:
        measure(running)
        return
    for count in servers:
        with vllm_engine(model_dir, count) as engine:
            measure(engine)


def push_model(folder: Path, hidden: int, layers: int) -> Path:
    """A random Qwen3 of about 12 * hidden^2 * layers parameters (fp32), for push timing."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    if not (folder / "config.json").exists():
        config = Qwen3Config(vocab_size=4160, hidden_size=hidden, intermediate_size=3 * hidden,
                             num_hidden_layers=layers, num_attention_heads=hidden // 64,
                             num_key_value_heads=hidden // 128, head_dim=64,
                             tie_word_embeddings=False)  # fmt: skip
        AutoModelForCausalLM.from_config(config).save_pretrained(folder)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(ensure_tiny_model() / name, folder / name)
    return folder


def weight_push(repeats: int, hidden: int, layers: int) -> None:
    """Seconds per GB of a push into a vLLM server (tmax_gloo: gloo broadcast in 256 MiB
    buckets, loaded by vLLM's layerwise reload as they arrive), against load_state_dict of
    the same weights in this process."""
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as folder:
        model_dir = push_model(Path(folder) / "push", hidden, layers)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        weights = {k: v.clone() for k, v in model.state_dict().items()}
        gigabytes = sum(t.numel() * t.element_size() for t in weights.values()) / 1e9
        local = median_time(lambda: model.load_state_dict(weights), repeats)
        with vllm_engine(model_dir) as engine:
            engine.update_weights(weights, 1)  # forms the group
            versions = iter(range(2, 2 + repeats))
            push = median_time(lambda: engine.update_weights(weights, next(versions)), repeats)
    print(f"weight push: {gigabytes:.2f} GB of fp32 weights into 1 vLLM server")
    print(
        f"push (gloo, layerwise reload): {push / gigabytes:6.2f} s/GB  ({push:.2f} s); "
        f"load_state_dict in process {local / gigabytes:.2f} s/GB = {push / local:.1f}x"
    )


def head_mismatch(model_dir: Path, prompts: int, new_tokens: int, delta: float = 0.1) -> None:
    """|log π − log μ| with vLLM on its bf16 path, with and without its FP32 LM head
    (vLLM's head_dtype float32), against the learner's bf16 body with the FP32 head (the
    paper's trainer). The tiny model's head is scaled up 20x so that its next-token
    distributions are peaked like a trained model's instead of near uniform."""
    from transformers import AutoModelForCausalLM

    from tmax.rl.loss import sequence_logprobs

    with tempfile.TemporaryDirectory() as folder:
        sharp = Path(folder) / "sharp"
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model.config.tie_word_embeddings = False
        head = model.get_output_embeddings()
        head.weight = torch.nn.Parameter(head.weight.detach().clone() * 20)
        model.save_pretrained(sharp)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(model_dir / name, sharp / name)
        learner = AutoModelForCausalLM.from_pretrained(sharp, dtype=torch.bfloat16)
        inputs = [[11 + i, 200 + i, 37, 99, 5, 1000 + i] * 4 for i in range(prompts)]
        print(f"train/inference mismatch: {prompts} prompts x {new_tokens} tokens sampled at "
              "T=1 by vLLM (bf16), scored by the learner (bf16 body, FP32 head)")  # fmt: skip
        for fp32_head in (False, True):
            with vllm_engine(sharp, dtype="bfloat16", fp32_lm_head=fp32_head) as engine:
                generations = engine.generate(inputs, max_tokens=new_tokens, temperature=1.0,  # type: ignore[attr-defined]
                                              stop_token_ids=[], seed=0)  # fmt: skip
            gaps, moved = [], []
            for prompt, generation in zip(inputs, generations, strict=True):
                ids = torch.tensor([prompt + generation.token_ids])
                with torch.no_grad():
                    pi, _ = sequence_logprobs(learner, ids, torch.ones_like(ids))
                pi = pi[0, len(prompt) - 1 :].double()
                mu = torch.tensor(generation.logprobs, dtype=torch.float64)
                gaps += (pi - mu).abs().tolist()
                moved += ((pi.exp() - mu.exp()).abs() > delta).tolist()
            label = "FP32 head in vLLM" if fp32_head else "bf16 head in vLLM"
            print(f"{label}: mean |log pi - log mu| {statistics.mean(gaps):.5f}, max "
                  f"{max(gaps):.4f}, |pi - mu| > {delta}: {100 * sum(moved) / len(moved):.2f}% "
                  "of tokens")  # fmt: skip


def from_results(results: Path) -> None:
    for run in sorted((results / "rl").glob("*/curve.json")):
        model = run.parent.name
        curve = json.loads(run.read_text())["curve"]
        rewards = " ".join(f"{m['reward_mean']:.2f}" for m in curve)
        print(f"{model}: {len(curve)} steps; reward mean per step: {rewards}")
        zero = " ".join(f"{m['zero_std_fraction']:.2f}" for m in curve)
        print(f"{model}: zero-std group fraction per step: {zero}")
        for stage in ("sft", "train"):
            tsv = results / "benchmarks" / "rl" / model / f"{stage}.tsv"
            if tsv.exists():
                seconds = float(tsv.read_text().splitlines()[1].split("\t")[0])
                print(f"{model}: {stage} wall time {seconds:.0f} s")
        sft = run.parent / "sft_curve.json"
        if sft.exists():
            losses = json.loads(sft.read_text())["curve"]
            print(f"{model}: SFT loss {losses[0]['loss']:.3f} -> {losses[-1]['loss']:.3f} "
                  f"over {len(losses)} steps")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--from-results", type=Path)
    parser.add_argument("--no-vllm", action="store_true", help="skip the vLLM figures")
    args = parser.parse_args()
    if args.from_results:
        from_results(args.from_results)
        return
    torch.set_num_threads(1)
    model_dir = ensure_tiny_model()
    repeats = 3 if args.quick else 7
    trainer_vs_cross_entropy(model_dir, repeats, length=256 if args.quick else 1024)
    rollouts_vs_generate(model_dir, repeats, new_tokens=32 if args.quick else 128)
    episode_threads(model_dir, repeats, new_tokens=32 if args.quick else 128, threads=4)
    if args.no_vllm:
        return
    vllm_vs_transformers(model_dir, repeats, new_tokens=32 if args.quick else 128,
                         threads=8)  # fmt: skip
    weight_push(repeats, hidden=512 if args.quick else 1024, layers=8 if args.quick else 12)
    head_mismatch(model_dir, prompts=8 if args.quick else 32, new_tokens=32 if args.quick else 64)


if __name__ == "__main__":
    main()
