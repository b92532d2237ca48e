"""Helpers several file_operations families share (batch_normalize, dupe_hunt,
archive_audit, inbox_sorter); this package's only."""

from __future__ import annotations

import random


def run_command(lang: str, tool: str) -> str:
    """How solve.sh runs a reference program (C is built to /tmp/prog first)."""
    return {"python": f"python3 {tool}", "bash": f"bash {tool}"}.get(lang, "/tmp/prog")


def words(rng: random.Random, count: int) -> str:
    """``count`` words of a small office vocabulary, space-separated."""
    pool = ["alpha", "beta", "gamma", "delta", "north", "south"]
    pool += ["ledger", "index", "batch", "report", "parcel", "entry"]
    return " ".join(rng.choice(pool) for _ in range(count))
