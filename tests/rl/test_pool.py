"""The tasks RL works on (tmax.rl.episodes.pool): the informative choice takes the tasks where
the starting policy's groups are most likely to disagree."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from tmax.rl.episodes import pool
from tmax.rl.episodes.pool import choose_pool, expert_probabilities, informative_share


def test_informative_share_of_a_group() -> None:
    assert informative_share(0.0, 4) == 0.0
    assert informative_share(1.0, 4) == 0.0
    assert informative_share(0.5, 4) == pytest.approx(1 - 2 / 16)
    # a coin that rarely lands still gives a mixed group of 8 now and then
    assert informative_share(0.1, 8) == pytest.approx(1 - 0.1**8 - 0.9**8)
    assert informative_share(0.5, 4) > informative_share(0.3, 4) > informative_share(0.05, 4)


@pytest.mark.usefixtures("one_thread")
def test_expert_probability_is_the_sampling_probability_of_the_masked_tokens(
    model_dir: Path,
) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids, mask = [11, 12, 13, 14, 15], [0, 0, 1, 0, 1]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    for temperature in (1.0, 0.5):
        probs = torch.softmax(logits / temperature, dim=-1)
        expected = float(probs[1, 13] * probs[3, 15])  # token t is predicted at t - 1
        # alone, and batched with examples that share its prefix (run once)
        other = ([11, 12, 13, 16], [0, 0, 1, 1])
        for batch in ([(ids, mask)], [(ids, mask), other]):
            got = expert_probabilities(model, batch, temperature)
            assert got[0] == pytest.approx(expected, rel=1e-4)
        assert got[1] == pytest.approx(float(probs[1, 13] * probs[2, 16]), rel=1e-4)


RL = {"max_tool_calls": 3, "temperature": 1.0, "group_size": 4}


def solved_rows(
    monkeypatch: pytest.MonkeyPatch, tokenizer: Any, chance: dict[str, float],
    solutions: dict[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    """A training row per task name with its reference solution, and the expert
    probabilities stubbed to ``chance`` (read back from each example's instruction)."""

    def fake(model: Any, examples: Any, temperature: float) -> list[float]:
        texts = [tokenizer.decode(ids) for ids, _ in examples]
        return [next(p for name, p in chance.items() if f"task {name}." in t) for t in texts]

    monkeypatch.setattr(pool, "expert_probabilities", fake)
    return [
        {"task_id": name, "instruction": f"Do task {name}.",
         "files": [{"path": "solution/solve.sh", "data": f"{solutions[name]}\n".encode()}]}
        for name in chance
    ]  # fmt: skip


def test_the_pool_is_the_tasks_nearest_an_even_chance(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path, tokenizer: Any
) -> None:
    """Given each task's estimate, the pool is those whose groups disagree most often
    (not the easiest, not the hardest); a task without a reference solution comes last."""
    chance = {"sure": 0.99, "even": 0.5, "hopeless": 1e-6, "often": 0.7, "rarely": 0.2}
    rows = solved_rows(monkeypatch, tokenizer, chance, {name: f"echo {name}" for name in chance})
    rows.append({"task_id": "unsolved", "instruction": "Do task unsolved.", "files": []})
    chosen, ranked = choose_pool(None, tokenizer, rows, rl=RL, limit=3)  # type: ignore[arg-type]
    assert [r["task_id"] for r in chosen] == ["even", "often", "rarely"]
    assert [e["task_id"] for e in ranked] == ["even", "often", "rarely", "sure", "hopeless",
                                              "unsolved"]  # fmt: skip
    assert ranked[0]["expert_probability"] == 0.5
    assert ranked[0]["informative_share"] == pytest.approx(informative_share(0.5, 4))
    assert ranked[-1]["expert_probability"] is None
    assert not math.isnan(ranked[-2]["informative_share"])


def test_the_pool_takes_one_task_per_reference_solution(
    monkeypatch: pytest.MonkeyPatch, tokenizer: Any
) -> None:
    """Tasks with the same reference solution (they differ in persona only) are one task
    to the policy: the pool takes the best of them and moves on; the duplicates fill the
    pool only when too few solutions are distinct."""
    chance = {"a1": 0.5, "a2": 0.5, "a3": 0.49, "b1": 0.45, "c1": 0.1, "b2": 0.3}
    solution = {"a1": "cp x y", "a2": "cp x y", "a3": "cp x y\n", "b1": "sort x", "b2": "sort x",
                "c1": "wc -l x"}  # fmt: skip
    rows = solved_rows(monkeypatch, tokenizer, chance, solution)
    chosen, ranked = choose_pool(None, tokenizer, rows, rl=RL, limit=3)  # type: ignore[arg-type]
    assert [r["task_id"] for r in chosen] == ["a1", "b1", "c1"]
    assert len(ranked) == len(rows)  # every estimate is kept
    chosen, _ = choose_pool(None, tokenizer, rows, rl=RL, limit=5)  # type: ignore[arg-type]
    assert [r["task_id"] for r in chosen] == ["a1", "b1", "c1", "a2", "a3"]


def test_the_run_records_which_tasks_it_chose(
    monkeypatch: pytest.MonkeyPatch, tokenizer: Any
) -> None:
    """curve.json's ``pool`` names the chosen tasks: with one task per solution they are
    not the first entries of the ranking (a2 and a3 rank above b1 but repeat a1)."""
    from tmax.rl import stage

    chance = {"a1": 0.5, "a2": 0.5, "a3": 0.49, "b1": 0.45, "c1": 0.1}
    solution = {"a1": "cp x y", "a2": "cp x y", "a3": "cp x y", "b1": "sort x", "c1": "wc -l x"}
    rows = solved_rows(monkeypatch, tokenizer, chance, solution)
    monkeypatch.setattr(stage, "training_rows", lambda *args, **kwargs: rows)
    monkeypatch.setattr(stage, "_load", lambda model_dir: (None, tokenizer))
    rl = {**RL, "max_train_tasks": 3, "train_tasks": "informative"}
    chosen, recorded = stage.rl_pool(Path("unused"), Path("unused"), rl=rl,
                                     heldout_fraction=0.1, seed=1)  # fmt: skip
    assert recorded is not None
    assert recorded["chosen"] == [row["task_id"] for row in chosen] == ["a1", "b1", "c1"]
    assert [e["task_id"] for e in recorded["tasks"]][:3] == ["a1", "a2", "a3"]
