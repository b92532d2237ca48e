"""Prior-dataset adapters on real sources: convert a sample of each local copy given and
tabulate what converted and why the rest was skipped. Not run in CI (no network there,
and the copies are large); rerun it whenever an adapter changes.

Run: .venv/bin/python benchmarks/datasets_real.py \\
    --source termigen=harbor:/data/terminal-bench-env:environments_harbor \\
    [--source NAME=LAYOUT:PATH[:SUBDIR[:FILES]] ...] [--sample 250] [--seed 0]

Each source is converted as ``tmax datasets convert NAME --layout LAYOUT --path PATH
--subdir SUBDIR --files FILES --sample N`` would, into a temporary folder, with
``max_skipped_share`` 1 so a bad source still reports its reasons instead of stopping.
Prints one row per source: found (tasks listed), sampled, converted, skipped by kind,
seconds; then the most common skip reasons. Exit status 1 when a source would have
failed the default share.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tmax.datasets.base import DatasetError
from tmax.datasets.convert import MAX_SKIPPED_SHARE, prepare_dataset


def parse_source(text: str) -> dict[str, Any]:
    """``NAME=LAYOUT:PATH[:SUBDIR[:FILES]]`` as a ``datasets.sources`` entry."""
    name, sep, rest = text.partition("=")
    parts = rest.split(":")
    if not sep or len(parts) < 2 or not name or not parts[0] or not parts[1]:
        raise argparse.ArgumentTypeError(
            f"--source {text!r}: expected NAME=LAYOUT:PATH[:SUBDIR[:FILES]]"
        )
    entry: dict[str, Any] = {"name": name, "layout": parts[0], "path": parts[1]}
    for key, value in zip(("subdir", "files"), parts[2:], strict=False):
        if value:
            entry[key] = value
    return entry


def measure(entry: dict[str, Any], sample: int | None, seed: int) -> dict[str, Any]:
    """One source converted into a throwaway folder: its counts and time."""
    with tempfile.TemporaryDirectory(prefix="tmax-datasets-real-") as scratch:
        start = time.perf_counter()
        try:
            manifest = prepare_dataset(
                entry, Path(scratch) / entry["name"], seed=seed, sample=sample,
                max_skipped_share=1.0,
            )  # fmt: skip
        except DatasetError as error:
            return {"entry": entry, "error": str(error), "seconds": time.perf_counter() - start}
        seconds = time.perf_counter() - start
    skipped = manifest["skipped"]
    return {
        "entry": entry,
        "found": manifest["found"],
        "sampled": len(manifest["tasks"]) + len(skipped),
        "converted": len(manifest["tasks"]),
        "by_kind": manifest["skipped_by_kind"],
        "reasons": Counter(f"{s['kind']}: {s['reason']}" for s in skipped).most_common(5),
        "seconds": seconds,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| source | layout | found | sampled | converted | skipped by kind | seconds |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        entry = row["entry"]
        if "error" in row:
            lines.append(f"| {entry['name']} | {entry['layout']} | - | - | - | "
                         f"error: {row['error'][:120]} | {row['seconds']:.1f} |")  # fmt: skip
            continue
        kinds = ", ".join(f"{kind} {count}" for kind, count in row["by_kind"].items()) or "none"
        lines.append(
            f"| {entry['name']} | {entry['layout']} | {row['found']} | {row['sampled']} | "
            f"{row['converted']} | {kinds} | {row['seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=parse_source, action="append", required=True,
                        metavar="NAME=LAYOUT:PATH[:SUBDIR[:FILES]]")  # fmt: skip
    parser.add_argument("--sample", type=int, default=250, help="tasks to draw (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # one line per skip would drown the table
    sample = args.sample or None  # 0: every task
    rows = [measure(entry, sample, args.seed) for entry in args.source]
    print(table(rows))
    failing = 0
    for row in rows:
        reasons = row.get("reasons") or []
        if reasons:
            print(f"\n{row['entry']['name']}: most common skip reasons")
            print("\n".join(f"  {count:4d}  {reason[:160]}" for reason, count in reasons))
        share = 1 - row["converted"] / row["sampled"] if row.get("sampled") else 1.0
        failing += "error" in row or share > MAX_SKIPPED_SHARE
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
