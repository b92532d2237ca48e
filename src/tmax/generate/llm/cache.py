"""A content-addressed cache of model calls: a rerun or a crash never pays twice.

The key is a sha256 over (model, messages, sampling parameters), so any change to a
prompt, a spec or a setting makes a new key, and an unchanged call is answered from
disk. Entries are written atomically; a half-written entry cannot exist.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.io import write_json


def call_key(model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> str:
    """The cache key of one chat call (stable across processes and dict orders)."""
    blob = json.dumps(
        {"model": model, "messages": list(messages), "params": dict(params)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CallCache:
    """Responses stored as ``<root>/<key[:2]>/<key>.json``, with hit/miss counters."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response, or None (a corrupt entry counts as a miss)."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            entry = None
        with self._lock:
            if isinstance(entry, dict):
                self.hits += 1
                return entry
            self.misses += 1
        return None

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        write_json(self._path(key), dict(entry))

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def stats(self) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "hit_rate": round(self.hit_rate, 4)}
