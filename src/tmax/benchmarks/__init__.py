"""Benchmarks as task sets: every benchmark the paper evaluates on (§4) becomes a sorted
list of Harbor task directories, with a domain label per task for per-domain metrics.

- Terminal-Bench 2.0 and OpenThoughts-TBLite are Harbor task repositories: they are
  fetched at one pinned commit (:func:`harbor_git`) or read from a local directory
  (:func:`harbor_directory`).
- SWE-bench Verified and AIME 2024/25 are Hugging Face datasets: each instance or
  problem is converted into a Harbor task (:func:`swe_bench_tasks`, :func:`aime_tasks`),
  so one runner and one set of harnesses evaluate everything.
- The held-out split of our own generated tasks is read from ``results/tasks``
  (:func:`heldout`).

Where each benchmark comes from is data (``data/benchmarks.yaml``);
:func:`resolve_benchmark` dispatches on it, and a config can override the source of
any entry. Every failure is a :class:`BenchmarkError` naming the benchmark or task and
what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from string import Template
from types import MappingProxyType
from typing import Any

import yaml
from rich.progress import track

from tmax.io import cache_dir, file_lock
from tmax.sandbox.episode import dockerfile_instructions
from tmax.sandbox.images import definitions_dir
from tmax.tasks import Task, TaskConfig, TaskFile, TaskFormatError, read_task, write_task

log = logging.getLogger("tmax.benchmarks")

DATA_DIR = Path(__file__).parent / "data"
KINDS = ("harbor_git", "swe_bench", "aime", "heldout")
UNKNOWN_DOMAIN = "unknown"
GIT_TIMEOUT_SEC = 3600


class BenchmarkError(ValueError):
    """A benchmark that cannot be resolved; the message names the benchmark or task and
    what is wrong."""


@dataclass(frozen=True)
class TaskSet:
    """A benchmark resolved into Harbor task directories.

    ``tasks`` are sorted by task name (the directory name); ``source`` says where they
    came from (a path, ``url@commit``, ``dataset@revision``); ``domains`` maps each task
    name to the label its per-domain metrics are grouped under.
    """

    name: str
    tasks: tuple[Path, ...]
    source: str
    domains: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", MappingProxyType(dict(self.domains)))

    @property
    def names(self) -> tuple[str, ...]:
        """The task names, in order."""
        return tuple(path.name for path in self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)


# --- data files -------------------------------------------------------------------------


@cache
def _data(name: str) -> Any:
    return yaml.safe_load((DATA_DIR / name).read_text(encoding="utf-8"))


def load_registry() -> dict[str, dict[str, Any]]:
    """The benchmark registry (``data/benchmarks.yaml``): name -> entry with a ``kind``."""
    registry = _data("benchmarks.yaml")
    for name, entry in registry.items():
        if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
            raise BenchmarkError(
                f"data/benchmarks.yaml: {name}: 'kind' must be one of {', '.join(KINDS)}"
            )
    return registry


def known_benchmarks() -> tuple[str, ...]:
    """The names :func:`resolve_benchmark` accepts."""
    return tuple(sorted(load_registry()))


def _template(name: str) -> str:
    return (DATA_DIR / name).read_text(encoding="utf-8")


def _script(name: str, **values: str) -> str:
    """A shell script from ``data/task_scripts.yaml`` with its ``@NAME@`` marks filled."""
    text: str = _data("task_scripts.yaml")[name]
    for key, value in values.items():
        text = text.replace(f"@{key.upper()}@", value)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise BenchmarkError(f"data/task_scripts.yaml: {name}: unfilled {', '.join(left)}")
    return text


# --- Harbor task directories ------------------------------------------------------------


def task_domain(task: Task) -> str:
    """The domain label of a task: ``tmax.json``'s domain for our tasks, else
    ``[metadata].category`` of ``task.toml``, else ``"unknown"``."""
    if task.meta is not None and isinstance(task.meta.axes.get("domain"), str):
        return task.meta.axes["domain"]
    category = task.config.metadata.get("category")
    if isinstance(category, str) and category.strip():
        return category.strip()
    return UNKNOWN_DOMAIN


def _looks_like_task(path: Path) -> bool:
    return path.is_dir() and ((path / "task.toml").is_file() or (path / "instruction.md").is_file())


def _visible_dirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def _find_task_dirs(root: Path) -> list[Path]:
    """Task directories directly under ``root``; if there are none, one level further
    down (repositories that keep tasks under ``tasks/``, or our shards)."""
    found = [child for child in _visible_dirs(root) if _looks_like_task(child)]
    if found:
        return found
    return [
        grandchild
        for child in _visible_dirs(root)
        for grandchild in _visible_dirs(child)
        if _looks_like_task(grandchild)
    ]


def _task_set(name: str, task_dirs: Sequence[Path], source: str) -> TaskSet:
    """Read and validate every task; sort by task name; label domains."""
    by_name: dict[str, Path] = {}
    domains: dict[str, str] = {}
    for task_dir in track(task_dirs, description=f"reading {name}", disable=len(task_dirs) < 50):
        try:
            task = read_task(task_dir)
        except TaskFormatError as error:
            raise BenchmarkError(f"{name}: task {task_dir.name} is malformed: {error}") from None
        if task.name in by_name:
            raise BenchmarkError(
                f"{name}: two tasks are named {task.name!r}: {by_name[task.name]} and {task_dir}"
            )
        by_name[task.name] = task_dir
        domains[task.name] = task_domain(task)
    order = sorted(by_name)
    log.info("%s: %d task(s) from %s", name, len(order), source)
    return TaskSet(name, tuple(by_name[n] for n in order), source, {n: domains[n] for n in order})


def harbor_directory(path: Path, name: str | None = None) -> TaskSet:
    """Every Harbor task directory in ``path`` (a subdirectory with ``task.toml`` and
    ``instruction.md``; one level further down when ``path`` has none itself).

    Each task is validated with :func:`tmax.tasks.read_task`; a malformed task or an
    empty directory raises :class:`BenchmarkError`.
    """
    path = Path(path)
    name = name or path.name
    if not path.is_dir():
        raise BenchmarkError(f"{name}: {path} is not a directory of Harbor tasks")
    task_dirs = _find_task_dirs(path)
    if not task_dirs:
        raise BenchmarkError(
            f"{name}: no tasks in {path} (expected subdirectories with task.toml and "
            "instruction.md)"
        )
    return _task_set(name, task_dirs, str(path.resolve()))


# --- Harbor task repositories at a pinned commit ----------------------------------------


def _tail(text: str, lines: int = 6) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-1200:] or "(no output)"


def _git(args: Sequence[str], cwd: Path, label: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # fail, never ask for credentials
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SEC,
        )
    except FileNotFoundError:
        raise BenchmarkError(f"{label}: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise BenchmarkError(
            f"{label}: 'git {args[0]}' took longer than {GIT_TIMEOUT_SEC}s"
        ) from None


def _head(checkout: Path, label: str) -> str | None:
    if not (checkout / ".git").exists():
        return None
    result = _git(["rev-parse", "HEAD"], checkout, label)
    return result.stdout.strip() if result.returncode == 0 else None


def _fetch_commit(url: str, commit: str, staging: Path, label: str) -> str:
    """Fetch ``commit`` of ``url`` into the empty repository ``staging``, check it out,
    and return its full sha."""
    for args in (["init", "--quiet"], ["remote", "add", "origin", url]):
        result = _git(args, staging, label)
        if result.returncode != 0:
            raise BenchmarkError(f"{label}: git {args[0]} failed: {_tail(result.stderr)}")
    target = "FETCH_HEAD"
    shallow = None
    if len(commit) == 40:  # only a full sha can be fetched by itself
        shallow = _git(["fetch", "--quiet", "--depth", "1", "origin", commit], staging, label)
    if shallow is None or shallow.returncode != 0:
        # The server refuses fetching by sha (or we have a prefix): take every branch
        # and tag, then look the commit up.
        full = _git(
            ["fetch", "--quiet", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"],
            staging,
            label,
        )
        if full.returncode != 0:
            raise BenchmarkError(f"{label}: cannot fetch {url}: {_tail(full.stderr)}")
        resolved = _git(
            ["rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], staging, label
        )
        if resolved.returncode != 0:
            detail = _tail(resolved.stderr) if resolved.stderr.strip() else "no such commit"
            raise BenchmarkError(f"{label}: commit {commit} is not in {url} ({detail})")
        target = resolved.stdout.strip()
    checkout = _git(
        ["-c", "advice.detachedHead=false", "checkout", "--quiet", target], staging, label
    )
    if checkout.returncode != 0:
        raise BenchmarkError(f"{label}: cannot check out {commit}: {_tail(checkout.stderr)}")
    head = _head(staging, label)
    if head is None or not head.startswith(commit.lower()):
        raise BenchmarkError(f"{label}: checked out {head}, not the requested commit {commit}")
    return head


def harbor_git(
    url: str,
    commit: str,
    *,
    subdir: str | None = None,
    cache: Path | None = None,
    name: str | None = None,
) -> TaskSet:
    """The Harbor tasks of a git repository at exactly ``commit``.

    The checkout lives in ``cache_dir()/benchmarks/<sha256(url + commit)[:16]>`` (or under
    ``cache``), is made once under a file lock (shallow fetch of the commit, or a full
    fetch where the server refuses that), written to a temporary directory and renamed,
    and its HEAD is checked against ``commit`` (a full sha, or a unique prefix).
    ``subdir`` is where the tasks are inside the repository.
    """
    label = name or url.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]
    commit = commit.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{4,40}", commit):
        raise BenchmarkError(f"{label}: commit {commit!r} is not a hexadecimal git sha")
    parent = Path(cache) if cache is not None else cache_dir() / "benchmarks"
    parent.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256((url + commit).encode()).hexdigest()[:16]
    checkout = parent / key
    with file_lock(parent / f".{key}.lock"):
        head = _head(checkout, label)
        if head is None or not head.startswith(commit):
            if checkout.exists():  # left by an interrupted or foreign copy
                shutil.rmtree(checkout)
            staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=parent))
            try:
                log.info("%s: fetching %s at %s", label, url, commit)
                head = _fetch_commit(url, commit, staging, label)
                os.replace(staging, checkout)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    tasks_root = checkout / subdir if subdir else checkout
    if not tasks_root.is_dir():
        raise BenchmarkError(f"{label}: {url}@{head} has no directory {subdir!r}")
    task_set = harbor_directory(tasks_root, label)
    source = f"{url}@{head}" + (f":{subdir}" if subdir else "")
    return replace(task_set, source=source)


# --- writing converted tasks ------------------------------------------------------------


def _expected_files(task: Task) -> dict[str, tuple[bytes, bool]]:
    """The files :func:`write_task` writes for ``task``: path -> (bytes, executable)."""
    files = {
        "task.toml": (task.config.dumps().encode(), False),
        "instruction.md": (task.instruction.encode(), False),
    }
    groups = (("environment", task.environment), ("tests", task.tests))
    for group, entries in (*groups, ("solution", task.solution or {})):
        for rel, entry in entries.items():
            files[f"{group}/{rel}"] = (entry.data, entry.executable)
    if task.meta is not None:
        files["tmax.json"] = (task.meta.dumps().encode(), False)
    return files


def _files_on_disk(root: Path) -> dict[str, tuple[bytes, bool]]:
    return {
        path.relative_to(root).as_posix(): (path.read_bytes(), bool(path.stat().st_mode & 0o111))
        for path in root.rglob("*")
        if path.is_file()
    }


def _write_converted(name: str, tasks: Sequence[Task], dest: Path) -> list[Path]:
    """Write each task into ``dest`` unless an identical copy is already there."""
    dest.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    written = 0
    for task in track(tasks, description=f"writing {name}", disable=len(tasks) < 50):
        target = dest / task.name
        if not (target.is_dir() and _files_on_disk(target) == _expected_files(task)):
            write_task(task, dest)
            written += 1
        paths.append(target)
    log.info("%s: %d task(s) in %s, %d written, %d unchanged", name, len(tasks), dest,
             written, len(tasks) - written)  # fmt: skip
    return paths


def _text_file(text: str, executable: bool = False) -> TaskFile:
    return TaskFile(text.encode("utf-8"), executable)


def _converted_set(name: str, tasks: Sequence[Task], dest: Path, source: str) -> TaskSet:
    names = [task.name for task in tasks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BenchmarkError(f"{name}: duplicate task names: {', '.join(duplicates[:5])}")
    if not tasks:
        raise BenchmarkError(f"{name}: nothing to convert (no instances or problems)")
    paths = _write_converted(name, tasks, Path(dest))
    domains = {task.name: str(task.config.metadata["category"]) for task in tasks}
    order = sorted(range(len(tasks)), key=lambda i: names[i])
    return TaskSet(
        name, tuple(paths[i] for i in order), source, {names[i]: domains[names[i]] for i in order}
    )


# --- Hugging Face datasets --------------------------------------------------------------

_FILE_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def _load_rows(
    label: str,
    dataset: str,
    *,
    split: str,
    revision: str | None,
    data_files: str | Path | Sequence[str | Path] | None,
) -> tuple[list[dict[str, Any]], str]:
    """Rows of a Hugging Face dataset (or of local files in one of its formats), and a
    description of where they came from."""
    try:
        import datasets
    except ImportError:
        raise BenchmarkError(
            f"{label}: loading {dataset} needs the 'datasets' package (pip install datasets)"
        ) from None
    try:
        if data_files is not None:
            files = [data_files] if isinstance(data_files, str | Path) else list(data_files)
            paths = [Path(f) for f in files]
            missing = [str(p) for p in paths if not p.is_file()]
            if missing or not paths:
                raise BenchmarkError(f"{label}: data file(s) not found: {', '.join(missing)}")
            suffixes = {p.suffix.lower() for p in paths}
            builders = {_FILE_BUILDERS.get(s) for s in suffixes}
            if len(builders) != 1 or None in builders:
                raise BenchmarkError(
                    f"{label}: data files must all be one of {', '.join(_FILE_BUILDERS)}, "
                    f"got {', '.join(sorted(suffixes))}"
                )
            loaded = datasets.load_dataset(
                builders.pop(),
                data_files={split: [str(p) for p in paths]},
                split=split,
                cache_dir=str(cache_dir() / "hf-datasets"),
            )
            source = ", ".join(str(p.resolve()) for p in paths)
        else:
            loaded = datasets.load_dataset(dataset, split=split, revision=revision)
            source = f"{dataset}@{revision or 'main'}"
    except BenchmarkError:
        raise
    except Exception as error:  # datasets raises many kinds (network, format, missing)
        where = f"{dataset}@{revision or 'main'} split {split!r}"
        raise BenchmarkError(f"{label}: cannot load {where}: {error}") from error
    return [dict(row) for row in loaded], source


# --- SWE-bench Verified -----------------------------------------------------------------

SWE_BENCH_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
)


def swe_bench_image(instance_id: str) -> str:
    """The SWE-bench harness's public evaluation image of an instance.

    Docker Hub names allow no double underscore, so the harness writes ``__`` as
    ``_1776_``: ``django__django-11099`` -> ``swebench/sweb.eval.x86_64.django_1776_django-11099``.
    """
    return f"swebench/sweb.eval.x86_64.{instance_id.lower().replace('__', '_1776_')}:latest"


def swe_bench_repo_spec(repo: str, version: str) -> dict[str, Any]:
    """How ``repo`` at ``version`` runs its tests (``data/swe_bench_repos.yaml``)."""
    facts = _data("swe_bench_repos.yaml")
    if repo not in facts["repos"]:
        known = ", ".join(sorted(facts["repos"]))
        raise BenchmarkError(f"swe-bench: repository {repo!r} is not one of {known}")
    entry = dict(facts["repos"][repo])
    overrides = entry.pop("versions", {}) or {}
    spec = {**facts["defaults"], **entry, **overrides.get(version, {})}
    for key in ("test_cmd", "parser"):
        if not spec.get(key):
            raise BenchmarkError(f"data/swe_bench_repos.yaml: {repo}: '{key}' is missing")
    return spec


def _patch_files(patch: str) -> tuple[list[str], list[str]]:
    """Files a unified git diff touches: (files that exist before it, files it creates)."""
    existing: list[str] = []
    created: list[str] = []
    current: str | None = None
    new = False

    def close() -> None:
        if current is not None:
            (created if new else existing).append(current)

    for line in patch.splitlines():
        header = re.match(r"diff --git a/(.*) b/(.*)$", line)
        if header:
            close()
            current, new = header.group(2), False
        elif current is not None and (line.startswith("new file mode") or line == "--- /dev/null"):
            new = True
    close()
    return existing, created


def _test_directives(spec: Mapping[str, Any], files: Sequence[str]) -> list[str]:
    """What the test command is given: the test files of the patch (not data files),
    as paths or, for Django, as dotted module names relative to ``tests/``."""
    suffixes = tuple(spec.get("non_test_suffixes", ()))
    tests = [f for f in files if not f.endswith(suffixes)] if suffixes else list(files)
    if spec.get("directives") == "django_modules":
        modules = []
        for test in tests:
            test = test.removesuffix(".py").removeprefix("tests/")
            modules.append(test.replace("/", "."))
        return modules
    return tests


def _test_ids(value: Any, field_name: str, instance_id: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise BenchmarkError(
                f"swe-bench: {instance_id}: {field_name} is not a JSON list: {error}"
            ) from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise BenchmarkError(f"swe-bench: {instance_id}: {field_name} must be a list of test ids")
    return value


def swe_bench_task(instance: Mapping[str, Any]) -> Task:
    """One SWE-bench instance as a Harbor task (see :func:`swe_bench_tasks`)."""
    instance_id = str(instance.get("instance_id") or "<no instance_id>")
    missing = [f for f in SWE_BENCH_FIELDS if instance.get(f) in (None, "")]
    if missing:
        raise BenchmarkError(f"swe-bench: {instance_id}: missing field(s) {', '.join(missing)}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", instance_id):
        raise BenchmarkError(f"swe-bench: instance_id {instance_id!r} is not a usable task name")
    repo, base_commit = str(instance["repo"]), str(instance["base_commit"])
    version = str(instance["version"])
    spec = swe_bench_repo_spec(repo, version)
    fail_to_pass = _test_ids(instance["FAIL_TO_PASS"], "FAIL_TO_PASS", instance_id)
    pass_to_pass = _test_ids(instance["PASS_TO_PASS"], "PASS_TO_PASS", instance_id)
    test_patch = str(instance["test_patch"])
    existing, created = _patch_files(test_patch)
    if not existing and not created:
        raise BenchmarkError(f"swe-bench: {instance_id}: test_patch touches no files")
    directives = _test_directives(spec, existing + created)

    def quoted(items: Sequence[str]) -> str:
        return " ".join(shlex.quote(item) for item in items)

    reset = []
    if existing:
        reset.append(f"git checkout {shlex.quote(base_commit)} -- {quoted(existing)}")
    if created:
        reset.append(f"rm -f -- {quoted(created)}")
    test_sh = _script(
        "swe_bench_test_sh",
        instance_id=instance_id,
        setup="\n".join(spec.get("setup") or []) or ":",
        install=spec.get("install") or "true",
        reset_tests="\n".join(reset) or ":",
        test_cmd=f"{spec['test_cmd']} {quoted(directives)}".strip(),
    )
    grading = {
        "instance_id": instance_id,
        "repo": repo,
        "parser": spec["parser"],
        "fail_to_pass": fail_to_pass,
        "pass_to_pass": pass_to_pass,
    }
    tests = {
        "test.sh": _text_file(test_sh, executable=True),
        "test.patch": _text_file(test_patch if test_patch.endswith("\n") else test_patch + "\n"),
        "tests.json": _text_file(json.dumps(grading, indent=2, sort_keys=True) + "\n"),
        "swe_bench_grade.py": TaskFile((DATA_DIR / "swe_bench_grade.py").read_bytes()),
    }
    solution = None
    fix = instance.get("patch")
    if isinstance(fix, str) and fix.strip():
        solution = {
            "solve.sh": _text_file(_script("swe_bench_solve_sh"), executable=True),
            "fix.patch": _text_file(fix if fix.endswith("\n") else fix + "\n"),
        }
    dockerfile = (
        f"# SWE-bench Verified {instance_id}: the harness's evaluation image (the repository\n"
        f"# at its base commit in /testbed, conda environment 'testbed').\n"
        f"FROM {swe_bench_image(instance_id)}\n"
        "WORKDIR /testbed\n"
    )
    metadata = {
        "benchmark": "swe-bench-verified",
        "repo": repo,
        "instance_id": instance_id,
        "version": version,
        "base_commit": base_commit,
        "category": repo,
    }
    if instance.get("environment_setup_commit"):
        metadata["environment_setup_commit"] = str(instance["environment_setup_commit"])
    config = TaskConfig(
        task={
            "name": f"swe-bench-verified/{instance_id}",
            "description": f"SWE-bench Verified {instance_id}: resolve an issue of {repo}",
        },
        metadata=metadata,
        verifier={"timeout_sec": 1800.0},
        agent={"timeout_sec": 3000.0},
        environment={"build_timeout_sec": 1800.0, "cpus": 1, "memory_mb": 4096},
    )
    instruction = Template(_template("swe_bench_instruction.md")).substitute(
        repo=repo, problem_statement=str(instance["problem_statement"]).strip()
    )
    task = Task(
        name=instance_id,
        instruction=instruction,
        config=config,
        environment={"Dockerfile": _text_file(dockerfile)},
        tests=tests,
        solution=solution,
    )
    task.validate()
    return task


def swe_bench_tasks(
    instances: Iterable[Mapping[str, Any]],
    dest: Path,
    *,
    name: str = "swe-bench-verified",
    source: str | None = None,
) -> TaskSet:
    """Convert SWE-bench instances into Harbor tasks under ``dest``.

    Per instance: ``instruction.md`` is the issue behind a short preface of ours (the
    repository is at /testbed; fix the issue; leave the tests alone);
    ``environment/Dockerfile`` starts from the harness's public evaluation image;
    ``tests/test.sh`` restores and patches the tests (``tests/test.patch``), runs the
    repository's test command on the patched test files and writes reward 1 only if
    every FAIL_TO_PASS and PASS_TO_PASS test passed, judged by ``swe_bench_grade.py``
    from the log (per-repository commands and log formats:
    ``data/swe_bench_repos.yaml``). The upstream fix, when the instance has one, is the
    reference solution. Unchanged tasks are not rewritten.
    """
    tasks = [swe_bench_task(instance) for instance in instances]
    return _converted_set(name, tasks, Path(dest), source or f"SWE-bench instances in {dest}")


def swe_bench_verified(
    dest: Path,
    *,
    split: str = "test",
    revision: str | None = None,
    data_files: str | Path | Sequence[str | Path] | None = None,
    dataset: str | None = None,
) -> TaskSet:
    """SWE-bench Verified (``princeton-nlp/SWE-bench_Verified`` on the Hub, loaded with
    ``datasets.load_dataset``) converted into tasks under ``dest``. ``data_files``
    loads the same columns from local Parquet/JSONL files instead of the Hub."""
    entry = load_registry()["swe-bench-verified"]
    dataset = dataset or entry["dataset"]
    rows, source = _load_rows(
        "swe-bench-verified", dataset, split=split, revision=revision, data_files=data_files
    )
    return swe_bench_tasks(rows, dest, source=source)


# --- AIME -------------------------------------------------------------------------------


def _first_field(row: Mapping[str, Any], candidates: Sequence[str]) -> Any:
    for candidate in candidates:
        if candidate in row and row[candidate] not in (None, ""):
            return row[candidate]
    return None


def _aime_answer(value: Any, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not re.fullmatch(r"[0-9]+", text) or not 0 <= int(text) <= 999:
        raise BenchmarkError(f"{where}: answer {value!r} is not an integer from 0 to 999")
    return int(text)


def aime_dockerfile() -> str:
    """The base domain's image definition, verbatim (plus ``WORKDIR /app`` if the base
    lacks it): a known base plus simple steps, so the task runs on the sandbox's fast
    path. Every sandbox creates its working directory, so ``/app`` exists there too."""
    base = (definitions_dir() / "base" / "Dockerfile").read_text(encoding="utf-8")
    text = base if base.endswith("\n") else base + "\n"
    workdirs = [step for step in dockerfile_instructions(base) if step.startswith("WORKDIR ")]
    if not workdirs or workdirs[-1] != "WORKDIR /app":
        text += "WORKDIR /app\n"
    return text


def _aime_fields() -> dict[str, list[str]]:
    return load_registry()["aime"]["fields"]


def aime_task(problem: Mapping[str, Any], *, year: str, index: int) -> Task:
    """One AIME problem as a Harbor task (see :func:`aime_tasks`)."""
    fields = _aime_fields()
    where = f"aime-{year} problem {index + 1}"
    text = _first_field(problem, fields["problem"])
    if not isinstance(text, str) or not text.strip():
        raise BenchmarkError(
            f"{where}: no problem text (looked for {', '.join(fields['problem'])})"
        )
    raw_answer = _first_field(problem, fields["answer"])
    if raw_answer is None:
        raise BenchmarkError(f"{where}: no answer (looked for {', '.join(fields['answer'])})")
    answer = _aime_answer(raw_answer, where)
    problem_id = _first_field(problem, fields["id"])
    slug = ""
    if problem_id is not None:
        slug = re.sub(r"[^a-z0-9]+", "-", str(problem_id).lower()).strip("-")
        slug = slug.removeprefix(f"{year}-")  # ids like "2024-I-3" already name the year
    name = f"aime-{year}-{slug or f'{index + 1:02d}'}"
    domain = f"aime-{year}"
    config = TaskConfig(
        task={"name": f"aime/{name}", "description": f"AIME {year} problem ({problem_id})"},
        metadata={
            "benchmark": "aime",
            "year": str(year),
            "problem_id": str(problem_id) if problem_id is not None else str(index + 1),
            "category": domain,
        },
        verifier={"timeout_sec": 60.0},
        agent={"timeout_sec": 1800.0},
        environment={"cpus": 1, "memory_mb": 1024, "network_mode": "no-network"},
    )
    instruction = Template(_template("aime_instruction.md")).substitute(problem=text.strip())
    task = Task(
        name=name,
        instruction=instruction,
        config=config,
        environment={"Dockerfile": _text_file(aime_dockerfile())},
        tests={
            "test.sh": _text_file(_script("aime_test_sh"), executable=True),
            "expected_answer.txt": _text_file(f"{answer}\n"),
        },
        solution={"solve.sh": _text_file(_script("aime_solve_sh", answer=str(answer)), True)},
    )
    task.validate()
    return task


def aime_tasks(
    problems: Iterable[Mapping[str, Any]],
    dest: Path,
    *,
    year: str,
    name: str | None = None,
    source: str | None = None,
) -> TaskSet:
    """Convert AIME problems into Harbor tasks under ``dest``, one per problem.

    The agent is asked to write only the final integer to ``/app/answer.txt``; the
    expected answer stays in ``tests/`` (copied in only for verification), and
    ``tests/test.sh`` writes reward 1 when the file holds that integer (whitespace and
    leading zeros allowed), else 0. ``solution/solve.sh`` writes the answer. The image
    is the base domain's, so the task runs on the sandbox's fast path. Domain label:
    ``aime-<year>``.
    """
    year = str(year)
    tasks = [aime_task(problem, year=year, index=i) for i, problem in enumerate(problems)]
    return _converted_set(
        name or f"aime-{year}", tasks, Path(dest), source or f"AIME {year} problems in {dest}"
    )


def aime(
    dest: Path,
    years: Sequence[str] = ("2024", "2025"),
    *,
    data_files: Mapping[str, str | Path | Sequence[str | Path]] | None = None,
    revisions: Mapping[str, str] | None = None,
) -> TaskSet:
    """AIME of the given years (Hub datasets from ``data/benchmarks.yaml``, or local files
    per year in ``data_files``) converted into one task set under ``dest``."""
    entry = load_registry()["aime"]
    data_files = data_files or {}
    revisions = revisions or {}
    tasks: list[Path] = []
    domains: dict[str, str] = {}
    sources: list[str] = []
    for year in (str(y) for y in years):
        origin = entry["years"].get(year)
        if origin is None and year not in data_files:
            known = ", ".join(sorted(entry["years"]))
            raise BenchmarkError(f"aime: no dataset for year {year!r} (known: {known})")
        origin = origin or {"dataset": f"local AIME {year}", "split": "train"}
        rows, source = _load_rows(
            f"aime-{year}",
            origin["dataset"],
            split=origin.get("split", "train"),
            revision=revisions.get(year, origin.get("revision")),
            data_files=data_files.get(year),
        )
        year_set = aime_tasks(rows, dest, year=year, source=source)
        tasks += year_set.tasks
        domains.update(year_set.domains)
        sources.append(source)
    order = sorted(range(len(tasks)), key=lambda i: tasks[i].name)
    names = [tasks[i].name for i in order]
    return TaskSet("aime", tuple(tasks[i] for i in order), "; ".join(sources),
                   {n: domains[n] for n in names})  # fmt: skip


# --- held-out generated tasks -----------------------------------------------------------


def heldout(
    tasks_root: Path, task_names: Iterable[str] | None = None, *, name: str = "heldout"
) -> TaskSet:
    """Our generated tasks under ``tasks_root`` (``results/tasks``, laid out as
    ``shards/<NNNNN>/<task>``), restricted to ``task_names`` when given; domain labels
    come from each task's ``tmax.json``. A requested name that is not there is an error.
    """
    root = Path(tasks_root)
    base = root / "shards" if (root / "shards").is_dir() else root
    if not base.is_dir():
        raise BenchmarkError(f"{name}: {root} is not a directory of generated tasks")
    task_dirs = _find_task_dirs(base)
    if task_names is not None:
        wanted = set(task_names)
        found = {d.name for d in task_dirs}
        missing = sorted(wanted - found)
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise BenchmarkError(f"{name}: {len(missing)} task(s) not under {root}: {shown}")
        task_dirs = [d for d in task_dirs if d.name in wanted]
    if not task_dirs:
        raise BenchmarkError(f"{name}: no tasks under {root}")
    return _task_set(name, task_dirs, str(root.resolve()))


# --- the registry -----------------------------------------------------------------------

OVERRIDE_KEYS = ("path", "git_url", "commit", "subdir", "data_files", "revision", "split")


def resolve_benchmark(
    name: str,
    *,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    work_dir: Path,
    heldout_root: Path | None = None,
    heldout_names: Iterable[str] | None = None,
) -> TaskSet:
    """The task set of a registered benchmark (``data/benchmarks.yaml``).

    ``overrides[name]`` replaces where it comes from: ``{path: DIR}`` (a local Harbor
    directory), ``{git_url, commit, subdir}`` (another repository or commit),
    ``{data_files, revision, split}`` (SWE-bench or AIME from local files; for AIME
    ``data_files`` maps year -> file). Converted benchmarks are written to
    ``work_dir/<name>``; ``heldout`` reads ``heldout_root``.
    """
    registry = load_registry()
    if name not in registry:
        raise BenchmarkError(
            f"unknown benchmark {name!r}; known benchmarks: {', '.join(sorted(registry))}"
        )
    entry = registry[name]
    kind = entry["kind"]
    override = dict((overrides or {}).get(name) or {})
    unknown = sorted(set(override) - set(OVERRIDE_KEYS))
    if unknown:
        raise BenchmarkError(
            f"{name}: unknown override key(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(OVERRIDE_KEYS)}"
        )
    if "path" in override:
        return harbor_directory(Path(override["path"]), name)
    if "git_url" in override or "commit" in override or kind == "harbor_git":
        url = override.get("git_url", entry.get("url"))
        commit = override.get("commit", entry.get("commit"))
        if not url or not commit:
            raise BenchmarkError(f"{name}: a git source needs both git_url and commit")
        subdir = override.get("subdir", entry.get("subdir"))
        return harbor_git(str(url), str(commit), subdir=subdir, name=name)
    if "data_files" in override and kind not in ("swe_bench", "aime"):
        raise BenchmarkError(f"{name}: data_files applies only to SWE-bench and AIME")
    dest = Path(work_dir) / name
    if kind == "swe_bench":
        return swe_bench_verified(
            dest,
            split=override.get("split", entry.get("split", "test")),
            revision=override.get("revision", entry.get("revision")),
            data_files=override.get("data_files"),
            dataset=entry["dataset"],
        )
    if kind == "aime":
        files = override.get("data_files")
        if files is not None and not isinstance(files, Mapping):
            raise BenchmarkError(f"{name}: data_files must map a year to its file(s)")
        years = tuple(files) if files else tuple(entry["years"])
        return aime(dest, years, data_files=files)
    if heldout_root is None:
        raise BenchmarkError(f"{name}: the held-out benchmark needs heldout_root (results/tasks)")
    return heldout(heldout_root, heldout_names, name=name)
