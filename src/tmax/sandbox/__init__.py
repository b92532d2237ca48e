"""Sandboxed task environments behind one interface (podman, bwrap, apptainer).

with open_sandbox("podman", image, Limits.from_task(task), toolbox=ensure_toolbox()) as box:
    box.run("cd /app && make")
    result = box.verify(task_dir / "tests")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast, get_args

from tmax.sandbox.base import (
    TOOLBOX,
    ExecResult,
    Limits,
    Sandbox,
    SandboxDied,
    SandboxError,
    VerifyResult,
    reward_from_files,
)

BackendName = Literal["podman", "bwrap", "apptainer"]
"""A backend's config name (``sandbox.backend`` in the config schema, whose enum it is)."""
BACKENDS: tuple[BackendName, ...] = get_args(BackendName)


def default_backend() -> BackendName:
    """The schema's default of ``sandbox.backend`` (its one home), for settings built
    without a validated config (which fills it in)."""
    from tmax.config import schema_default

    return cast(BackendName, schema_default("sandbox", "backend"))


def backend_class(name: str) -> type[Sandbox]:
    """The Sandbox class of a backend, by its config name."""
    if name == "podman":
        from tmax.sandbox.podman import PodmanSandbox

        return PodmanSandbox
    if name == "bwrap":
        from tmax.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox
    if name == "apptainer":
        from tmax.sandbox.apptainer import ApptainerSandbox

        return ApptainerSandbox
    raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")


def open_sandbox(
    backend: BackendName, image: str | Path, limits: Limits | None = None, **kwargs: Any
) -> Sandbox:
    """Create (not yet start) a sandbox; use it as a context manager to start it."""
    return backend_class(backend)(image, limits, **kwargs)


def cleanup(
    run_id: str | None = None, backends: tuple[BackendName, ...] = BACKENDS
) -> dict[str, list[str]]:
    """Remove what crashed runs left behind, per backend (skipping unavailable ones)."""
    removed: dict[str, list[str]] = {}
    for name in backends:
        try:
            removed[name] = backend_class(name).cleanup(run_id)
        except (SandboxError, FileNotFoundError):
            removed[name] = []
    return removed


__all__ = [
    "BACKENDS",
    "TOOLBOX",
    "BackendName",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxDied",
    "SandboxError",
    "VerifyResult",
    "backend_class",
    "cleanup",
    "default_backend",
    "open_sandbox",
    "reward_from_files",
]
