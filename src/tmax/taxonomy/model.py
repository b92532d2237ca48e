"""The paper's 9 task axes as data (paper §3.1, Table 8).

The taxonomy file lists the domains with their skill types, primitive skills and
personas, plus the six domain-independent axes (language, task complexity, command
complexity, fixture kind, verifier kind). It is data, not code: edit the YAML or
point ``taxonomy:`` in the config at your own file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

PACKAGED_TAXONOMY = "taxonomy/data/taxonomy.yaml"


class TaxonomyError(ValueError):
    """A taxonomy file that is missing keys or has values of the wrong shape."""


@dataclass(frozen=True)
class SkillType:
    key: str
    label: str
    primitive_skills: tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    skill_types: Mapping[str, SkillType]
    personas: tuple[str, ...]

    @property
    def primitive_skills(self) -> tuple[str, ...]:
        """All primitive skills of the domain, in file order (the paper draws from these)."""
        return tuple(s for st in self.skill_types.values() for s in st.primitive_skills)


@dataclass(frozen=True)
class Taxonomy:
    domains: Mapping[str, Domain]
    language_weights: Mapping[str, float]
    language_labels: Mapping[str, str]
    task_complexities: tuple[str, ...]
    command_complexities: tuple[str, ...]
    fixture_kinds: tuple[str, ...]
    verifier_kinds: tuple[str, ...]
    digest: str
    """sha256 of the file's bytes: specs record which taxonomy produced them."""

    @property
    def skill_type_labels(self) -> tuple[str, ...]:
        """Distinct skill-type labels over all domains (the balance score's categories)."""
        seen: dict[str, None] = {}
        for domain in self.domains.values():
            for skill_type in domain.skill_types.values():
                seen.setdefault(skill_type.label)
        return tuple(seen)

    def categories(self, axis: str) -> tuple[str, ...]:
        """The allowed values of one categorical axis, in file order."""
        table: dict[str, tuple[str, ...]] = {
            "domain": tuple(self.domains),
            "skill_type": self.skill_type_labels,
            "language": tuple(self.language_weights),
            "task_complexity": self.task_complexities,
            "command_complexity": self.command_complexities,
            "fixture_kind": self.fixture_kinds,
            "verifier_kind": self.verifier_kinds,
        }
        if axis not in table:
            raise KeyError(f"no categorical axis named {axis!r}; known: {', '.join(table)}")
        return table[axis]


def _require(mapping: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(mapping, Mapping) or key not in mapping:
        raise TaxonomyError(f"{where}: missing key '{key}'")
    value = mapping[key]
    if not isinstance(value, kind):
        expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise TaxonomyError(
            f"{where}.{key}: expected {expected}, got {type(value).__name__} ({value!r})"
        )
    return value


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise TaxonomyError(f"{where}: expected a non-empty list of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise TaxonomyError(f"{where}[{i}]: expected a non-empty string, got {item!r}")
    duplicates = sorted({item for item in value if value.count(item) > 1})
    if duplicates:
        raise TaxonomyError(f"{where}: duplicate entries {duplicates}")
    return tuple(value)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, Mapping) or not value:
        raise TaxonomyError(f"{where}: expected a non-empty mapping of names")
    return tuple(str(name) for name in value)


def parse_taxonomy(data: Any, digest: str, source: str = "taxonomy") -> Taxonomy:
    """Build a :class:`Taxonomy` from parsed YAML, naming the key of any problem."""
    if _require(data, "version", int, source) != 1:
        raise TaxonomyError(f"{source}.version: only version 1 is understood")
    domains: dict[str, Domain] = {}
    for name, body in _require(data, "domains", dict, source).items():
        where = f"{source}.domains.{name}"
        skill_types: dict[str, SkillType] = {}
        for key, st in _require(body, "skill_types", dict, where).items():
            st_where = f"{where}.skill_types.{key}"
            skill_types[key] = SkillType(
                key=key,
                label=_require(st, "label", str, st_where),
                primitive_skills=_string_list(
                    _require(st, "primitive_skills", list, st_where), f"{st_where}.primitive_skills"
                ),
            )
        if not skill_types:
            raise TaxonomyError(f"{where}.skill_types: a domain needs at least one skill type")
        domain = Domain(
            name=name,
            description=_require(body, "description", str, where),
            skill_types=skill_types,
            personas=_string_list(_require(body, "personas", list, where), f"{where}.personas"),
        )
        _string_list(list(domain.primitive_skills), f"{where} (all primitive skills)")
        domains[name] = domain
    if not domains:
        raise TaxonomyError(f"{source}.domains: no domains defined")

    languages = _require(data, "languages", dict, source)
    weights: dict[str, float] = {}
    labels: dict[str, str] = {}
    for key, body in languages.items():
        where = f"{source}.languages.{key}"
        weight = _require(body, "weight", (int, float), where)
        if weight < 0:
            raise TaxonomyError(f"{where}.weight: must be >= 0, got {weight}")
        weights[key] = float(weight)
        labels[key] = _require(body, "label", str, where)
    if not weights or sum(weights.values()) <= 0:
        raise TaxonomyError(f"{source}.languages: weights must sum to a positive number")

    return Taxonomy(
        domains=domains,
        language_weights=weights,
        language_labels=labels,
        task_complexities=_names(
            _require(data, "task_complexity", dict, source), "task_complexity"
        ),
        command_complexities=_names(
            _require(data, "command_complexity", dict, source), "command_complexity"
        ),
        fixture_kinds=_names(_require(data, "fixture_kinds", dict, source), "fixture_kinds"),
        verifier_kinds=_names(_require(data, "verifier_kinds", dict, source), "verifier_kinds"),
        digest=digest,
    )


def packaged_taxonomy_path() -> Path:
    """Path of the taxonomy shipped with the package."""
    return Path(str(resources.files("tmax").joinpath(PACKAGED_TAXONOMY)))


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Load a taxonomy YAML file (``None``: the packaged one)."""
    path = Path(path) if path is not None else packaged_taxonomy_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TaxonomyError(f"taxonomy file not found: {path}") from None
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise TaxonomyError(f"{path}: not valid YAML: {error}") from None
    return parse_taxonomy(data, hashlib.sha256(raw).hexdigest(), source=str(path))
