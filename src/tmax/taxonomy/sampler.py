"""Draw task specs over the paper's 9 axes (paper §3.1).

Per spec: the domain uniformly (or by ``domain_weights``); a skill type uniformly
within it; 3–5 primitive skills from the whole domain; a persona of the domain; a
language by weight; task and command complexity uniformly (weights configurable);
fixture and verifier kind from a configurable mix.

Spec ``i`` is drawn from its own generator seeded by ``(seed, i)``, so specs are
independent of each other: shards can be drawn separately, and growing ``n_specs``
leaves the earlier specs unchanged.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tmax.config import schema_default
from tmax.io import atomic_path
from tmax.settings import SamplerSection
from tmax.taxonomy.model import Taxonomy

AXES = (
    "domain",
    "skill_type",
    "primitive_skills",
    "persona",
    "language",
    "task_complexity",
    "command_complexity",
    "fixture_kind",
    "verifier_kind",
)

SPEC_SCHEMA = pa.schema(
    [
        pa.field("spec_id", pa.string(), nullable=False),
        pa.field("index", pa.int64(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("skill_type", pa.string(), nullable=False),
        pa.field("primitive_skills", pa.list_(pa.string()), nullable=False),
        pa.field("persona", pa.string(), nullable=False),
        pa.field("language", pa.string(), nullable=False),
        pa.field("task_complexity", pa.string(), nullable=False),
        pa.field("command_complexity", pa.string(), nullable=False),
        pa.field("fixture_kind", pa.string(), nullable=False),
        pa.field("verifier_kind", pa.string(), nullable=False),
    ]
)


class SamplerError(ValueError):
    """Sampler settings that do not fit the taxonomy (unknown category, empty pool)."""


@dataclass(frozen=True)
class TaskSpec:
    """One point in the 9-axis space; ``spec_id`` is derived from its content."""

    spec_id: str
    index: int
    domain: str
    skill_type: str
    primitive_skills: tuple[str, ...]
    persona: str
    language: str
    task_complexity: str
    command_complexity: str
    fixture_kind: str
    verifier_kind: str

    def axes(self) -> dict[str, Any]:
        """The 9 axes as a JSON-ready dict (what ``tmax.json`` records)."""
        data = asdict(self)
        return {
            axis: list(data[axis]) if axis == "primitive_skills" else data[axis] for axis in AXES
        }


def spec_id(index: int, axes: Mapping[str, Any]) -> str:
    """Stable id: a hash of the spec's position and its axis values."""
    blob = json.dumps({"index": index, **axes}, sort_keys=True, separators=(",", ":"))
    return "spec-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class SamplerSettings:
    """The ``sampler`` section of the config, resolved against a taxonomy."""

    seed: int
    n_specs: int
    min_skills: int = schema_default("sampler", "primitive_skills", "min")
    max_skills: int = schema_default("sampler", "primitive_skills", "max")
    skill_scope: str = schema_default("sampler", "primitive_skills", "scope")
    domain_weights: Mapping[str, float] = field(default_factory=dict)
    language_weights: Mapping[str, float] = field(default_factory=dict)
    task_complexity_weights: Mapping[str, float] = field(default_factory=dict)
    command_complexity_weights: Mapping[str, float] = field(default_factory=dict)
    fixture_weights: Mapping[str, float] = field(default_factory=dict)
    verifier_weights: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], taxonomy: Taxonomy) -> SamplerSettings:
        """Resolve weights (``null`` → uniform or the taxonomy's) and check them."""
        sampler = SamplerSection.of(config["sampler"])
        skills = sampler.primitive_skills

        def weights(key: str, axis: str, default: Mapping[str, float] | None = None) -> dict:
            given = getattr(sampler, key)
            allowed = taxonomy.categories(axis)
            if given is None:
                return dict(default) if default else dict.fromkeys(allowed, 1.0)
            unknown = sorted(set(given) - set(allowed))
            if unknown:
                raise SamplerError(
                    f"config 'sampler.{key}' names unknown {axis} value(s) {unknown}; "
                    f"allowed: {', '.join(allowed)}"
                )
            resolved = {name: float(given.get(name, 0.0)) for name in allowed}
            if sum(resolved.values()) <= 0:
                raise SamplerError(f"config 'sampler.{key}': weights must sum to more than 0")
            return resolved

        settings = cls(
            seed=int(config["seed"]),
            n_specs=int(sampler.n_specs),
            min_skills=int(skills.min),
            max_skills=int(skills.max),
            skill_scope=str(skills.scope),
            domain_weights=weights("domain_weights", "domain"),
            language_weights=weights("language_weights", "language", taxonomy.language_weights),
            task_complexity_weights=weights("task_complexity_weights", "task_complexity"),
            command_complexity_weights=weights("command_complexity_weights", "command_complexity"),
            fixture_weights=weights("fixture_mix", "fixture_kind"),
            verifier_weights=weights("verifier_mix", "verifier_kind"),
        )
        settings.check(taxonomy)
        return settings

    def check(self, taxonomy: Taxonomy) -> None:
        """Fail early if some domain cannot supply ``max_skills`` distinct skills."""
        for domain in taxonomy.domains.values():
            if self.domain_weights.get(domain.name, 1.0) == 0:
                continue
            pools = (
                [domain.primitive_skills]
                if self.skill_scope == "domain"
                else [st.primitive_skills for st in domain.skill_types.values()]
            )
            smallest = min(len(pool) for pool in pools)
            if smallest < self.max_skills:
                raise SamplerError(
                    f"domain '{domain.name}' has a primitive-skill pool of {smallest} "
                    f"(scope {self.skill_scope}) but 'sampler.primitive_skills.max' is "
                    f"{self.max_skills}"
                )


def _weighted(rng: random.Random, weights: Mapping[str, float]) -> str:
    names = list(weights)
    return rng.choices(names, weights=[weights[n] for n in names], k=1)[0]


def sample_spec(taxonomy: Taxonomy, settings: SamplerSettings, index: int) -> TaskSpec:
    """Draw spec number ``index``; depends only on (taxonomy, settings, index)."""
    rng = random.Random(f"tmax-spec/{settings.seed}/{index}")
    domain = taxonomy.domains[_weighted(rng, settings.domain_weights)]
    skill_type = rng.choice(list(domain.skill_types.values()))
    pool = (
        domain.primitive_skills if settings.skill_scope == "domain" else skill_type.primitive_skills
    )
    n_skills = rng.randint(settings.min_skills, settings.max_skills)
    axes: dict[str, Any] = {
        "domain": domain.name,
        "skill_type": skill_type.label,
        "primitive_skills": rng.sample(list(pool), n_skills),
        "persona": rng.choice(domain.personas),
        "language": _weighted(rng, settings.language_weights),
        "task_complexity": _weighted(rng, settings.task_complexity_weights),
        "command_complexity": _weighted(rng, settings.command_complexity_weights),
        "fixture_kind": _weighted(rng, settings.fixture_weights),
        "verifier_kind": _weighted(rng, settings.verifier_weights),
    }
    return TaskSpec(
        spec_id=spec_id(index, axes),
        index=index,
        **{**axes, "primitive_skills": tuple(axes["primitive_skills"])},
    )


def sample_specs(
    taxonomy: Taxonomy, settings: SamplerSettings, start: int = 0, stop: int | None = None
) -> list[TaskSpec]:
    """Draw specs ``start`` … ``stop - 1`` (default: all ``n_specs``)."""
    stop = settings.n_specs if stop is None else min(stop, settings.n_specs)
    return [sample_spec(taxonomy, settings, i) for i in range(start, stop)]


def shard_bounds(n_specs: int, shard_size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each shard; the last one may be short."""
    return [(s, min(s + shard_size, n_specs)) for s in range(0, n_specs, shard_size)]


def specs_table(specs: Sequence[TaskSpec]) -> pa.Table:
    columns = {name: [getattr(spec, name) for spec in specs] for name in SPEC_SCHEMA.names}
    columns["primitive_skills"] = [list(skills) for skills in columns["primitive_skills"]]
    return pa.table(columns, schema=SPEC_SCHEMA)


def write_specs(specs: Sequence[TaskSpec] | pa.Table, path: str | Path) -> None:
    """Write specs as Parquet, atomically and with reproducible bytes."""
    table = specs if isinstance(specs, pa.Table) else specs_table(specs)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False)


def read_specs(paths: str | Path | Iterable[str | Path]) -> list[TaskSpec]:
    """Read one or several spec Parquet files, in order."""
    if isinstance(paths, str | Path):
        paths = [paths]
    specs: list[TaskSpec] = []
    for path in paths:
        table = pq.read_table(path, schema=SPEC_SCHEMA)
        for row in table.to_pylist():
            row["primitive_skills"] = tuple(row["primitive_skills"])
            specs.append(TaskSpec(**row))
    return specs


def merge_spec_files(inputs: Sequence[str | Path], output: str | Path) -> int:
    """Concatenate shard files into one Parquet file; returns the number of specs."""
    tables = [pq.read_table(path, schema=SPEC_SCHEMA) for path in inputs]
    merged = pa.concat_tables(tables).combine_chunks() if tables else SPEC_SCHEMA.empty_table()
    indices = merged.column("index").to_pylist()
    if indices != sorted(indices) or len(set(indices)) != len(indices):
        raise SamplerError("spec shards overlap or are out of order; rerun the sampler")
    write_specs(merged, output)
    return merged.num_rows
