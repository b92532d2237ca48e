"""A content hash of the generator, cheap to compute (imports no task family)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tmax.sandbox.images import definitions_dir


def generator_fingerprint() -> str:
    """Hash of the generator's code and the image definitions. The workflow passes it
    as a rule parameter, so editing a task family regenerates (and revalidates) the
    tasks, and nothing else does."""
    root = Path(__file__).parents[1]  # the tmax package
    sources = sorted(Path(__file__).parent.rglob("*.py"))
    sources += sorted(definitions_dir().rglob("Dockerfile"))
    hasher = hashlib.sha256()
    for path in sources:
        hasher.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return hasher.hexdigest()[:16]
