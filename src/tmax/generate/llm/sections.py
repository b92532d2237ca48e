"""Strict parsing of the generator's tagged sections (``<name> … </name>``).

The model answers each stage with named sections. Anything outside them (a greeting,
a closing remark) is ignored, but the sections themselves are held to the contract:
a required section that is missing, a single-use section given twice, a section left
open or left empty is a :class:`SectionError` whose ``kind`` becomes the spec's
quarantine reason. Repeatable sections (``<file path="…">``) carry a path attribute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPEN = re.compile(r'<(?P<name>[a-z_]+)(?:\s+path="(?P<path>[^"<>\n]*)")?\s*>')


class SectionError(ValueError):
    """The answer breaks the section contract; ``kind`` is a short, countable reason."""

    def __init__(self, kind: str, section: str, detail: str = "") -> None:
        self.kind = kind
        self.section = section
        message = f"{kind}: <{section}>"
        super().__init__(f"{message} ({detail})" if detail else message)


@dataclass(frozen=True)
class SectionSpec:
    """What one stage expects: required single sections, optional ones, repeatables."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    repeatable: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return self.required + self.optional + self.repeatable


@dataclass
class Sections:
    """The parsed answer: single sections by name, repeatable ones as (path, body)."""

    single: dict[str, str] = field(default_factory=dict)
    repeated: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> str:
        return self.single[name]

    def get(self, name: str) -> str | None:
        return self.single.get(name)

    def files(self, name: str = "file") -> list[tuple[str, str]]:
        return list(self.repeated.get(name, []))


def _strip_fence(body: str) -> str:
    """Drop one Markdown code fence around a section body (models add them unasked)."""
    text = body.strip("\n")
    lines = text.splitlines()
    if len(lines) >= 2 and lines[0].strip().startswith("```") and lines[-1].strip() == "```":
        text = "\n".join(lines[1:-1])
    return text


def parse_sections(text: str, spec: SectionSpec) -> Sections:
    """Parse ``text`` against ``spec``; raises :class:`SectionError` on any breach.

    Only tags named in ``spec`` open a section, and a section runs to its own closing
    tag, so other tags inside a body (HTML, XML test data) are left alone.
    """
    parsed = Sections()
    position = 0
    while True:
        match = _next_open(text, position, spec.names)
        if match is None:
            break
        name, path = match.group("name"), match.group("path")
        closing = f"</{name}>"
        end = text.find(closing, match.end())
        if end < 0:
            raise SectionError("unclosed section", name, f"no {closing} after it")
        body = _strip_fence(text[match.end() : end])
        position = end + len(closing)
        if not body.strip():
            raise SectionError("empty section", name)
        if name in spec.repeatable:
            _add_repeated(parsed, name, path, body)
        elif name in parsed.single:
            raise SectionError("duplicate section", name, "it must appear once")
        else:
            parsed.single[name] = body
    for name in spec.required:
        if name not in parsed.single:
            raise SectionError("missing section", name)
    return parsed


def _next_open(text: str, position: int, names: tuple[str, ...]) -> re.Match[str] | None:
    for match in _OPEN.finditer(text, position):
        if match.group("name") in names:
            return match
    return None


def _add_repeated(parsed: Sections, name: str, path: str | None, body: str) -> None:
    if not path:
        raise SectionError("malformed section", name, 'it needs a path="…" attribute')
    entries = parsed.repeated.setdefault(name, [])
    if any(existing == path for existing, _ in entries):
        raise SectionError("duplicate section", name, f"path {path!r} given twice")
    entries.append((path, body if body.endswith("\n") else body + "\n"))


def render_section_list(spec: SectionSpec) -> str:
    """The sections a stage asks for, as the prompt shows them."""
    parts = [f"<{name}>…</{name}>" for name in spec.required]
    parts += [f"<{name}>…</{name}> (optional)" for name in spec.optional]
    parts += [f'<{name} path="…">…</{name}> (any number)' for name in spec.repeatable]
    return "\n".join(f"- {part}" for part in parts)
