"""Which rl settings change a trained model, and a model's resolved rl section.

The workflow reruns a training job when its recipe changes (rules/common.smk,
``rl_recipe_params``), not when only the way it runs does: where its ranks and engines
sit, how many episodes run at once, how long a rank waits, how often it checkpoints.
The job itself reads every setting (:func:`model_rl`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATIONAL_SETTINGS = frozenset(
    {
        # layout: the same math on other nodes
        "training_nodes",
        "inference_nodes",
        "ranks_per_node",
        "engines_per_node",
        "engine_tensor_parallel",
        "zero_stage",
        "weight_transfer",
        "push_bucket_mb",
        # memory: the same gradients, computed in other pieces
        "micro_batch_tokens",
        "gradient_checkpointing",
        "sequence_parallel_size",
        "packing",
        # concurrency
        "threads",
        "rollout_workers",
        "groups_in_flight",
        # faults and time
        "checkpoint_every",
        "step_timeout_sec",
        "stop_grace_sec",
        "collective_timeout_sec",
        "engine_start_timeout_sec",
        # how the snapshots are compared (evaluate_snapshot, select_checkpoint)
        "select_benchmark",
        "select_harness",
        "select_runs",
    }
)
"""rl settings that do not change what a training job writes."""

RESTARTING_SETTINGS = frozenset({"packing"})
"""Operational settings a run's checkpoints do not resume across: a run started with
another value starts over (the model is patched for packed rows when it is built)."""

RESUMABLE_SETTINGS = (OPERATIONAL_SETTINGS - RESTARTING_SETTINGS) | {"steps"}
"""rl settings a run may change and still resume from its checkpoints: every
operational one but :data:`RESTARTING_SETTINGS`, and ``steps`` (more steps continue
the run). The checkpoint marker (``rl.stage``) hashes every other setting."""


def rl_settings(config: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    """A model's rl section: the top-level one with its ``models[].rl`` overrides."""
    return {**config["rl"], **(model.get("rl") or {})}


def config_model(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The ``models`` entry named ``name``."""
    for model in config["models"]:
        if model["name"] == name:
            return model
    known = ", ".join(m["name"] for m in config["models"])
    raise KeyError(f"no model named {name!r} in the config's models ({known})")


def model_rl(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """:func:`rl_settings` of the configured model named ``name``."""
    return rl_settings(config, config_model(config, name))


def rl_recipe(rl: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a resolved rl section that change the trained model."""
    return {key: value for key, value in rl.items() if key not in OPERATIONAL_SETTINGS}
