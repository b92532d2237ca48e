"""Instruction–test consistency of procedurally generated tasks (tmax.generate.audit).

Run (root, after ./setup.sh): .venv/bin/python benchmarks/task_audit.py [--n 2000]

Draws the first N specs of a config (default configs/paper.yaml) with its seed, renders
them with the procedural generator at the config's generation.tier (no sandboxes),
writes and reads each task back the way the collect stage audits it, and prints per
family how many tasks were audited, passed, failed or not audited (the family declares
no rules), then the failure reasons, then per family how many of the sampled primitive
skills the tasks made a stated and tested requirement of (issue 26, part 2), then one
JSON line.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from task_sample import sample_from, sample_parser

from tmax.generate.stage import (
    AUDIT_OUTCOMES,
    SKILL_OUTCOMES,
    _row,
    audit_outcome,
    audit_table,
    audit_task_dir,
    skill_outcomes,
    skills_table,
)
from tmax.tasks import read_task, write_task

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    sample = sample_from(sample_parser(__doc__).parse_args())
    start = time.perf_counter()
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: Counter[str] = Counter()
    skills: dict[str, Counter[str]] = defaultdict(Counter)
    with tempfile.TemporaryDirectory() as tmp:
        for _, task in sample.tasks(description="auditing"):
            written = read_task(write_task(task, tmp))  # as the collect stage reads it
            family, findings = audit_task_dir(written)
            outcomes[family][audit_outcome(findings)] += 1
            reasons.update(f"{family}: {finding}" for finding in findings or ())
            skills[family].update(skill_outcomes(_row(written)))
    seconds = time.perf_counter() - start

    table = audit_table(outcomes)
    print(sample.header() + "\n")
    print("| family | audited | passed | failed | not audited |")
    print("|---|---:|---:|---:|---:|")
    for family, counts in table.items():
        print(f"| {family} | " + " | ".join(str(counts[k]) for k in AUDIT_OUTCOMES) + " |")
    totals = {k: sum(c[k] for c in table.values()) for k in AUDIT_OUTCOMES}
    print("| **all** | " + " | ".join(str(totals[k]) for k in AUDIT_OUTCOMES) + " |")
    print("\n| failure | tasks |\n|---|---:|")
    print("\n".join(f"| {r} | {n} |" for r, n in reasons.most_common()) or "| (none) | 0 |")
    skill_table = skills_table(skills)
    print("\n| family | skills realised | not realised |\n|---|---:|---:|")
    for family, counts in skill_table.items():
        print(f"| {family} | " + " | ".join(str(counts[k]) for k in SKILL_OUTCOMES[:2]) + " |")
    print()
    print(json.dumps({"n": sample.n, "seed": sample.seed, "tier": sample.tier, "families": table,
                      "reasons": dict(reasons.most_common()), "skills": skill_table,
                      "seconds": round(seconds, 1)}, sort_keys=True))  # fmt: skip


if __name__ == "__main__":
    main()
