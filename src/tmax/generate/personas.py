"""Personas that fit the task (issue 26): the opening "I'm <persona>." of a procedural
task must not contradict the story its family tells.

The sampler draws a spec's persona from its domain (paper §3.1) without knowing which
family will render it, and each procedural family tells one fixed story (whose files,
which system, why). ``families/personas.yaml`` lists, per family, the personas whose
situation fits that story: taxonomy personas by their exact text, and personas of the
family's own where none of the taxonomy's fits. A spec whose persona fits keeps it;
otherwise :func:`fitting_persona` picks one of the family's, seeded by the spec id,
and the generator records it as realised differently (``tmax.json``
``generator.realised.persona``). The spec itself, its persona and its id are
unchanged. The LLM backend writes its story from the spec's persona and does not use
this module.

One deliberate exception: a family marked ``persona: as_drawn`` (the easy tier's,
whose tasks are domain-neutral one-line chores for a tiny model) keeps every spec's
persona exactly as drawn, so its instructions stay byte-identical to those the
embedded default's learning benchmark was measured on. Every persona fits it by
declaration (:func:`persona_fits`); fitting it is left for when the miniature is
re-measured.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tmax.generate import families as _families  # noqa: F401  (registers the families)
from tmax.generate.families.easy import EASY_FAMILIES
from tmax.generate.family import FAMILIES
from tmax.taxonomy import TaskSpec, load_taxonomy

PERSONAS_FILE = Path(__file__).parent / "families" / "personas.yaml"
SOURCES = ("taxonomy", "own")
"""The two lists of a family's entry: taxonomy personas (exact text) and its own."""
AS_DRAWN = "as_drawn"
"""``persona: as_drawn``: the family keeps every spec's persona (with a ``reason:``)."""
AS_DRAWN_KEYS = ("persona", "reason")


@dataclass(frozen=True)
class FamilyPersonas:
    """One family's entry: the personas that fit its story, or the reason it keeps
    every spec's persona as drawn (then ``personas`` is empty)."""

    personas: tuple[str, ...] = ()
    as_drawn_reason: str = ""

    @property
    def as_drawn(self) -> bool:
        return bool(self.as_drawn_reason)


class PersonaError(ValueError):
    """A personas file naming an unknown family or taxonomy persona, or leaving a family
    without a persona."""


def family_names() -> tuple[str, ...]:
    """Every procedural family, the full tier's and the easy tier's."""
    full = [family.name for families in FAMILIES.values() for family in families]
    return (*full, *(family.name for family in EASY_FAMILIES))


def _did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _as_drawn_entry(path: Path, family: str, entry: dict[str, Any]) -> FamilyPersonas:
    if set(entry) != set(AS_DRAWN_KEYS) or entry["persona"] != AS_DRAWN:
        raise PersonaError(
            f"{path}: family {family}: a family that keeps the spec's persona is the mapping "
            f"'persona: {AS_DRAWN}' plus 'reason: <why>', got {entry!r}"
        )
    reason = entry["reason"]
    if not isinstance(reason, str) or not reason.strip():
        raise PersonaError(f"{path}: family {family}: 'persona: {AS_DRAWN}' needs a reason")
    return FamilyPersonas(as_drawn_reason=reason.strip())


def load_family_personas(
    path: str | Path | None = None, taxonomy_path: str | Path | None = None
) -> dict[str, FamilyPersonas]:
    """Each family's entry: the personas that fit it, in file order (taxonomy's, then its
    own), or ``persona: as_drawn`` with its reason.

    ``path``: the personas file (default :data:`PERSONAS_FILE`); ``taxonomy_path``: the
    taxonomy whose persona texts the ``taxonomy:`` lists must match (default: the
    packaged one). Every registered family must have at least one persona or be marked
    as drawn.
    """
    path = Path(path) if path is not None else PERSONAS_FILE
    try:
        data: Any = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise PersonaError(f"personas file not found: {path}") from None
    except yaml.YAMLError as error:
        raise PersonaError(f"{path}: not valid YAML: {error}") from None
    entries = data.get("families") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise PersonaError(f"{path}: expected a mapping 'families: {{family name: entry}}'")
    taxonomy = load_taxonomy(taxonomy_path)
    known = [p for domain in taxonomy.domains.values() for p in domain.personas]
    names = family_names()
    fitting: dict[str, FamilyPersonas] = {}
    for family, entry in entries.items():
        if family not in names:
            raise PersonaError(
                f"{path}: {family!r} is not a task family{_did_you_mean(str(family), list(names))}"
            )
        if isinstance(entry, dict) and "persona" in entry:
            fitting[family] = _as_drawn_entry(path, family, entry)
            continue
        if not isinstance(entry, dict) or set(entry) - set(SOURCES):
            raise PersonaError(
                f"{path}: family {family}: expected a mapping with the keys {SOURCES} "
                f"(or 'persona: {AS_DRAWN}' and 'reason'), got {entry!r}"
            )
        personas: list[str] = []
        for source in SOURCES:
            listed = entry.get(source) or []
            if not isinstance(listed, list):
                raise PersonaError(f"{path}: family {family}: '{source}' must be a list")
            for persona in listed:
                if not isinstance(persona, str) or not persona.strip():
                    raise PersonaError(
                        f"{path}: family {family}: {source} persona {persona!r} is not text"
                    )
                if source == "taxonomy" and persona not in known:
                    raise PersonaError(
                        f"{path}: family {family}: unknown taxonomy persona {persona!r} "
                        f"(not in {taxonomy_path or 'the packaged taxonomy'})"
                        + _did_you_mean(persona, known)
                    )
                if source == "own" and persona in known:
                    raise PersonaError(
                        f"{path}: family {family}: own persona {persona!r} is a taxonomy "
                        "persona; list it under 'taxonomy'"
                    )
                if persona in personas:
                    raise PersonaError(f"{path}: family {family} lists {persona!r} twice")
                personas.append(persona)
        fitting[family] = FamilyPersonas(personas=tuple(personas))
    empty = FamilyPersonas()
    missing = [name for name in names if fitting.get(name, empty) == empty]
    if missing:
        raise PersonaError(f"{path}: no fitting persona for the family(ies) {', '.join(missing)}")
    return fitting


@cache
def family_personas() -> Mapping[str, FamilyPersonas]:
    """The packaged personas file, loaded and checked once."""
    return load_family_personas()


def _entry_of(family_name: str) -> FamilyPersonas:
    entry = family_personas().get(family_name)
    if entry is None:
        raise PersonaError(f"no personas for an unknown task family {family_name!r}")
    return entry


def persona_fits(family_name: str, persona: str) -> bool:
    """Whether ``persona`` is one the family's story fits (the audit's definition);
    every persona fits a family marked ``persona: as_drawn``, by declaration."""
    entry = _entry_of(family_name)
    return entry.as_drawn or persona in entry.personas


def fitting_persona(family_name: str, spec: TaskSpec) -> str:
    """The persona a task of ``family_name`` opens with: the spec's when it fits (always,
    for an as-drawn family), otherwise one of the family's, chosen by a hash of the spec
    id (the same in every process, unlike Python's salted ``hash``)."""
    entry = _entry_of(family_name)
    if persona_fits(family_name, spec.persona):
        return spec.persona
    personas = entry.personas
    digest = hashlib.sha256(f"tmax-persona/{spec.spec_id}".encode()).digest()
    return personas[int.from_bytes(digest[:8], "big") % len(personas)]
