"""The red team: every scripted attack against one generated task of every family and
against the Harbor-format fixtures (shaped like Terminal-Bench 2, SWE-bench, and
Terminal-Bench 1.0 and Endless Terminals as converted), on bwrap and podman.

Run (as root, after ./setup.sh): .venv/bin/python benchmarks/redteam.py [--quick]
    [--backend bwrap] [--family NAME ...] [--results FILE]

Prints, per attack, how many (task, backend) pairs it was tried on, how many it got a
reward on (must be 0), how many it turned into an infrastructure failure (must be 0),
on how many a connection reached the host's server (must be 0) and, for the attack
that reads the tests, on how many tasks with pytest's verdict it
read any of them (must be 0), then every such pair. ``--quick`` takes the first
family of each domain. Exits 1 when any attack succeeded. The attacks are in
``tmax.sandbox.redteam``.

``--results FILE`` appends every outcome to FILE (JSON lines) as soon as it is known,
with the commit it ran at; a later run with the same FILE at the same commit skips what
is there and counts it in its tables, so the full matrix (hours on podman) can be run in
pieces. Outcomes of another commit are left in the file and not counted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

from tmax.generate.procedural import FAMILIES  # importing it registers the families
from tmax.sandbox.redteam import ATTACKS, Outcome, attempt, family_task

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "redteam"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one family per domain")
    parser.add_argument("--backend", action="append", choices=["bwrap", "podman"])
    parser.add_argument("--family", action="append", help="only these families")
    parser.add_argument("--results", type=Path, help="append outcomes here; skip those there")
    args = parser.parse_args()
    source = _commit()
    known = recorded(args.results, source) if args.results else {}
    backends = args.backend or ["bwrap", "podman"]
    families = [f.name for group in FAMILIES.values() for f in (group[:1] if args.quick else group)]
    if args.family:
        families = args.family
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="redteam-") as scratch:
        tasks = [family_task(name, Path(scratch)) for name in families]
        tasks += sorted(p for p in FIXTURES.iterdir() if p.is_dir())
        for backend in backends:  # a table per backend as soon as it is done
            started = time.monotonic()
            done: list[Outcome] = []
            for task in tasks:
                for attack in ATTACKS.values():
                    if backend not in attack.backends:
                        continue
                    outcome = known.get((backend, task.name, attack.name))
                    if outcome is None:
                        outcome = attempt(task, attack, backend, run_id="benchmark-redteam")
                        if args.results:
                            record(args.results, outcome, source)
                    done.append(outcome)
                    if _broken(outcome):
                        print(f"  ! {backend} {task.name}: {attack.name}: reward "
                              f"{outcome.reward} infra {outcome.infra} "
                              f"host reached {outcome.host_reached} "
                              f"read the tests {outcome.leaked}", flush=True)  # fmt: skip
            print(f"\n{backend}: {len(tasks)} tasks ({len(families)} families + "
                  f"{len(tasks) - len(families)} fixtures) x {len(ATTACKS)} attacks, "
                  f"{time.monotonic() - started:.0f}s\n")  # fmt: skip
            _table(done)
            outcomes += done
    if len(backends) > 1:
        print("\nall backends:")
        _table(outcomes)
    return 1 if any(_broken(o) for o in outcomes) else 0


def _commit() -> str:
    """The commit this tree is at (with ``+dirty`` for uncommitted changes)."""

    def git(*argv: str) -> str:
        run = subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True)
        return run.stdout.strip()

    return git("rev-parse", "HEAD") + ("+dirty" if git("status", "--porcelain") else "")


def record(path: Path, outcome: Outcome, source: str) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps({"source": source, **asdict(outcome)}) + "\n")


def recorded(path: Path, source: str) -> dict[tuple[str, str, str], Outcome]:
    """The outcomes ``path`` holds from ``source``, by (backend, task, attack)."""
    found: dict[tuple[str, str, str], Outcome] = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        fields = json.loads(line)
        if fields.pop("source", None) != source:
            continue
        outcome = Outcome(**fields)
        found[(outcome.backend, outcome.task, outcome.attack)] = outcome
    skipped = len(path.read_text().splitlines()) - len(found)
    print(
        f"{path}: {len(found)} outcome(s) of this commit kept"
        + (f", {skipped} other line(s) not counted" if skipped else ""),
        flush=True,
    )
    return found


def _broken(outcome: Outcome) -> bool:
    return bool(outcome.forged or outcome.infra or outcome.leaked or outcome.host_reached)


def _table(outcomes: list[Outcome]) -> None:
    by_attack: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_attack[outcome.attack].append(outcome)
    print("| attack | tried | rewarded | infra | host reachable | read the tests |\n"
          "|---|---|---|---|---|---|")  # fmt: skip
    for name in ATTACKS:
        got = by_attack[name]
        print(f"| {name} | {len(got)} | {sum(o.forged for o in got)} "
              f"| {sum(o.infra is not None for o in got)} | {_reached(got)} "
              f"| {_leaks(got)} |")  # fmt: skip
    forged = sum(o.forged for o in outcomes)
    infra = sum(o.infra is not None for o in outcomes)
    print(f"| **all** | {len(outcomes)} | {forged} | {infra} | {_reached(outcomes)} "
          f"| {_leaks(outcomes)} |", flush=True)  # fmt: skip


def _reached(outcomes: list[Outcome]) -> str:
    """Host reached over the outcomes of network attacks ("reached/tried"), "" if none."""
    tried = [o for o in outcomes if o.host_reached is not None]
    return f"{sum(o.host_reached for o in tried)}/{len(tried)}" if tried else ""


def _leaks(outcomes: list[Outcome]) -> str:
    """Leaks over the outcomes whose leak was checked ("read/checked"), "" if none."""
    checked = [o for o in outcomes if o.leaked is not None]
    return f"{sum(o.leaked for o in checked)}/{len(checked)}" if checked else ""


if __name__ == "__main__":
    sys.exit(main())
