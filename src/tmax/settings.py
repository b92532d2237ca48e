"""Typed settings: a validated config section as one frozen object, built once.

A stage is handed its section's object and reads attributes, so that one search for
``.learning_rate`` finds every use of ``rl.learning_rate``. The defaults are the config
schema's, read from it (:func:`tmax.config.schema_default`): written once. A value is
kept as the validated config holds it (the validator already gave it the schema's
type), so an object written back (:meth:`RLSection.asdict`) is the section byte for byte.

``RLSettings`` (tmax.rl.trainer) is the recipe part the checkpoint marker hashes;
:meth:`RLSection.recipe` builds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

from tmax.config import ConfigError, schema_default

if TYPE_CHECKING:
    from tmax.harness import HarnessSettings
    from tmax.rl.trainer import RLSettings

Section = TypeVar("Section", bound="_Settings")


def _default(*path: str) -> Any:
    """A field whose default is the schema's default of ``path`` (copied per object)."""
    value = schema_default(*path)
    if isinstance(value, list):
        return field(default=tuple(value))
    if isinstance(value, dict):
        return field(default_factory=lambda: dict(value))
    return field(default=value)


@dataclass(frozen=True)
class _Settings:
    """What every section object shares: built from a mapping of its keys."""

    PATH: ClassVar[tuple[str, ...]] = ()
    """Where the section sits in the config (for messages)."""

    @classmethod
    def of(cls: type[Section], values: Section | Mapping[str, Any]) -> Section:
        """``values`` as this section's object: the object itself, or a mapping of the
        section's keys (a validated config's section, or some of its keys: the others
        take the schema's defaults). A key the section does not have is an error."""
        if isinstance(values, cls):
            return values
        if not isinstance(values, Mapping):
            raise TypeError(f"{cls.__name__}.of needs a mapping, got {type(values).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            where = ".".join(cls.PATH)
            raise ConfigError([f"'{where}.{key}' is not a setting" for key in unknown])
        return cls(**{key: cls._convert(key, value) for key, value in values.items()})

    @classmethod
    def _convert(cls, key: str, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    def asdict(self) -> dict[str, Any]:
        """The section as the validated config holds it: lists, dicts, nested sections,
        keys in order (:func:`tmax.config.validate_config` sorts them)."""
        out = {}
        for f in sorted(dataclasses.fields(self), key=lambda f: f.name):
            value = getattr(self, f.name)
            if isinstance(value, _Settings):
                value = value.asdict()
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out


@dataclass(frozen=True)
class SFTSection(_Settings):
    """``rl.sft``: the SFT warm-up on reference solutions (and the control arm's rate and
    batch size)."""

    steps: int = _default("rl", "sft", "steps")
    learning_rate: float = _default("rl", "sft", "learning_rate")
    batch_size: int = _default("rl", "sft", "batch_size")
    max_tasks: int | None = _default("rl", "sft", "max_tasks")

    PATH = ("rl", "sft")


@dataclass(frozen=True)
class RLSection(_Settings):
    """A model's ``rl`` section (the top-level one with its ``models[].rl`` overrides:
    :func:`tmax.rl.recipe.model_rl_section`); the schema describes every key."""

    # the recipe (paper Table 13)
    loss: str = _default("rl", "loss")
    dppo_divergence: str = _default("rl", "dppo_divergence")
    dppo_threshold: float = _default("rl", "dppo_threshold")
    clip_low: float = _default("rl", "clip_low")
    clip_high: float = _default("rl", "clip_high")
    group_size: int = _default("rl", "group_size")
    prompts_per_step: int = _default("rl", "prompts_per_step")
    steps: int = _default("rl", "steps")
    learning_rate: float = _default("rl", "learning_rate")
    kl_beta: float = _default("rl", "kl_beta")
    advantage: str = _default("rl", "advantage")
    temperature: float = _default("rl", "temperature")
    async_steps: int = _default("rl", "async_steps")
    zero_std_filter: bool = _default("rl", "zero_std_filter")
    active_sampling: bool = _default("rl", "active_sampling")
    max_sampling_rounds: int = _default("rl", "max_sampling_rounds")
    fp32_lm_head: bool = _default("rl", "fp32_lm_head")
    # episodes
    max_tool_calls: int = _default("rl", "max_tool_calls")
    max_total_tokens: int = _default("rl", "max_total_tokens")
    max_turn_tokens: int = _default("rl", "max_turn_tokens")
    max_format_errors: int = _default("rl", "max_format_errors")
    command_timeout_sec: float = _default("rl", "command_timeout_sec")
    # which tasks
    max_train_tasks: int | None = _default("rl", "max_train_tasks")
    train_tasks: str = _default("rl", "train_tasks")
    # concurrency and memory
    checkpoint_every: int = _default("rl", "checkpoint_every")
    micro_batch_tokens: int = _default("rl", "micro_batch_tokens")
    rollout_workers: int | None = _default("rl", "rollout_workers")
    threads: int = _default("rl", "threads")
    groups_in_flight: int = _default("rl", "groups_in_flight")
    gradient_checkpointing: bool = _default("rl", "gradient_checkpointing")
    packing: bool = _default("rl", "packing")
    sequence_parallel_size: int = _default("rl", "sequence_parallel_size")
    # engines
    engine: str = _default("rl", "engine")
    engine_dtype: str = _default("rl", "engine_dtype")
    engine_options: Mapping[str, Any] = _default("rl", "engine_options")
    engine_untrained_weights: tuple[str, ...] = _default("rl", "engine_untrained_weights")
    weight_transfer: str = _default("rl", "weight_transfer")
    push_bucket_mb: int = _default("rl", "push_bucket_mb")
    # layout
    zero_stage: int = _default("rl", "zero_stage")
    ranks_per_node: int | None = _default("rl", "ranks_per_node")
    training_nodes: int = _default("rl", "training_nodes")
    inference_nodes: int = _default("rl", "inference_nodes")
    engines_per_node: int | None = _default("rl", "engines_per_node")
    engine_tensor_parallel: int = _default("rl", "engine_tensor_parallel")
    # snapshots and their selection
    select_every: int | None = _default("rl", "select_every")
    select_benchmark: str | None = _default("rl", "select_benchmark")
    select_harness: str = _default("rl", "select_harness")
    select_runs: int = _default("rl", "select_runs")
    # faults and time
    step_timeout_sec: float = _default("rl", "step_timeout_sec")
    stop_grace_sec: float = _default("rl", "stop_grace_sec")
    collective_timeout_sec: float = _default("rl", "collective_timeout_sec")
    engine_start_timeout_sec: float = _default("rl", "engine_start_timeout_sec")
    sft: SFTSection = field(default_factory=SFTSection)

    PATH = ("rl",)

    @classmethod
    def _convert(cls, key: str, value: Any) -> Any:
        if key == "sft":
            return SFTSection.of(value)
        return super()._convert(key, value)

    def recipe(self, seed: int) -> RLSettings:
        """The trainer's settings (the part the checkpoint marker hashes)."""
        from tmax.rl.trainer import RLSettings

        return RLSettings.from_config(self.asdict(), seed=seed)

    def harness(self) -> HarnessSettings:
        """The episode budgets of RL rollouts (and of the SFT prompts, which only use
        max_tool_calls: it is written into the task prompt)."""
        from tmax.harness import HarnessSettings

        return HarnessSettings(
            max_tool_calls=self.max_tool_calls,
            max_turn_tokens=self.max_turn_tokens,
            max_total_tokens=self.max_total_tokens,
            temperature=self.temperature,
            interleaved_thinking=True,
            max_format_errors=self.max_format_errors,
            command_timeout_sec=float(self.command_timeout_sec),
        )


RLValues: TypeAlias = "RLSection | Mapping[str, Any]"
"""What a stage accepts as its rl settings: the object, or a mapping of rl keys that
:meth:`RLSection.of` completes with the schema's defaults."""
