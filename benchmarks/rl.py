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
Engine servers: the same threads through 1 and 2 engine servers in other processes
(the inference nodes' path) against the engine in this process, and the weight push.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from tmax.models.tiny import ensure_tiny_model
from tmax.rl.engine import TransformersEngine
from tmax.rl.learner import LocalLearner
from tmax.rl.rollout import Sample
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
    rewards = torch.tensor([g.rewards for g in groups])
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
        trainer.update(groups, rewards)

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
    from tmax.rl.engine import RequestBatcher

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


def engine_servers(model_dir: Path, repeats: int, new_tokens: int, threads: int) -> None:
    """The episode workload of :func:`episode_threads` through engine servers in other
    processes (tmax.rl.remote: TCP per call, one torch thread each) against the engine
    in this process, and a weight push over the gloo group against an in-process load."""
    import tempfile

    from tmax.rl.remote import RemoteEngine, local_servers, read_authkey

    prompts = [[11 + i, 200 + i, 37, 99, 5, 1000 + i] * 20 for i in range(threads)]

    def run(engine: object) -> None:
        def episode(index: int) -> None:
            for turn in range(4):
                engine.generate([prompts[index]], max_tokens=new_tokens, temperature=1.0,  # type: ignore[attr-defined]
                                stop_token_ids=[], seed=index * 10 + turn)  # fmt: skip

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(episode, range(threads)))

    local = TransformersEngine(model_dir)
    weights = {k: v.clone() for k, v in local.model.state_dict().items()}
    run(local)
    in_process = median_time(lambda: run(local), repeats)
    load = median_time(lambda: local.update_weights(weights, 1), repeats)
    n = threads * 4 * new_tokens
    print(f"engine servers: the same {threads} threads x 4 turns x {new_tokens} new tokens")
    print(f"engine in this process   : {n / in_process:8.0f} tokens/s")
    for count in (1, 2):
        settings = {"model_dir": str(model_dir), "engine": "transformers", "threads": 1}
        with (
            tempfile.TemporaryDirectory() as folder,
            local_servers(Path(folder), settings, count) as addresses,
        ):
            remote = RemoteEngine(addresses, read_authkey(Path(folder)), host="127.0.0.1")
            run(remote)
            elapsed = median_time(lambda: run(remote), repeats)  # noqa: B023
            push = median_time(lambda: remote.update_weights(weights, 1), repeats)  # noqa: B023
            remote.close()
        print(f"{count} engine server(s)     : {n / elapsed:8.0f} tokens/s = "
              f"{in_process / elapsed:.2f}x; weight push {push * 1000:.0f} ms "
              f"(in-process load {load * 1000:.0f} ms)")  # fmt: skip


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
    engine_servers(model_dir, repeats, new_tokens=32 if args.quick else 128, threads=4)


if __name__ == "__main__":
    main()
