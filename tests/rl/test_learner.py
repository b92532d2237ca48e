"""The learner: AdamW steps, exact resume, ZeRO-3 on two CPU processes, the Slurm environment.

The DeepSpeed test runs this file as a script in two processes (``--worker``), one per rank,
talking over gloo on the CPU accelerator; the parent compares their gathered weights with a
:class:`LocalLearner` that saw the same total batch in one process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.rl.ranks import free_port, run_ranks  # noqa: E402
from tmax.rl.learners.learner import (  # noqa: E402
    DEEPSPEED_TAG,
    Learner,
    LocalLearner,
    deepspeed_config,
    distributed_env,
    init_distributed,
    make_learner,
)

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
WORLD_SIZE = 2
LR = 1e-2  # large enough that one step visibly moves every weight
MAX_GRAD_NORM = 0.5  # small enough that clipping is active, so clipping is compared too
WORKER_TIMEOUT_S = 150


# --------------------------------------------------------------------------------------------
# A tiny model and one step's data, identical in every process


def tiny_model(seed: int = 0) -> torch.nn.Module:
    """A 2-layer Qwen3 with tied embeddings (~30k parameters), float32."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=1,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def step_batches(step: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Four right-padded sequences of different lengths: one micro-batch each."""
    generator = torch.Generator().manual_seed(1000 + step)
    batches = []
    for length in (7, 12, 5, 9):
        ids = torch.randint(2, 64, (1, 12), generator=generator)
        mask = torch.zeros(1, 12, dtype=torch.long)
        mask[0, :length] = 1
        batches.append((ids.masked_fill(mask == 0, 0), mask))
    return batches


def global_token_count(batches: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    return int(sum(int(mask[:, 1:].sum()) for _, mask in batches))


def micro_batch_loss(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, total_tokens: int
) -> torch.Tensor:
    """Summed next-token NLL of one micro-batch divided by the step's global token count.

    Scored through the model's own logits: the trainer's FP32-head scoring
    (tmax.rl.loss.sequence_logprobs) under ZeRO-3 with tied embeddings does not yet
    match the local learner (a known gap, see docs/gpu.md)."""
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return -(logp * mask[:, 1:]).sum() / total_tokens


def train_step(learner: Learner, step: int, *, rank: int = 0, world_size: int = 1) -> dict:
    """The whole batch's token count normalises; each rank takes every world_size-th sequence."""
    batches = step_batches(step)
    total = global_token_count(batches)
    for ids, mask in batches[rank::world_size]:
        learner.backward(micro_batch_loss(learner.model, ids, mask, total))
    return learner.step()


def local_learner(seed: int = 0) -> LocalLearner:
    return LocalLearner(tiny_model(seed), lr=LR, max_grad_norm=MAX_GRAD_NORM, weight_decay=0.01)


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], *, exact: bool) -> None:
    assert a.keys() == b.keys()
    for name in a:
        if exact:
            assert torch.equal(a[name], b[name]), name
        else:
            # Adam's first step moves a weight by lr·g/(|g| + eps): for the odd element whose
            # gradient is near eps, the ranks' other summation order shows up at ~1e-6 (seen:
            # 1.7e-6 on one of 2,048). 1e-5 is a thousandth of a step (lr 1e-2).
            torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-5, msg=name)


# --------------------------------------------------------------------------------------------
# LocalLearner


def test_local_learner_resumes_bit_identically(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    uninterrupted = local_learner()
    initial = uninterrupted.full_state_dict()
    stats = [train_step(uninterrupted, step) for step in range(3)]
    assert all(s["lr"] == LR for s in stats)  # constant learning rate
    assert stats[0]["grad_norm"] > MAX_GRAD_NORM  # clipping was active
    moved = uninterrupted.full_state_dict()
    assert not any(torch.equal(initial[n], moved[n]) for n in initial if "norm" not in n)

    first = local_learner()
    for step in range(2):
        train_step(first, step)
    first.save(tmp_path / "ckpt")
    first.save(tmp_path / "ckpt")  # overwriting a checkpoint replaces it whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temporary left behind

    resumed = local_learner(seed=123)  # other weights, fresh optimizer: all must be restored
    resumed.load(tmp_path / "ckpt")
    assert resumed.global_step == 2
    train_step(resumed, 2)
    assert_same(resumed.full_state_dict(), uninterrupted.full_state_dict(), exact=True)


def test_local_learner_full_state_dict_is_a_detached_cpu_copy() -> None:
    learner = local_learner()
    weights = learner.full_state_dict()
    # Tied embeddings appear once, under the parameter's first name.
    assert "model.embed_tokens.weight" in weights and "lm_head.weight" not in weights
    assert set(weights) == {name for name, _ in learner.model.named_parameters()}
    weights["model.embed_tokens.weight"].zero_()
    assert learner.model.get_input_embeddings().weight.abs().sum() > 0


def test_local_learner_without_clipping_still_reports_the_norm() -> None:
    learner = LocalLearner(tiny_model(), lr=LR, max_grad_norm=None)
    stats = train_step(learner, 0)
    assert stats["grad_norm"] > MAX_GRAD_NORM and stats["lr"] == LR


def test_make_learner_names_the_choices() -> None:
    assert isinstance(make_learner("local", tiny_model(), lr=LR), LocalLearner)
    assert isinstance(make_learner("local", tiny_model()), Learner)
    with pytest.raises(ValueError, match="choose one of local, deepspeed"):
        make_learner("fsdp", tiny_model())
    with pytest.raises(ValueError, match="lr must be"):
        LocalLearner(tiny_model(), lr=0.0)


def test_load_without_checkpoint_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no LocalLearner checkpoint"):
        local_learner().load(tmp_path)


# --------------------------------------------------------------------------------------------
# The DeepSpeed config


def test_deepspeed_config_is_the_papers_recipe() -> None:
    config = deepspeed_config(lr=1e-6, bf16=True, max_grad_norm=1.0)
    assert config["zero_optimization"]["stage"] == 3
    assert config["optimizer"] == {
        "type": "AdamW",
        "params": {
            "lr": 1e-6,
            "betas": [0.9, 0.999],
            "eps": 1e-8,
            "weight_decay": 0.0,
            "torch_adam": True,
        },
    }
    assert "scheduler" not in config  # constant learning rate
    assert config["gradient_clipping"] == 1.0
    assert config["bf16"] == {"enabled": True}
    assert config["train_micro_batch_size_per_gpu"] == 1
    assert config["managed_gradient_accumulation"] is False
    off = deepspeed_config(lr=1e-6, bf16=False, max_grad_norm=None, offload=True)
    assert off["gradient_clipping"] == 0.0 and off["bf16"] == {"enabled": False}
    assert off["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert "torch_adam" not in off["optimizer"]["params"]
    with pytest.raises(ValueError, match="zero_stage"):
        deepspeed_config(lr=1e-6, bf16=False, zero_stage=4)


# --------------------------------------------------------------------------------------------
# The distributed environment


SLURM_RANK_5 = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "16",
    "SLURM_LOCALID": "5",
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[01-08]",
    "SLURM_STEP_NODELIST": "gpu[03-04]",
}


def test_distributed_env_reads_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in SLURM_RANK_5.items():
        monkeypatch.setenv(name, value)
    asked: list[str] = []

    def hostnames(nodelist: str) -> list[str]:
        asked.append(nodelist)
        return {"gpu[03-04]": ["gpu03", "gpu04"], "gpu[01-08]": ["gpu01"]}[nodelist]

    where = distributed_env(hostnames=hostnames)
    assert (where.rank, where.world_size, where.local_rank) == (5, 16, 5)
    # The step's first node (the training step may not include the job's first node).
    assert where.master_addr == "gpu03" and asked == ["gpu[03-04]"]
    assert where.master_port == 29500 + 4242 and where.launcher == "slurm"

    monkeypatch.delenv("SLURM_STEP_NODELIST")
    assert distributed_env(hostnames=hostnames).master_addr == "gpu01"
    monkeypatch.setenv("MASTER_ADDR", "head")
    monkeypatch.setenv("MASTER_PORT", "12345")
    where = distributed_env(hostnames=hostnames)
    assert (where.master_addr, where.master_port) == ("head", 12345)
    assert asked == ["gpu[03-04]", "gpu[01-08]"]  # not asked again once MASTER_ADDR is set


def test_distributed_env_prefers_torchrun_and_checks_values() -> None:
    torchrun = {**SLURM_RANK_5, "RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1"}
    torchrun["MASTER_ADDR"] = "gpu03"
    where = distributed_env(torchrun, hostnames=lambda _: pytest.fail("must not expand"))
    assert (where.rank, where.world_size, where.local_rank, where.launcher) == (
        9,
        16,
        1,
        "torchrun",
    )
    assert distributed_env({}).launcher == "single"
    with pytest.raises(ValueError, match="SLURM_NTASKS='x' is not an integer"):
        distributed_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "x"})
    with pytest.raises(ValueError, match="rank 4, world size 2"):
        distributed_env({"RANK": "4", "WORLD_SIZE": "2", "MASTER_ADDR": "h"})
    with pytest.raises(ValueError, match="no MASTER_ADDR"):
        distributed_env({"RANK": "0", "WORLD_SIZE": "2"})


def test_init_distributed_joins_a_one_process_slurm_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this test process")
    environ = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_LOCALID": "0",
        "SLURM_JOB_NODELIST": "node0",
        "MASTER_PORT": str(free_port()),
    }
    try:
        where = init_distributed(environ, hostnames=lambda _: ["127.0.0.1"], backend="gloo")
        assert dist.is_initialized() and dist.get_world_size() == 1
        assert (where.rank, where.master_addr) == (0, "127.0.0.1")
        # The standard variables are exported for DeepSpeed and other libraries.
        assert environ["RANK"] == "0" and environ["WORLD_SIZE"] == "1"
        assert environ["MASTER_ADDR"] == "127.0.0.1"
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# --------------------------------------------------------------------------------------------
# DeepSpeed ZeRO-3, two CPU processes


def run_worker(out: Path) -> None:
    """One rank: step, gather, save, step; then a fresh engine loads and repeats the step."""
    torch.set_num_threads(1)
    import deepspeed.ops

    from tmax.rl.learners.learner import DeepSpeedLearner

    # DeepSpeed's CPU communication backend JIT-compiles a shared-memory all-reduce (about
    # 2 minutes with g++ on a fresh machine) that only tensor-parallel inference uses; ZeRO
    # training talks through gloo. The probe result is a cached, mutable dict by design.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    env = init_distributed()  # gloo: RANK/WORLD_SIZE/MASTER_* from the parent
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def make(seed: int) -> DeepSpeedLearner:
        return DeepSpeedLearner(
            tiny_model(seed),
            lr=LR,
            zero_stage=3,
            bf16=False,
            max_grad_norm=MAX_GRAD_NORM,
            weight_decay=0.01,
            # Two micro-batches per rank; with managed accumulation off this is bookkeeping
            # only: neither the loss nor the step boundary depends on it.
            gradient_accumulation_steps=2,
        )

    learner = make(0)
    # Partitioned: this rank holds only its shard of each parameter.
    shard = sum(p.ds_tensor.numel() for p in learner.engine.module.parameters())
    full = sum(p.ds_numel for p in learner.engine.module.parameters())
    timings["init_s"] = time.perf_counter() - started
    stats = [train_step(learner, 0, rank=env.rank, world_size=env.world_size)]
    after_one = learner.full_state_dict()
    learner.save(out / "ckpt")
    stats.append(train_step(learner, 1, rank=env.rank, world_size=env.world_size))
    after_two = learner.full_state_dict()

    # Loading a checkpoint partitioned: no rank ever materialises a whole parameter.
    from tmax.rl.learners.learner import load_partitioned

    loaded, keep = load_partitioned(out / "model", lr=LR, bf16=False)
    local_elements = sum(p.numel() for p in loaded.parameters())
    loaded_learner = DeepSpeedLearner(loaded, lr=LR, zero_stage=3, bf16=False)
    del keep
    loaded_weights = loaded_learner.full_state_dict()

    resumed = make(123)
    resumed.load(out / "ckpt")
    resumed_step = resumed.global_step
    train_step(resumed, 1, rank=env.rank, world_size=env.world_size)
    resumed_two = resumed.full_state_dict()
    timings["total_s"] = time.perf_counter() - started
    if env.rank == 0:
        torch.save(
            {"after_one": after_one, "after_two": after_two, "resumed_two": resumed_two,
             "loaded": loaded_weights},
            out / "weights.pt",
        )  # fmt: skip
    else:
        assert after_one == {} and after_two == {}
    (out / f"rank{env.rank}.json").write_text(
        json.dumps(
            {
                "stats": stats,
                "shard": shard,
                "full": full,
                "resumed_step": resumed_step,
                "loaded_local_elements": local_elements,
                "timings": timings,
            }
        )
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (./setup.sh installs it)")
def test_deepspeed_zero3_matches_local_learner_on_two_cpu_ranks(tmp_path: Path) -> None:
    saved = tiny_model(7)
    saved.save_pretrained(tmp_path / "model")
    run_ranks(__file__, tmp_path, WORLD_SIZE, WORKER_TIMEOUT_S)

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    assert all(r["shard"] < r["full"] for r in ranks)  # ZeRO-3 really partitioned the weights
    assert all(r["resumed_step"] == 1 for r in ranks)
    weights: dict[str, Any] = torch.load(tmp_path / "weights.pt", weights_only=True)
    assert (tmp_path / "ckpt" / DEEPSPEED_TAG).is_dir()

    torch.set_num_threads(1)
    local = local_learner()
    local_stats = [train_step(local, 0)]
    assert_same(weights["after_one"], local.full_state_dict(), exact=False)
    local_stats.append(train_step(local, 1))
    assert_same(weights["after_two"], local.full_state_dict(), exact=False)
    # Clipped AdamW barely depends on the gradient's scale, so the weights alone would not
    # catch a wrong normalisation (DeepSpeed's averaging over ranks); the norm does.
    for ds, ref in zip(ranks[0]["stats"], local_stats, strict=True):
        assert ds["lr"] == pytest.approx(ref["lr"])
        assert ds["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-5)
    # Resuming from the ZeRO-3 checkpoint repeats the uninterrupted step exactly.
    assert_same(weights["resumed_two"], weights["after_two"], exact=True)
    # load_partitioned: the ranks held only partitions (a ZeRO-3 parameter outside a
    # gather has no local elements), and together they hold exactly the saved weights.
    assert [r["loaded_local_elements"] for r in ranks] == [0, 0]
    expected = dict(saved.named_parameters())
    assert weights["loaded"].keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(weights["loaded"][name], tensor.detach()), name


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one rank of the DeepSpeed learner test")
    parser.add_argument("--worker", type=Path, required=True, help="output folder")
    run_worker(parser.parse_args().worker)
    from tmax.rl.launch.ranks import leave_without_teardown

    leave_without_teardown(0)  # as a real rank ends: gloo's teardown can abort
