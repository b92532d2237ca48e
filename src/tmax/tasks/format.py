"""Read, write and validate task directories in the Harbor layout.

The layout is the one Terminal-Bench 2.0 ships and Harbor runs::

    <task>/
      task.toml                 limits, timeouts, network policy, metadata
      instruction.md            what the agent is asked
      environment/Dockerfile    (+ files it copies)   — or docker-compose.yaml
      tests/test.sh             (+ test files) writes /logs/verifier/reward.{txt,json}
      solution/solve.sh         optional reference solution (the oracle agent)
      tmax.json                 ours: the spec's 9 axes and generation metadata

Unknown ``task.toml`` keys are kept on a round trip (Harbor grows new ones); known
keys are type-checked, and every error names the file and the field.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from tmax.taxonomy.sampler import AXES, TaskSpec

TMAX_FORMAT = "tmax-task/1"
NETWORK_MODES = ("public", "no-network", "allowlist")


class TaskFormatError(ValueError):
    """A task directory that does not follow the layout; names the file and field."""


# Typed fields of task.toml, per table: name -> (accepted types, default).
_NUMBER = (int, float)
_TABLES: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "task": {
        "name": ((str,), None),
        "description": ((str,), ""),
        "authors": ((list,), []),
        "keywords": ((list,), []),
    },
    "verifier": {
        "timeout_sec": (_NUMBER, 600.0),
        "env": ((dict,), {}),
        "user": ((str, int), None),
    },
    "agent": {
        "timeout_sec": (_NUMBER, None),
        "user": ((str, int), None),
    },
    "environment": {
        "build_timeout_sec": (_NUMBER, 600.0),
        "docker_image": ((str,), None),
        "cpus": ((int,), 1),
        "memory_mb": ((int,), 2048),
        "storage_mb": ((int,), 10240),
        "gpus": ((int,), 0),
        "allow_internet": ((bool,), True),
        "network_mode": ((str,), None),
        "allowed_hosts": ((list,), []),
        "env": ((dict,), {}),
        "workdir": ((str,), None),
    },
    "solution": {"env": ((dict,), {})},
}


def _parse_size_mb(value: str, where: str) -> int:
    text = value.strip().upper()
    factors = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not text or text[-1] not in factors:
        raise TaskFormatError(f"{where}: size {value!r} must end in G, M or K (e.g. '2G')")
    try:
        return int(float(text[:-1]) * factors[text[-1]])
    except ValueError:
        raise TaskFormatError(f"{where}: size {value!r} is not a number with a unit") from None


_TEST_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*\.py")


def pytest_verdict_files(value: Any, source: str) -> tuple[str, ...]:
    """Validate ``[metadata] pytest_verdict``: a test file below ``tests/`` or a list."""
    files = [value] if isinstance(value, str) else value
    if not isinstance(files, list) or not all(
        isinstance(name, str) and _TEST_FILE.fullmatch(name) for name in files
    ):
        raise TaskFormatError(
            f"{source}: [metadata].pytest_verdict must list .py files below tests/, got {value!r}"
        )
    return tuple(files)


@dataclass
class TaskConfig:
    """``task.toml``: the typed tables plus whatever else the file holds."""

    schema_version: str = "1.1"
    task: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    verifier: dict[str, Any] = field(default_factory=dict)
    agent: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    solution: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, table: str, key: str) -> Any:
        """A typed field, or its Harbor default when the file leaves it out."""
        return getattr(self, table).get(key, _TABLES[table][key][1])

    @property
    def memory_mb(self) -> int:
        return int(self.get("environment", "memory_mb"))

    @property
    def cpus(self) -> int:
        return int(self.get("environment", "cpus"))

    @property
    def network_mode(self) -> str:
        """public / no-network / allowlist, resolving the older ``allow_internet`` flag."""
        mode = self.get("environment", "network_mode")
        if mode is not None:
            return str(mode)
        return "public" if self.get("environment", "allow_internet") else "no-network"

    @classmethod
    def parse(cls, text: str, source: str = "task.toml") -> TaskConfig:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise TaskFormatError(f"{source}: not valid TOML: {error}") from None
        version = data.pop("schema_version", data.pop("version", "1.1"))
        config = cls(schema_version=str(version))
        for table, fields in _TABLES.items():
            body = data.pop(table, {})
            if not isinstance(body, dict):
                raise TaskFormatError(f"{source}: [{table}] must be a table, got {body!r}")
            if table == "environment":
                for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
                    if old in body:
                        size = body.pop(old)
                        if not isinstance(size, str):
                            raise TaskFormatError(
                                f"{source}: [environment].{old} must be a size string like '2G'"
                            )
                        body.setdefault(new, _parse_size_mb(size, f"{source}: [environment].{old}"))
            for key, value in body.items():
                if key not in fields:
                    continue
                types = fields[key][0]
                wrong_bool = isinstance(value, bool) and bool not in types
                if not isinstance(value, types) or wrong_bool:
                    names = " or ".join(t.__name__ for t in types)
                    raise TaskFormatError(
                        f"{source}: [{table}].{key} must be {names}, got {value!r}"
                    )
            setattr(config, table, dict(body))
        metadata = data.pop("metadata", {})
        if not isinstance(metadata, dict):
            raise TaskFormatError(f"{source}: [metadata] must be a table")
        config.metadata = metadata
        config.extra = data
        config._check(source)
        return config

    @property
    def pytest_verdict(self) -> tuple[str, ...]:
        """``[metadata] pytest_verdict``: test files (below ``tests/``) whose pytest exit
        status is the reward, read by the verifier itself (empty: Harbor's reward file)."""
        return pytest_verdict_files(self.metadata.get("pytest_verdict", []), "task.toml")

    def _check(self, source: str) -> None:
        pytest_verdict_files(self.metadata.get("pytest_verdict", []), source)
        env = self.environment
        for key in ("cpus", "memory_mb", "storage_mb"):
            if key in env and env[key] <= 0:
                raise TaskFormatError(f"{source}: [environment].{key} must be > 0, got {env[key]}")
        for table in ("verifier", "agent"):
            timeout = getattr(self, table).get("timeout_sec")
            if timeout is not None and timeout <= 0:
                raise TaskFormatError(f"{source}: [{table}].timeout_sec must be > 0, got {timeout}")
        mode = env.get("network_mode")
        if mode is not None and mode not in NETWORK_MODES:
            raise TaskFormatError(
                f"{source}: [environment].network_mode must be one of {', '.join(NETWORK_MODES)}, "
                f"got {mode!r}"
            )
        name = self.task.get("name")
        if name is not None and name.count("/") != 1:
            raise TaskFormatError(f"{source}: [task].name must look like 'org/name', got {name!r}")

    def dumps(self) -> str:
        data: dict[str, Any] = {"schema_version": self.schema_version}
        for table in ("task", "metadata", "verifier", "agent", "environment", "solution"):
            body = getattr(self, table)
            if body:
                data[table] = body
        data.update(self.extra)
        return tomli_w.dumps(data)


@dataclass
class TaskMeta:
    """``tmax.json``: the spec this task was made from and how it was made.

    A task converted from a prior dataset (:mod:`tmax.datasets`) has no spec: it
    carries a ``source`` block instead (dataset, layout, original id, revision), no
    ``spec_id``, and its axes are null until a labeller fills some of them in.
    """

    spec_id: str | None
    axes: dict[str, Any]
    generator: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] | None = None

    @classmethod
    def from_spec(cls, spec: TaskSpec, **generator: Any) -> TaskMeta:
        return cls(spec_id=spec.spec_id, axes=spec.axes(), generator=dict(generator))

    @classmethod
    def from_source(cls, **source: Any) -> TaskMeta:
        """The metadata of a task converted from a prior dataset (axes unlabelled)."""
        return cls(spec_id=None, axes={}, source=dict(source))

    @classmethod
    def parse(cls, text: str, source: str = "tmax.json") -> TaskMeta:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise TaskFormatError(f"{source}: not valid JSON: {error}") from None
        if not isinstance(data, dict):
            raise TaskFormatError(f"{source}: expected a JSON object")
        if data.get("format") != TMAX_FORMAT:
            raise TaskFormatError(
                f"{source}: 'format' must be {TMAX_FORMAT!r}, got {data.get('format')!r}"
            )
        origin = data.get("source")
        if origin is not None:
            return cls._parse_converted(data, origin, source)
        if not isinstance(data.get("spec_id"), str) or not data["spec_id"]:
            raise TaskFormatError(f"{source}: 'spec_id' must be a non-empty string")
        axes = data.get("axes")
        if not isinstance(axes, dict):
            raise TaskFormatError(f"{source}: 'axes' must be an object with the 9 axes")
        missing = [axis for axis in AXES if axis not in axes]
        if missing:
            raise TaskFormatError(f"{source}: 'axes' is missing {', '.join(missing)}")
        for axis in AXES:
            _check_axis(axis, axes[axis], source)
        generator = data.get("generator", {})
        if not isinstance(generator, dict):
            raise TaskFormatError(f"{source}: 'generator' must be an object")
        return cls(spec_id=data["spec_id"], axes=axes, generator=generator)

    @classmethod
    def _parse_converted(cls, data: dict[str, Any], origin: Any, source: str) -> TaskMeta:
        """A prior dataset's task: a ``source`` block, axes null or partly labelled."""
        if not isinstance(origin, dict):
            raise TaskFormatError(f"{source}: 'source' must be an object")
        for key in ("dataset", "layout", "original_id"):
            if not isinstance(origin.get(key), str) or not origin[key]:
                raise TaskFormatError(f"{source}: 'source.{key}' must be a non-empty string")
        spec_id = data.get("spec_id")
        if spec_id is not None and (not isinstance(spec_id, str) or not spec_id):
            raise TaskFormatError(f"{source}: 'spec_id' must be a non-empty string or absent")
        axes = data.get("axes") or {}
        if not isinstance(axes, dict):
            raise TaskFormatError(f"{source}: 'axes' must be an object or null")
        for axis, value in axes.items():
            if axis not in AXES:
                raise TaskFormatError(f"{source}: 'axes.{axis}' is not one of the 9 axes")
            if value is not None:
                _check_axis(axis, value, source)
        generator = data.get("generator", {})
        if not isinstance(generator, dict):
            raise TaskFormatError(f"{source}: 'generator' must be an object")
        return cls(spec_id=spec_id, axes=axes, generator=generator, source=origin)

    def dumps(self) -> str:
        data: dict[str, Any] = {"format": TMAX_FORMAT}
        if self.source is None or self.spec_id is not None:
            data["spec_id"] = self.spec_id
        data["axes"] = self.axes if (self.axes or self.source is None) else None
        data["generator"] = self.generator
        if self.source is not None:
            data["source"] = self.source
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _check_axis(axis: str, value: Any, source: str) -> None:
    if axis == "primitive_skills":
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise TaskFormatError(f"{source}: 'axes.primitive_skills' must be a list of strings")
    elif not isinstance(value, str):
        raise TaskFormatError(f"{source}: 'axes.{axis}' must be a string, got {value!r}")


@dataclass
class TaskFile:
    data: bytes
    executable: bool = False


@dataclass
class Task:
    """A task held in memory: what the directory contains, parsed and checked."""

    name: str
    instruction: str
    config: TaskConfig
    environment: dict[str, TaskFile]
    tests: dict[str, TaskFile]
    solution: dict[str, TaskFile] | None = None
    meta: TaskMeta | None = None

    def validate(self, source: str | None = None) -> None:
        where = source or self.name
        if not self.instruction.strip():
            raise TaskFormatError(f"{where}/instruction.md: the instruction is empty")
        has_image = self.config.get("environment", "docker_image") is not None
        if not ({"Dockerfile", "docker-compose.yaml"} & set(self.environment) or has_image):
            raise TaskFormatError(
                f"{where}/environment/Dockerfile: missing (and task.toml sets no "
                "[environment].docker_image)"
            )
        if "test.sh" not in self.tests:
            raise TaskFormatError(f"{where}/tests/test.sh: missing (the verifier's entry point)")
        if self.solution is not None and "solve.sh" not in self.solution:
            raise TaskFormatError(f"{where}/solution/solve.sh: missing (solution/ exists)")
        for group, files in (("environment", self.environment), ("tests", self.tests)):
            for rel in files:
                if rel.startswith("/") or ".." in Path(rel).parts:
                    raise TaskFormatError(f"{where}/{group}/{rel}: path escapes the task directory")


def _read_tree(root: Path) -> dict[str, TaskFile]:
    files: dict[str, TaskFile] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise TaskFormatError(f"{path}: symbolic links are not allowed in a task")
        if path.is_file():
            executable = bool(path.stat().st_mode & 0o111)
            files[path.relative_to(root).as_posix()] = TaskFile(path.read_bytes(), executable)
    return files


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFormatError(f"{path}: missing") from None
    except UnicodeDecodeError:
        raise TaskFormatError(f"{path}: not UTF-8 text") from None


def read_task(path: str | Path) -> Task:
    """Read and validate a task directory; raises :class:`TaskFormatError`."""
    root = Path(path)
    if not root.is_dir():
        raise TaskFormatError(f"{root}: not a task directory")
    config = TaskConfig.parse(_read_text(root / "task.toml"), str(root / "task.toml"))
    meta_path = root / "tmax.json"
    meta = TaskMeta.parse(_read_text(meta_path), str(meta_path)) if meta_path.exists() else None
    task = Task(
        name=root.name,
        instruction=_read_text(root / "instruction.md"),
        config=config,
        environment=_read_tree(root / "environment"),
        tests=_read_tree(root / "tests"),
        solution=_read_tree(root / "solution") if (root / "solution").is_dir() else None,
        meta=meta,
    )
    task.validate(str(root))
    return task


def _write_tree(root: Path, files: Mapping[str, TaskFile]) -> None:
    made: set[Path] = set()
    for rel, entry in files.items():
        target = root / rel
        if target.parent not in made:  # one mkdir per directory, not per file
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        mode = 0o755 if entry.executable else 0o644
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(entry.data)
        if entry.executable:
            os.chmod(target, mode)  # the umask may have cleared x bits


def write_task(task: Task, parent: str | Path) -> Path:
    """Write ``task`` as ``parent/<task.name>``, atomically replacing an older copy."""
    task.validate()
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    target = parent / task.name
    staging = Path(tempfile.mkdtemp(prefix=f".{task.name}.", dir=parent))
    try:
        (staging / "task.toml").write_text(task.config.dumps(), encoding="utf-8")
        (staging / "instruction.md").write_text(task.instruction, encoding="utf-8")
        _write_tree(staging / "environment", task.environment)
        _write_tree(staging / "tests", task.tests)
        if task.solution is not None:
            _write_tree(staging / "solution", task.solution)
        if task.meta is not None:
            (staging / "tmax.json").write_text(task.meta.dumps(), encoding="utf-8")
        staging.chmod(0o755)
        if target.exists():
            old = parent / f".{task.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(target, old)
            os.replace(staging, target)
            shutil.rmtree(old)
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
