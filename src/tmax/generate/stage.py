"""Stage entry points for generation, validation, export and the generation report."""

from __future__ import annotations

import json
import logging
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tmax.generate.audit import audit_rendered
from tmax.generate.diversity import diversity_markdown, task_diversity
from tmax.generate.family import LEVELS
from tmax.generate.llm.reasons import QUARANTINE_REASONS
from tmax.generate.procedural import GenerationError, render_task
from tmax.generate.validate import validate_tasks
from tmax.io import atomic_path, write_json, write_text
from tmax.settings import GenerationSection
from tmax.tasks import Task, read_task, write_task
from tmax.taxonomy import AXES, balance_score, load_taxonomy, read_specs

log = logging.getLogger("tmax.generate")

FAILED_FILE = "_generation_failures.json"
"""Specs of a shard that no family could render, with the reason (kept, not dropped)."""


def generate_shard(
    specs_path: str | Path, output_dir: str | Path, seed: int, tier: str = "full"
) -> int:
    """Render every spec of a shard into ``output_dir/<spec_id>/`` (``tier``: the
    families to draw from, :data:`tmax.generate.procedural.TIERS`)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    failures: dict[str, str] = {}
    written = 0
    for spec in read_specs(specs_path):
        try:
            write_task(render_task(spec, seed, tier=tier), output_dir)
            written += 1
        except GenerationError as error:
            failures[spec.spec_id] = str(error)
            log.error("could not generate %s: %s", spec.spec_id, error)
    write_json(output_dir / FAILED_FILE, failures)
    log.info("generated %d task(s) in %s (%d failed)", written, output_dir, len(failures))
    return written


def generate_for_backend(
    backend: str,
    specs_path: str | Path,
    output_dir: str | Path,
    seed: int,
    config: Mapping[str, Any] | None = None,
) -> int:
    """The generation stage for the configured backend (``config``: the validated
    workflow config, which the llm backend reads its endpoint and settings from)."""
    if backend == "procedural":
        tier = GenerationSection.of((config or {}).get("generation", {})).tier
        return generate_shard(specs_path, output_dir, seed, tier)
    if backend == "llm":
        from tmax.generate.llm.settings import LLMSettings
        from tmax.generate.llm.shard import generate_llm_shard

        try:
            settings = LLMSettings.from_config(config or {})
            return int(generate_llm_shard(specs_path, output_dir, settings)["written"])
        except ValueError as error:
            raise GenerationError(str(error)) from None
    raise GenerationError(f"unknown generation backend {backend!r}; use 'procedural' or 'llm'")


def task_dirs(shard_dir: Path) -> list[Path]:
    return sorted(p for p in shard_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def validate_shard(
    shard_dir: str | Path, backend: str, output: str | Path, workers: int = 1
) -> dict[str, Any]:
    shard_dir = Path(shard_dir)
    failed = shard_dir / FAILED_FILE
    return validate_tasks(
        task_dirs(shard_dir),
        backend,
        output,
        run_id=f"validate-{shard_dir.name}",
        generation_failures=json.loads(failed.read_text()) if failed.exists() else {},
        workers=workers,
    )


FILE_TYPE = pa.struct([("path", pa.string()), ("data", pa.binary()), ("executable", pa.bool_())])
EXPORT_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("family", pa.string()),
        *[
            (axis, pa.list_(pa.string()) if axis == "primitive_skills" else pa.string())
            for axis in AXES
        ],
        ("realised", pa.string()),
        ("skills_realised", pa.list_(pa.string())),
        ("backend", pa.string()),
        ("instruction", pa.string()),
        ("task_toml", pa.string()),
        ("solution_commands", pa.int32()),
        ("files", pa.list_(FILE_TYPE)),
    ]
)


def _row(task_dir: Path | Task) -> dict[str, Any]:
    task = task_dir if isinstance(task_dir, Task) else read_task(task_dir)
    assert task.meta is not None
    files = []
    for group, entries in (("environment", task.environment), ("tests", task.tests),
                           ("solution", task.solution or {})):  # fmt: skip
        for rel, entry in sorted(entries.items()):
            files.append(
                {"path": f"{group}/{rel}", "data": entry.data, "executable": entry.executable}
            )
    generator = task.meta.generator
    return {
        "task_id": task.name,
        "family": generator.get("family", ""),
        **{axis: task.meta.axes[axis] for axis in AXES},
        "realised": json.dumps(generator.get("realised", {}), sort_keys=True),
        # None: the generator recorded no realisation (the LLM backend, older tasks)
        "skills_realised": (
            sorted(generator["skills"].get("realised", {})) if "skills" in generator else None
        ),
        "backend": generator.get("backend", ""),
        "instruction": task.instruction,
        "task_toml": task.config.dumps(),
        "solution_commands": int(generator.get("solution_commands", 0)),
        "files": files,
    }


def collect(
    shard_dirs: Sequence[Path],
    validations: Sequence[Path],
    export: Path,
    report_json: Path,
    report_md: Path,
    taxonomy_path: str | Path | None = None,
) -> dict[str, Any]:
    """Export the tasks that passed validation and write the generation report."""
    checks = [c for path in validations for c in json.loads(Path(path).read_text())["checks"]]
    passed = {c["task"] for c in checks if c["ok"]}
    validated = [
        read_task(d) for shard in shard_dirs for d in task_dirs(Path(shard)) if d.name in passed
    ]
    audit: dict[str, Counter[str]] = defaultdict(Counter)
    failed: dict[str, str] = {}
    for task in validated:
        family, findings = audit_task_dir(task)
        audit[family][audit_outcome(findings)] += 1
        if findings:
            failed[task.name] = f"audit: {findings[0]}"
            log.warning("quarantined %s (%s): %s", task.name, family, "; ".join(findings))
    checks = [
        {**c, "ok": False, "reason": failed[c["task"]]} if c["ok"] and c["task"] in failed else c
        for c in checks
    ]
    rows = [_row(task) for task in validated if task.name not in failed]
    table = pa.Table.from_pylist(rows, schema=EXPORT_SCHEMA)
    with atomic_path(export) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    report = generation_report(rows, checks, load_taxonomy(taxonomy_path), audit)
    write_json(report_json, report)
    write_text(report_md, render_report(report))
    log.info("exported %d validated task(s) to %s", len(rows), export)
    return report


def audit_task_dir(task_dir: Path | Task) -> tuple[str, list[str] | None]:
    """The family of a task (or its directory) and the instruction–test audit's
    findings (:mod:`tmax.generate.audit`; None: the family declares no rules)."""
    task = task_dir if isinstance(task_dir, Task) else read_task(task_dir)
    assert task.meta is not None
    family = str(task.meta.generator.get("family", ""))
    level = LEVELS.get(task.meta.axes.get("task_complexity") or "")
    if level is None:
        return family, None
    tests = "".join(f.data.decode("utf-8", "replace") for rel, f in sorted(task.tests.items())
                    if rel.endswith(".py"))  # fmt: skip
    return family, audit_rendered(family, task.instruction, tests, level)


AUDIT_OUTCOMES = ("audited", "passed", "failed", "not_audited")


def audit_outcome(findings: list[str] | None) -> str:
    """How one task came out of the audit (``audit_task_dir``'s findings)."""
    return "not_audited" if findings is None else "failed" if findings else "passed"


def audit_table(outcomes: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Per family, the counts of :data:`AUDIT_OUTCOMES` (audited = passed + failed)."""
    return {
        family: {
            "audited": counts.get("passed", 0) + counts.get("failed", 0),
            **{k: counts.get(k, 0) for k in AUDIT_OUTCOMES[1:]},
        }
        for family, counts in sorted(outcomes.items())
    }


def generation_report(
    rows: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    taxonomy: Any,
    audit: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The generation report; ``audit``: per family, the validated tasks that passed,
    failed or were not covered by the instruction–test audit."""
    axes: dict[str, dict[str, int]] = {}
    for axis in ("domain", "skill_type", "language", "task_complexity", "command_complexity",
                 "fixture_kind", "verifier_kind"):  # fmt: skip
        axes[axis] = dict(sorted(Counter(r[axis] for r in rows).items()))
    realised: dict[str, Counter[str]] = defaultdict(Counter)
    personas_replaced: Counter[str] = Counter()
    for row in rows:
        for axis, value in json.loads(row["realised"]).items():
            if axis == "persona":  # a sentence, not a category: counted per family instead
                personas_replaced[row["family"]] += 1
            else:
                realised[axis][value] += 1
    skills: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        skills[row["family"]].update(skill_outcomes(row))
    by_complexity: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        by_complexity[row["task_complexity"]].append(row["solution_commands"])
    reasons = Counter(_reason_key(c["reason"]) for c in checks if not c["ok"])
    return {
        "tasks_checked": len(checks),
        "tasks_validated": len(rows),
        "quarantined": sum(reasons.values()),
        "quarantine_reasons": dict(reasons.most_common()),
        "balance": {
            "domain": balance_score(axes["domain"], len(taxonomy.domains)) if rows else 0.0,
            "skill_type": (
                balance_score(axes["skill_type"], len(taxonomy.skill_type_labels)) if rows else 0.0
            ),
        },
        "axes": axes,
        "realised_differently": {axis: dict(c) for axis, c in realised.items()},
        "personas_replaced": dict(sorted(personas_replaced.items())),
        "primitive_skills": skills_table(skills),
        "families": dict(sorted(Counter(r["family"] for r in rows).items())),
        "solution_commands": {
            level: {"mean": round(statistics.mean(v), 2), "min": min(v), "max": max(v)}
            for level in ("short", "moderate", "complex", "intricate")
            if (v := by_complexity.get(level))
        },
        "diversity": task_diversity(rows),
        "audit": audit_table(audit or {}),
    }


SKILL_OUTCOMES = ("realised", "not_realised", "not_recorded")


def skill_outcomes(row: Mapping[str, Any]) -> Counter[str]:
    """How an exported row's sampled primitive skills came out (:data:`SKILL_OUTCOMES`)."""
    sampled, realised = len(row["primitive_skills"]), row.get("skills_realised")
    if realised is None:  # no generator recorded it (the LLM backend)
        return Counter({"not_recorded": sampled})
    return Counter({"realised": len(realised), "not_realised": sampled - len(realised)})


def skills_table(counts: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Per family (and ``all``), the sampled primitive skills a task made a stated and
    tested requirement of, those it did not, and those no generator recorded."""
    table = {
        family: {k: int(c.get(k, 0)) for k in SKILL_OUTCOMES}
        for family, c in sorted(counts.items())
    }
    if table:
        table["all"] = {k: sum(c[k] for c in table.values()) for k in SKILL_OUTCOMES}
    return table


def _reason_key(reason: str) -> str:
    """The countable part of a quarantine reason; a generation failure keeps its own
    kind ("generation failed: missing section"), so the LLM generator's reasons are
    counted apart."""
    head, _, rest = reason.partition(":")
    if head == "audit":  # "audit: <rule id>: <what>", counted per rule and finding
        return reason
    kind = rest.strip().split(":")[0]
    if head == "generation failed" and kind in QUARANTINE_REASONS:
        return f"{head}: {kind}"
    return head


def render_report(report: dict[str, Any]) -> str:
    lines = [
        "# Generated tasks",
        "",
        f"{report['tasks_validated']} of {report['tasks_checked']} tasks passed validation "
        "(reference solution scores 1, a no-op scores 0); "
        f"{report['quarantined']} quarantined.",
        "",
        f"Balance exp(H)/N: domain {report['balance']['domain']:.4f}, "
        f"skill type {report['balance']['skill_type']:.4f}.",
        "",
        "## Solution length (commands) by task complexity",
        "",
        "| task complexity | mean | min | max |",
        "|---|---:|---:|---:|",
    ]
    for level, stats in report["solution_commands"].items():
        lines.append(f"| {level} | {stats['mean']} | {stats['min']} | {stats['max']} |")
    lines += ["", "## Quarantine reasons", "", "| reason | tasks |", "|---|---:|"]
    lines += [f"| {r} | {n} |" for r, n in report["quarantine_reasons"].items()] or [
        "| (none) | 0 |"
    ]
    for axis, counts in report["axes"].items():
        lines += ["", f"## {axis}", "", "| value | tasks |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in counts.items()]
    if report["realised_differently"]:
        lines += ["", "## Axes realised differently from the spec", ""]
        lines += ["| axis | realised as | tasks |", "|---|---|---:|"]
        for axis, counts in report["realised_differently"].items():
            lines += [f"| {axis} | {k} | {v} |" for k, v in sorted(counts.items())]
    if report.get("personas_replaced"):
        lines += ["", "## Personas replaced to fit the family's task", ""]
        lines += ["| family | tasks |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in report["personas_replaced"].items()]
    if report.get("audit"):
        lines += ["", "## Instruction–test audit", ""]
        lines += [
            "| family | audited | passed | failed | not audited |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [f"| {family} | " + " | ".join(str(c[k]) for k in AUDIT_OUTCOMES) + " |"
                  for family, c in report["audit"].items()]  # fmt: skip
    if report.get("primitive_skills"):
        lines += ["", "## Primitive skills: sampled, and made a tested requirement", ""]
        lines += ["| family | realised | not realised | not recorded |", "|---|---:|---:|---:|"]
        lines += [f"| {family} | " + " | ".join(str(c[k]) for k in SKILL_OUTCOMES) + " |"
                  for family, c in report["primitive_skills"].items()]  # fmt: skip
    lines += ["", "## Families", "", "| family | tasks |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in report["families"].items()]
    if "diversity" in report:
        lines += ["", *diversity_markdown(report["diversity"])]
    return "\n".join(lines) + "\n"
