"""Typed settings: a validated config section as one frozen object, built once.

A stage is handed its section's object and reads attributes, so that one search for
``.learning_rate`` finds every use of ``rl.learning_rate``. The defaults are the config
schema's, read from it (:func:`tmax.config.schema_default`): written once. A value is
kept as the validated config holds it (the validator already gave it the schema's
type), so an object written back (:meth:`RLSection.asdict`) is the section byte for byte.

The module imports nothing of tmax but the config, so that any module can take its
section's object without an import circle. What is built from a section lives beside
what it builds: ``RLSettings.from_config(rl, seed)`` (tmax.rl.trainer, the recipe part
the checkpoint marker hashes), ``HarnessSettings.for_rl(rl)`` (tmax.harness, the
episode budgets of RL rollouts)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias, TypeVar

from tmax.config import ConfigError, schema_default

S = TypeVar("S", bound="Section")


def _default(*path: str) -> Any:
    """A field whose default is the schema's default of ``path`` (copied per object)."""
    value = schema_default(*path)
    if isinstance(value, list):
        return field(default=tuple(value))
    if isinstance(value, dict):
        return field(default_factory=lambda: dict(value))
    return field(default=value)


@dataclass(frozen=True)
class Section:
    """What every section object shares: built from a mapping of its keys."""

    PATH: ClassVar[tuple[str, ...]] = ()
    """Where the section sits in the config (for messages)."""

    @classmethod
    def of(cls: type[S], values: S | Mapping[str, Any]) -> S:
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

    NESTED: ClassVar[Mapping[str, type[Section]]] = {}
    """The keys that hold a section of their own, and its class."""
    UNSET: ClassVar[frozenset[str]] = frozenset()
    """Keys the schema gives no default: None while the config leaves them out, and
    then left out again by :meth:`asdict`."""

    @classmethod
    def _convert(cls, key: str, value: Any) -> Any:
        if key in cls.NESTED:
            return cls.NESTED[key].of(value)
        return tuple(value) if isinstance(value, list) else value

    def asdict(self) -> dict[str, Any]:
        """The section as the validated config holds it: lists, dicts, nested sections,
        keys in order (:func:`tmax.config.validate_config` sorts them)."""
        out = {}
        for f in sorted(dataclasses.fields(self), key=lambda f: f.name):
            value = getattr(self, f.name)
            if value is None and f.name in self.UNSET:
                continue
            if isinstance(value, Section):
                value = value.asdict()
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out


@dataclass(frozen=True)
class SFTSection(Section):
    """``rl.sft``: the SFT warm-up on reference solutions (and the control arm's rate and
    batch size)."""

    steps: int = _default("rl", "sft", "steps")
    learning_rate: float = _default("rl", "sft", "learning_rate")
    batch_size: int = _default("rl", "sft", "batch_size")
    max_tasks: int | None = _default("rl", "sft", "max_tasks")

    PATH = ("rl", "sft")


@dataclass(frozen=True)
class RLSection(Section):
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
    NESTED: ClassVar[Mapping[str, type[Section]]] = {"sft": SFTSection}


# --- the other sections ------------------------------------------------------------------


@dataclass(frozen=True)
class SkillsSection(Section):
    """``sampler.primitive_skills``: how many primitive skills a spec draws, and from
    where."""

    min: int = _default("sampler", "primitive_skills", "min")
    max: int = _default("sampler", "primitive_skills", "max")
    scope: str = _default("sampler", "primitive_skills", "scope")

    PATH = ("sampler", "primitive_skills")


@dataclass(frozen=True)
class SamplerSection(Section):
    """``sampler``: the 9-axis spec sampler (resolved against a taxonomy by
    :meth:`tmax.taxonomy.sampler.SamplerSettings.from_config`). A weight ``None`` is the
    axis's own default (uniform, or the taxonomy's)."""

    n_specs: int  # required: the schema gives it no default
    shard_size: int = _default("sampler", "shard_size")
    primitive_skills: SkillsSection = field(default_factory=SkillsSection)
    domain_weights: Mapping[str, float] | None = _default("sampler", "domain_weights")
    language_weights: Mapping[str, float] | None = _default("sampler", "language_weights")
    task_complexity_weights: Mapping[str, float] | None = _default(
        "sampler", "task_complexity_weights"
    )
    command_complexity_weights: Mapping[str, float] | None = _default(
        "sampler", "command_complexity_weights"
    )
    fixture_mix: Mapping[str, float] | None = _default("sampler", "fixture_mix")
    verifier_mix: Mapping[str, float] | None = _default("sampler", "verifier_mix")

    PATH = ("sampler",)
    NESTED: ClassVar[Mapping[str, type[Section]]] = {"primitive_skills": SkillsSection}


@dataclass(frozen=True)
class LLMSection(Section):
    """``generation.llm``: the LLM generator's request and accounting settings."""

    max_retries: int = _default("generation", "llm", "max_retries")
    backoff_sec: float = _default("generation", "llm", "backoff_sec")
    temperature: float = _default("generation", "llm", "temperature")
    max_tokens: int = _default("generation", "llm", "max_tokens")
    cost_per_mtok_input: float = _default("generation", "llm", "cost_per_mtok_input")
    cost_per_mtok_output: float = _default("generation", "llm", "cost_per_mtok_output")
    cache_dir: str = _default("generation", "llm", "cache_dir")

    PATH = ("generation", "llm")


@dataclass(frozen=True)
class GenerationSection(Section):
    """``generation``: which backend writes the tasks (procedural or llm) and its
    settings."""

    backend: str = _default("generation", "backend")
    tier: str = _default("generation", "tier")
    endpoint: Mapping[str, Any] | None = None
    """The llm backend's endpoint (``$defs/endpoint``); None when the config gives none."""
    max_build_retries: int = _default("generation", "max_build_retries")
    llm: LLMSection = field(default_factory=LLMSection)

    PATH = ("generation",)
    UNSET = frozenset({"endpoint"})
    NESTED: ClassVar[Mapping[str, type[Section]]] = {"llm": LLMSection}


@dataclass(frozen=True)
class SandboxSection(Section):
    """``sandbox``: the backend every task runs in, how many at once, and its limits."""

    backend: str = _default("sandbox", "backend")
    max_concurrency: int = _default("sandbox", "max_concurrency")
    limits: str = _default("sandbox", "limits")

    PATH = ("sandbox",)


@dataclass(frozen=True)
class DecontaminationSection(Section):
    """``decontamination``: the n-gram checks against the benchmarks, and what they
    remove."""

    ngram_sizes: tuple[int, ...] = _default("decontamination", "ngram_sizes")
    benchmarks: tuple[str, ...] = _default("decontamination", "benchmarks")
    on_missing_benchmark: str = _default("decontamination", "on_missing_benchmark")
    boilerplate_min_items: int = _default("decontamination", "boilerplate_min_items")
    remove_rule: str = _default("decontamination", "remove_rule")
    remove_threshold: float = _default("decontamination", "remove_threshold")
    remove_ngram: int = _default("decontamination", "remove_ngram")
    self_test_leaks: int = _default("decontamination", "self_test_leaks")

    PATH = ("decontamination",)


@dataclass(frozen=True)
class EvaluationSection(Section):
    """``evaluation``: the grid (harnesses × benchmarks × variants × runs), the episode
    budgets and sampling, and where the tasks come from."""

    harnesses: tuple[str, ...] = _default("evaluation", "harnesses")
    benchmarks: tuple[str, ...] = _default("evaluation", "benchmarks")
    variants: tuple[str, ...] = _default("evaluation", "variants")
    runs: int = _default("evaluation", "runs")
    harness_runs: Mapping[str, int] = _default("evaluation", "harness_runs")
    # sampling
    temperature: float = _default("evaluation", "temperature")
    top_p: float = _default("evaluation", "top_p")
    seed: int | None = _default("evaluation", "seed")
    # episodes
    interleaved_thinking: bool = _default("evaluation", "interleaved_thinking")
    max_tool_calls: int = _default("evaluation", "max_tool_calls")
    max_turns: int | None = _default("evaluation", "max_turns")
    max_turn_tokens: int = _default("evaluation", "max_turn_tokens")
    max_total_tokens: int = _default("evaluation", "max_total_tokens")
    max_format_errors: int = _default("evaluation", "max_format_errors")
    command_timeout_sec: float = _default("evaluation", "command_timeout_sec")
    network: str = _default("evaluation", "network")
    prompts: str = _default("evaluation", "prompts")
    # tasks
    max_tasks: int | None = _default("evaluation", "max_tasks")
    harness_max_tasks: Mapping[str, int] = _default("evaluation", "harness_max_tasks")
    heldout_fraction: float = _default("evaluation", "heldout_fraction")
    sources: Mapping[str, Any] = _default("evaluation", "sources")
    # serving
    concurrency: int | None = _default("evaluation", "concurrency")
    engine: str = _default("evaluation", "engine")

    PATH = ("evaluation",)


@dataclass(frozen=True)
class DatasetsSection(Section):
    """``datasets``: the prior datasets converted for comparison, and the default
    sample of each."""

    sample: int | None = _default("datasets", "sample")
    sources: tuple[Mapping[str, Any], ...] = _default("datasets", "sources")

    PATH = ("datasets",)


@dataclass(frozen=True)
class LabellingSection(Section):
    """``labelling``: the model that labels prior datasets' tasks on the taxonomy
    (off while ``base_url`` is None)."""

    base_url: str | None = _default("labelling", "base_url")
    model: str | None = _default("labelling", "model")
    api_key_env: str | None = _default("labelling", "api_key_env")
    temperature: float = _default("labelling", "temperature")
    max_tokens: int = _default("labelling", "max_tokens")
    concurrency: int = _default("labelling", "concurrency")
    max_retries: int = _default("labelling", "max_retries")
    request_retries: int = _default("labelling", "request_retries")
    timeout_sec: float = _default("labelling", "timeout_sec")
    cache_dir: str = _default("labelling", "cache_dir")

    PATH = ("labelling",)


DIFFICULTY_BUDGETS = (
    "temperature",
    "interleaved_thinking",
    "max_tool_calls",
    "max_turn_tokens",
    "max_total_tokens",
    "max_format_errors",
    "command_timeout_sec",
)
"""The episode budgets ``difficulty`` may set for itself (else evaluation's)."""


@dataclass(frozen=True)
class DifficultySection(Section):
    """``difficulty``: the reference model, harness and runs that measure a prior
    dataset's difficulty. A budget left None is evaluation's (the schema gives these
    no default on purpose)."""

    model: str | None = _default("difficulty", "model")
    endpoint: Mapping[str, Any] | None = None
    harness: str = _default("difficulty", "harness")
    runs: int = _default("difficulty", "runs")
    sample: int | None = _default("difficulty", "sample")
    concurrency: int | None = _default("difficulty", "concurrency")
    temperature: float | None = None
    interleaved_thinking: bool | None = None
    max_tool_calls: int | None = None
    max_turn_tokens: int | None = None
    max_total_tokens: int | None = None
    max_format_errors: int | None = None
    command_timeout_sec: float | None = None

    PATH = ("difficulty",)
    UNSET = frozenset({"endpoint", *DIFFICULTY_BUDGETS})


@dataclass(frozen=True)
class ReportSection(Section):
    """``report``: the tables' formats, the reference model and the statistics."""

    formats: tuple[str, ...] = _default("report", "formats")
    reference_model: str | None = _default("report", "reference_model")
    statistics: str = _default("report", "statistics")

    PATH = ("report",)


SECTIONS: Mapping[str, type[Section]] = {
    "sampler": SamplerSection,
    "generation": GenerationSection,
    "sandbox": SandboxSection,
    "decontamination": DecontaminationSection,
    "evaluation": EvaluationSection,
    "datasets": DatasetsSection,
    "labelling": LabellingSection,
    "difficulty": DifficultySection,
    "report": ReportSection,
}
"""The top-level sections typed here, by name (``rl`` is :class:`RLSection`;
``hardware`` and ``tracking`` are sections beside the code that owns them:
:class:`tmax.rl.launch.plan.Hardware`, :class:`tmax.tracking.TrackingSettings`)."""


RLValues: TypeAlias = "RLSection | Mapping[str, Any]"
"""What a stage accepts as its rl settings: the object, or a mapping of rl keys that
:meth:`RLSection.of` completes with the schema's defaults."""
