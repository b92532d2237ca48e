"""Where every result of the report came from: the code (git commit), the config
(its hash and content), the packages that ran, and a digest of each file."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from tmax.config import config_hash
from tmax.io import file_digest

#: Distributions whose versions decide the results (those not installed say so).
PACKAGES = (
    "tmax",
    "snakemake",
    "torch",
    "transformers",
    "vllm",
    "deepspeed",
    "pyarrow",
    "pandas",
    "matplotlib",
    "openai",
    "pyyaml",
)


def git_state(root: Path) -> dict[str, Any]:
    """The checked-out commit and whether tracked files differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError) as err:
        return {"commit": None, "dirty": None, "reason": f"not a git checkout: {err}"}
    return {"commit": commit, "dirty": dirty}


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def provenance(
    config: Mapping[str, Any],
    *,
    root: Path,
    results: Iterable[Path],
    inputs: Iterable[Path] = (),
) -> dict[str, Any]:
    """The provenance record: one entry per result and input file with its digest,
    and the commit, config hash and package versions they were all made with."""
    return {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_state(root),
        "config_hash": config_hash(config),
        "config": dict(config),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "results": {str(p): file_digest(p) for p in results},
        "inputs": {str(p): file_digest(p) for p in inputs if Path(p).exists()},
    }
