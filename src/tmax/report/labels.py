"""Label maps: released runs' own names onto the paper's cells.

A published Harbor job names its model by a run name (``swerl-step200``,
``qwen3.5-9b-tmax-step400``), its benchmark by a dataset name (``terminal-bench``,
``terminal-bench@2.0``) and its harness by the agent's name (``vanillux2-agent``). The
tables key their cells by the paper's names (``qwen3.5-9b`` · ``terminal-bench-2.0``
· ``tmax``), so without a map such runs fill rows of their own, "not reported in
paper". A :class:`LabelMap` renames them before the tables are built:

- ``models``: run model name -> paper model (``qwen3.5-9b`` or its printed label
  ``Qwen3.5-9B``), optionally with a variant suffix (``qwen3.5-9b-tmax``);
- ``variants``: run model name -> ``base``, ``sft`` or ``tmax`` (wins over a suffix);
- ``benchmarks``: dataset name -> paper benchmark (``terminal-bench-2.0``, ``TB 2.0``);
- ``harnesses``: agent name -> paper harness (``tmax``, ``terminus-2``, …).

A source is an exact name, a glob (``swerl-qwen35-2b-*``) or a regular expression
written ``re:PATTERN`` (matched in full). Exact names win over patterns; patterns are
tried in order. Entries come from a YAML file with those four sections and from the
command line (``--map-model SRC=TARGET``, …), the command line winning. Targets must be
the paper's own names (from ``paper_values.yaml``), so a typo is an error listing the
valid ones rather than a silent row of its own.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tmax.evaluate.records import TrialRecord
from tmax.report.ingest import VARIANT_SUFFIXES, VARIANTS, split_variant
from tmax.report.tables import PaperValues

log = logging.getLogger("tmax.report")

SECTIONS = ("models", "variants", "benchmarks", "harnesses")
#: The command-line flag of each section.
FLAGS = {
    "models": "--map-model",
    "variants": "--map-variant",
    "benchmarks": "--map-benchmark",
    "harnesses": "--map-harness",
}
REGEX_PREFIX = "re:"
_GLOB_CHARS = frozenset("*?[")


class LabelMapError(ValueError):
    """A label map entry that cannot be used; the message names the entry."""


@dataclass(frozen=True)
class Rule:
    """``source`` (a name, glob or ``re:`` pattern) -> ``target`` (a paper key)."""

    source: str
    target: str
    origin: str

    @property
    def is_pattern(self) -> bool:
        return self.source.startswith(REGEX_PREFIX) or bool(_GLOB_CHARS & set(self.source))

    def matches(self, name: str) -> bool:
        if self.source.startswith(REGEX_PREFIX):
            return re.fullmatch(self.source[len(REGEX_PREFIX) :], name) is not None
        if self.is_pattern:
            return fnmatch.fnmatchcase(name, self.source)
        return name == self.source


@dataclass(frozen=True)
class PaperNames:
    """The names the paper's tables use, per section (key -> printed label)."""

    models: dict[str, str]
    benchmarks: dict[str, str]
    harnesses: dict[str, str]
    variants: dict[str, str] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, str]:
        return getattr(self, name)


def paper_names(paper: PaperValues) -> PaperNames:
    """Models (cross-size rows), benchmarks (every table's benchmark columns and the
    cross-task rows), harnesses (cross-harness rows) and variants of ``paper``."""

    def benchmarks_of(columns: Iterable[str]) -> list[str]:
        return [column.partition("/")[0] for column in columns]

    benchmarks = [
        *benchmarks_of(paper.columns("cross_size")),
        *benchmarks_of(paper.columns("cross_harness")),
        *paper.rows("cross_task"),
        *paper.columns("dataset_ablation"),
        *benchmarks_of(paper.columns("contamination")),
    ]

    def labelled(keys: Iterable[str]) -> dict[str, str]:
        return {key: paper.labels.get(key, key) for key in dict.fromkeys(keys)}

    return PaperNames(
        models=labelled(paper.rows("cross_size")),
        benchmarks=labelled(benchmarks),
        harnesses=labelled(paper.rows("cross_harness")),
        variants=labelled(VARIANTS),
    )


def _resolve(names: Mapping[str, str], target: str) -> str | None:
    """The key ``target`` names (the key itself or its printed label, any case)."""
    wanted = target.strip().casefold()
    for key, label in names.items():
        if wanted in (key.casefold(), label.casefold()):
            return key
    return None


def _valid(names: Mapping[str, str]) -> str:
    return ", ".join(key if key == label else f"{key} ({label})" for key, label in names.items())


@dataclass(frozen=True)
class LabelMap:
    """Rules per section, command-line entries first (they win)."""

    rules: dict[str, tuple[Rule, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.rules.values())

    def lookup(self, section: str, name: str | None) -> str | None:
        """The target of the first exact rule naming ``name``, else of the first pattern
        matching it; None when no rule applies."""
        if name is None:
            return None
        rules = self.rules.get(section, ())
        for rule in rules:
            if not rule.is_pattern and rule.matches(name):
                return rule.target
        for rule in rules:
            if rule.is_pattern and rule.matches(name):
                return rule.target
        return None

    def relabel(self, record: TrialRecord) -> TrialRecord:
        """``record`` under the paper's names (unchanged where no rule applies)."""
        model = record.model
        paper_model = self.lookup("models", record.model)
        variant = self.lookup("variants", record.model)
        if paper_model is not None or variant is not None:
            base, found_variant = split_variant(paper_model or record.model)
            suffix = dict(VARIANT_SUFFIXES).get(variant or found_variant, "")
            model = base + suffix
        return replace(
            record,
            model=model,
            benchmark=self.lookup("benchmarks", record.benchmark) or record.benchmark,
            harness=self.lookup("harnesses", record.harness) or record.harness,
        )

    def apply(self, records: Sequence[TrialRecord]) -> list[TrialRecord]:
        """Every record relabelled. Two settings that would land on the same cell are
        an error (their trials would silently pool into one measurement); a rule that
        matches nothing is logged as a warning, every renaming at info level."""
        if not self:
            return list(records)
        relabelled = [self.relabel(record) for record in records]
        landed: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
        for before, after in zip(records, relabelled, strict=True):
            landed.setdefault(after.group, set()).add(before.group)
        for after, befores in sorted(landed.items(), key=lambda item: str(item[0])):
            if len(befores) > 1:
                raise LabelMapError(
                    f"the label map puts {len(befores)} settings on one cell "
                    f"{' · '.join(str(part) for part in after)}: "
                    + "; ".join(" · ".join(str(p) for p in b) for b in sorted(befores, key=str))
                    + " (map them apart, or evaluate one of them)"
                )
            (before,) = befores
            if before != after:
                log.info(
                    "label map: %s -> %s",
                    " · ".join(str(p) for p in before),
                    " · ".join(str(p) for p in after),
                )
        names = {
            "models": {r.model for r in records},
            "variants": {r.model for r in records},
            "benchmarks": {r.benchmark for r in records if r.benchmark},
            "harnesses": {r.harness for r in records},
        }
        for section, rules in self.rules.items():
            for rule in rules:
                if not any(rule.matches(name) for name in names[section]):
                    log.warning(
                        "label map %s: %s=%s matches no %s in the jobs (seen: %s)",
                        rule.origin,
                        rule.source,
                        rule.target,
                        section[:-1],
                        ", ".join(sorted(names[section])) or "none",
                    )
        return relabelled


def _check_source(source: str, origin: str) -> None:
    if not source:
        raise LabelMapError(f"{origin}: empty source name")
    if source.startswith(REGEX_PREFIX):
        try:
            re.compile(source[len(REGEX_PREFIX) :])
        except re.error as err:
            raise LabelMapError(f"{origin}: {source!r} is not a valid regex: {err}") from None


def _rule(section: str, source: str, target: str, origin: str, names: PaperNames) -> Rule:
    _check_source(source, origin)
    if not isinstance(target, str) or not target.strip():
        raise LabelMapError(f"{origin}: {source!r} maps to {target!r}, expected a name")
    allowed = names.section(section)
    key = _resolve(allowed, target)
    if key is None and section == "models":
        base, variant = split_variant(target.strip().casefold())
        found = _resolve(allowed, base)
        key = None if found is None else found + dict(VARIANT_SUFFIXES).get(variant, "")
    if key is None:
        extra = "; a model may carry a variant suffix (-sft, -tmax)" if section == "models" else ""
        raise LabelMapError(
            f"{origin}: {target!r} (for {source!r}) is not one of the paper's "
            f"{section}: {_valid(allowed)}{extra}"
        )
    return Rule(source, key, origin)


def parse_label_file(data: Any, source: str, names: PaperNames) -> dict[str, list[Rule]]:
    """Rules from a loaded YAML mapping ``{section: {source: target}}``."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise LabelMapError(f"{source}: expected a mapping with sections {', '.join(SECTIONS)}")
    unknown = [key for key in data if key not in SECTIONS]
    if unknown:
        raise LabelMapError(
            f"{source}: unknown section(s) {', '.join(map(repr, unknown))}; allowed: "
            + ", ".join(SECTIONS)
        )
    rules: dict[str, list[Rule]] = {}
    for section, entries in data.items():
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            raise LabelMapError(f"{source}: {section} must map names to targets")
        rules[section] = [
            _rule(section, str(src), target, f"{source}: {section}.{src}", names)
            for src, target in entries.items()
        ]
    return rules


def parse_entry(entry: str, flag: str) -> tuple[str, str]:
    """``SOURCE=TARGET`` (split at the last ``=``)."""
    source, sep, target = entry.rpartition("=")
    if not sep or not source.strip() or not target.strip():
        raise LabelMapError(f"{flag} {entry!r}: expected SOURCE=TARGET, e.g. 'run-*=qwen3.5-9b'")
    return source.strip(), target.strip()


def build_label_map(
    paper: PaperValues,
    *,
    file: Path | None = None,
    entries: Mapping[str, Sequence[str]] | None = None,
) -> LabelMap:
    """The label map from a YAML ``file`` and command-line ``entries`` (section ->
    ``SOURCE=TARGET`` strings); command-line entries win over the file's."""
    import yaml

    names = paper_names(paper)
    from_file: dict[str, list[Rule]] = {}
    if file is not None:
        path = Path(file)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise LabelMapError(f"{path}: cannot be read: {err}") from None
        except yaml.YAMLError as err:
            raise LabelMapError(f"{path}: not valid YAML: {err}") from None
        from_file = parse_label_file(data, str(path), names)
    rules: dict[str, tuple[Rule, ...]] = {}
    for section in SECTIONS:
        flag = FLAGS[section]
        given = [
            _rule(section, *parse_entry(entry, flag), f"{flag} {entry!r}", names)
            for entry in (entries or {}).get(section, ())
        ]
        rules[section] = tuple(given + from_file.get(section, []))
    return LabelMap(rules)
