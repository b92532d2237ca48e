"""A task's whole life in a sandbox: build its image, start, act, verify.

``sandbox_for_task`` turns a Harbor task directory into a ready sandbox on any
backend; ``run_episode`` plays a fixed list of commands (an oracle, a no-op, a
test's attack) and scores it. The agent harnesses (tmax.harness) drive the same
sandbox turn by turn and end episodes by the same rules.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tmax.sandbox import open_sandbox
from tmax.sandbox.base import (
    ExecResult,
    Limits,
    NodeError,
    Sandbox,
    SandboxDied,
    SandboxError,
    VerifyResult,
)
from tmax.sandbox.images import (
    ImageError,
    build_podman_image,
    definitions_dir,
    domain_definition,
    domain_image,
    ensure_podman_base,
    podman_image_config,
    rootfs_config,
    rootfs_from_podman,
)
from tmax.sandbox.toolbox import ensure_toolbox
from tmax.tasks import Task, read_task

_T = TypeVar("_T")

log = logging.getLogger("tmax.sandbox.episode")


_toolbox: Path | None = None


def _cached_toolbox() -> Path:
    """The toolbox, looked up once per process (finding its content key runs ldd)."""
    global _toolbox
    if _toolbox is None or not _toolbox.is_dir():
        _toolbox = ensure_toolbox()
    return _toolbox


_domain_images: dict[str, str] = {}


def _cached_domain_image(domain: str) -> str:
    if domain not in _domain_images:
        _domain_images[domain] = domain_image(domain)
    return _domain_images[domain]


_domain_rootfs: dict[str, Path] = {}


def _cached_domain_rootfs(domain: str) -> Path:
    """A domain base's exported root file system, looked up once per process."""
    rootfs = _domain_rootfs.get(domain)
    if rootfs is None or not rootfs.is_dir():
        rootfs = _domain_rootfs[domain] = rootfs_from_podman(_cached_domain_image(domain))
    return rootfs


def task_image(task_dir: Path, task: Task) -> str:
    """The podman image of a task: its prebuilt ``docker_image`` or a build of
    ``environment/`` (cached by content hash)."""
    prebuilt = task.config.get("environment", "docker_image")
    if prebuilt:
        ensure_podman_base()  # our tasks' prebuilt name is the local base
        return str(prebuilt)
    return build_podman_image(task_dir / "environment", "tmax-task")


def dockerfile_instructions(text: str) -> list[str]:
    """A Dockerfile's instructions, continuation lines joined, comments dropped."""
    instructions: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        instructions.append(" ".join((pending + line).split()))
        pending = ""
    if pending:
        instructions.append(" ".join(pending.split()))
    return instructions


@dataclass(frozen=True)
class LayeredImage:
    """A task image seen as a domain base plus simple steps (COPY, RUN, WORKDIR, ENV),
    which bwrap can apply at start instead of building an image."""

    domain: str
    steps: tuple[str, ...]


_SIMPLE = ("COPY ", "RUN ", "WORKDIR ", "ENV ")


def layered_image(task_dir: Path) -> LayeredImage | None:
    """Match a task's Dockerfile against the domain definitions (None: no match)."""
    dockerfile = task_dir / "environment" / "Dockerfile"
    if not dockerfile.exists():
        return None
    task_steps = dockerfile_instructions(dockerfile.read_text())
    for definition in sorted(definitions_dir().glob("*/Dockerfile")):
        base = dockerfile_instructions(definition.read_text())
        if task_steps[: len(base)] == base:
            rest = task_steps[len(base) :]
            if all(step.startswith(_SIMPLE) for step in rest):
                return LayeredImage(definition.parent.name, tuple(rest))
    return None


def _domain_base(build: Callable[[str], _T], domain: str) -> _T:
    """A domain's base image; one that will not build is the machine's problem (the
    definitions are ours), not the task's: NodeError."""
    try:
        return build(domain)
    except ImageError as error:
        raise NodeError(f"the {domain} base image cannot be built here: {error}") from error


def _fold_steps(
    steps: Sequence[str], env: dict[str, str], workdir: str
) -> tuple[dict[str, str], str]:
    """The environment and working directory after ``steps``' ENV and WORKDIR."""
    env = dict(env)
    for step in steps:
        keyword, _, argument = step.partition(" ")
        if keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, argument.strip()))
        elif keyword == "ENV":
            for pair in argument.split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env, workdir


def _apply_steps(task_dir: Path, steps: Sequence[str]) -> Callable[[Sandbox], None]:
    """An on-start hook that performs COPY/RUN steps inside a started sandbox."""

    def apply(box: Sandbox) -> None:
        for step in steps:
            keyword, _, argument = step.partition(" ")
            if keyword == "COPY":
                *sources, destination = argument.split()
                for source in sources:
                    box.upload(task_dir / "environment" / source.rstrip("/"), destination)
            elif keyword == "RUN":
                result = box.run(argument, timeout=600)
                if result.exit_code != 0:
                    raise SandboxError(f"image step failed: {step}\n{result.output[-2000:]}")

    return apply


def sandbox_for_task(
    task_dir: str | Path,
    backend: str = "podman",
    *,
    toolbox: Path | None = None,
    run_id: str | None = None,
    preflight: bool = True,
    **limit_overrides: Any,
) -> Sandbox:
    """A (not yet started) sandbox for a task directory, with the task's limits.

    On Apptainer the node is checked first, once (``preflight``: see preflight.py)."""
    task_dir = Path(task_dir)
    task = read_task(task_dir)
    limits = Limits.from_task(task, **limit_overrides)
    toolbox = toolbox or _cached_toolbox()
    common = {"toolbox": toolbox, "run_id": run_id, "name": task.name}
    if backend == "podman":
        image = task_image(task_dir, task)
        _, workdir = podman_image_config(image)
        return open_sandbox("podman", image, limits, workdir=workdir, **common)
    if backend == "bwrap":
        layered = layered_image(task_dir)
        if layered is None:  # anything else: build the image, use its file system
            rootfs = rootfs_from_podman(task_image(task_dir, task))
            env, workdir = rootfs_config(rootfs)
            return open_sandbox("bwrap", rootfs, limits, env=env, workdir=workdir, **common)
        rootfs = _domain_base(_cached_domain_rootfs, layered.domain)
        env, workdir = _fold_steps(layered.steps, *rootfs_config(rootfs))
        box = open_sandbox("bwrap", rootfs, limits, env=env, workdir=workdir, **common)
        box.on_start.append(_apply_steps(task_dir, layered.steps))
        return box
    if backend == "apptainer":
        from tmax.sandbox.apptainer import domain_sif, task_sif
        from tmax.sandbox.preflight import ensure_preflight

        if preflight:
            ensure_preflight(backend)

        prebuilt = task.config.get("environment", "docker_image")
        layered = None if prebuilt else layered_image(task_dir)
        if prebuilt:  # its WORKDIR is not known without pulling it: the session's default
            return open_sandbox("apptainer", f"docker://{prebuilt}", limits, **common)
        if layered is None:  # a Dockerfile of its own: a SIF of its own (ENV is in it)
            dockerfile = task_dir / "environment" / "Dockerfile"
            _, workdir = _fold_steps(dockerfile_instructions(dockerfile.read_text()), {}, "/")
            image = str(task_sif(task_dir, task.name))
            return open_sandbox("apptainer", image, limits, workdir=workdir, **common)
        # The domain's SIF (built once, in the images stage) plus the task's steps at
        # start, as bwrap does: no per-task build, no registry on the compute node.
        base_steps = dockerfile_instructions(domain_definition(layered.domain).read_text())
        _, workdir = _fold_steps(base_steps, {}, "/")  # the base's ENV is in the SIF
        env, workdir = _fold_steps(layered.steps, {}, workdir)
        image = str(_domain_base(domain_sif, layered.domain))
        box = open_sandbox("apptainer", image, limits, env=env, workdir=workdir, **common)
        box.on_start.append(_apply_steps(task_dir, layered.steps))
        return box
    return open_sandbox(backend, "", limits, **common)  # raises: unknown backend


@dataclass
class EpisodeResult:
    """How an episode ended: the reward, and why it is 0 when something broke."""

    reward: float
    reason: str | None = None
    steps: list[ExecResult] = field(default_factory=list)
    verification: VerifyResult | None = None


def run_episode(sandbox: Sandbox, commands: Sequence[str], tests_dir: str | Path) -> EpisodeResult:
    """Run ``commands`` in order, then the verifier.

    An out-of-memory kill or a dead sandbox ends the episode at once with reward 0
    and the reason, as in the paper's RL environment (a sandbox OOM scores 0).
    """
    steps: list[ExecResult] = []
    for index, command in enumerate(commands):
        try:
            result = sandbox.run(command)
        except SandboxDied as error:
            return EpisodeResult(0.0, f"sandbox died during command {index + 1}: {error}", steps)
        steps.append(result)
        if result.oom_killed:
            reason = (
                f"out of memory: command {index + 1} was killed by the OOM killer "
                f"(limit {sandbox.limits.memory_mb} MB)"
            )
            log.info("%s: %s", sandbox.sandbox_id, reason)
            return EpisodeResult(0.0, reason, steps)
    verification = sandbox.verify(tests_dir)
    return EpisodeResult(verification.reward, verification.reason, steps, verification)
