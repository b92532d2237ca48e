"""Which benchmark tasks' verifiers need the network (static analysis of their tests).

Terminal-Bench 2.0's ``tests/test.sh`` typically installs curl with apt and uv from
astral.sh, then runs pytest through ``uvx``: all of it downloads at verification time.
Under a policy that leaves the verifier offline (``task`` or ``off``, see
:mod:`tmax.sandbox.base` and docs/network.md) such a verifier fails even for a correct
solution. This module finds those tasks without running them: it reads every script
and Python file under ``tests/`` and each ``task.toml``, and reports which commands
reach the network and what each policy gives the verifier phase.

    python -m tmax.benchmarks.network DIR...                # a table
    python -m tmax.benchmarks.network --update data/verifier_network.yaml \\
        --benchmark terminal-bench-2.0 --commit SHA DIR     # record the counts

Static analysis over-approximates (a guarded ``apt-get install`` counts although it may
not run) and can miss a download hidden in a binary or built from variables.

The second half measures instead of reading scripts: :func:`classify_log` reads what a
verifier printed (Harbor's ``verifier/test-stdout.txt``) and :func:`read_release` the
trial folders of released Harbor jobs (the TMAX release's ``evaluation_assets``, from
its git mirror or a checkout), so that :func:`measure_release` can say, per task, whether
every run of its verifier downloaded something:

    python -m tmax.benchmarks.network --release MIRROR_OR_DIR \\
        --update data/verifier_network.yaml --benchmark terminal-bench-2.0
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tmax.io import write_text
from tmax.logs import progress_bar
from tmax.sandbox.base import resolve_network
from tmax.tasks import TaskConfig, TaskFormatError

DATA_FILE = Path(__file__).parent / "data" / "verifier_network.yaml"
DATA_HEADER = """\
# Which Terminal-Bench 2.0 / TB-Lite tasks' verifiers need the network at verification
# time: task names, counts and kinds of download (apt, uvx, curl of a URL, ...), never
# the scripts' or logs' text. Written by `python -m tmax.benchmarks.network --update`:
# over a checkout of a benchmark at its pinned commit (static analysis of tests/; an
# entry whose status is "not measured" has no such counts, and its reason says why), and
# with --release over a release's Harbor job folders (measured_from_release_logs: what
# the verifiers' logs show). See docs/network.md.
"""
log = logging.getLogger("tmax.benchmarks.network")

# What reaches the network, by kind: (kind, pattern over one logical shell line). Package
# managers download from their registries whatever the arguments; downloads and clones
# count only with a URL that is not local (see _external_hosts).
PACKAGE_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("apt", r"\bapt(?:-get)?\s+(?:-\S+\s+)*(?:install|update|upgrade|build-dep)\b"),
        ("apk", r"\bapk\s+(?:-\S+\s+)*(?:add|update)\b"),
        ("yum/dnf", r"\b(?:yum|dnf|microdnf)\s+(?:-\S+\s+)*install\b"),
        ("pip", r"(?<!uv\s)\bpip[0-9.]*\s+(?:-\S+\s+)*install\b(?!.*--no-index)"),
        (
            "uv",
            r"\buv\s+(?:pip\s+install|add|sync|tool\s+install|python\s+install|run\s+.*--with)\b",
        ),
        ("uvx", r"(?:^|[\s;&|(])uvx\s"),
        ("npm", r"\b(?:npm\s+(?:install|i|ci)|npx|yarn\s+add|pnpm\s+(?:add|install))\b"),
        ("cargo", r"\bcargo\s+(?:install|fetch)\b"),
        ("go", r"\bgo\s+(?:get|install|mod\s+download)\b"),
        ("gem", r"\bgem\s+install\b"),
        ("conda", r"\b(?:conda|mamba|micromamba)\s+(?:-\S+\s+)*(?:install|create)\b"),
    )
)
DOWNLOADERS = re.compile(r"\b(?:curl|wget)\b")
GIT_REMOTE = re.compile(r"\bgit\s+(?:-\S+\s+)*(?:clone|fetch|pull|ls-remote|submodule\s+update)\b")
PYTHON_FETCH = re.compile(
    r"\b(?:urlopen|urlretrieve|requests\.\w+|httpx\.\w+|hf_hub_download)\s*\("
)
URL = re.compile(r"""(?:https?|ftp|git)://[^\s'"<>`)\]}|;]+""")
SCRIPT_SUFFIXES = {".sh", ".bash", ""}
PYTHON_SUFFIXES = {".py"}


@dataclass(frozen=True)
class NetworkUse:
    """One command in a task's tests that reaches the network."""

    kind: str
    """apt, pip, uv, uvx, download, git, python-fetch, ..."""
    file: str
    """Path below the task directory, e.g. ``tests/test.sh``."""
    line: int
    hosts: tuple[str, ...] = ()
    """External hosts named on that line (a download's or clone's URL)."""

    def label(self) -> str:
        return f"{self.kind} {','.join(self.hosts)}".strip()


@dataclass
class VerifierNetwork:
    """A task's verifier: what in its tests needs the network, and what it would get."""

    task: str
    uses: list[NetworkUse] = field(default_factory=list)
    verifier_mode: dict[str, str] = field(default_factory=dict)
    """The verifier phase's network_mode per policy (harbor / task / off)."""
    error: str | None = None

    @property
    def needs_network(self) -> bool:
        return bool(self.uses)

    def fails_under(self, policy: str) -> bool:
        """Whether the verifier needs a network this policy does not give it."""
        return self.needs_network and self.verifier_mode.get(policy) == "no-network"

    def kinds(self) -> list[str]:
        return sorted({use.kind for use in self.uses})

    def commands(self) -> list[str]:
        return sorted({use.label() for use in self.uses})


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Lines with backslash continuations joined and shell comments dropped, with the
    number of the first physical line."""
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        stripped = buffer.strip()
        buffer = ""
        if stripped and not stripped.startswith("#"):
            yield start, re.sub(r"\s+#.*$", "", stripped)
    if buffer.strip():
        yield start, buffer.strip()


def _external_hosts(line: str) -> tuple[str, ...]:
    """Hosts of URLs on the line that leave the machine: not loopback, not a private
    address, and with a dot (a bare name is a compose service or a local alias)."""
    hosts = []
    for url in URL.findall(line):
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            continue
        if not host or "$" in host or "{" in host:
            continue
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            if "." in host and host != "localhost" and not host.endswith(".local"):
                hosts.append(host)
            continue
        if address.is_global:
            hosts.append(host)
    return tuple(dict.fromkeys(hosts))


def scan_text(text: str, file: str, python: bool = False) -> list[NetworkUse]:
    """The network uses in one file's text (a shell script, or Python when ``python``)."""
    uses = []
    for number, line in _logical_lines(text):
        hosts = _external_hosts(line)
        for kind, pattern in PACKAGE_COMMANDS:
            if pattern.search(line):
                uses.append(NetworkUse(kind, file, number))
        if hosts and DOWNLOADERS.search(line):
            uses.append(NetworkUse("download", file, number, hosts))
        if hosts and GIT_REMOTE.search(line):
            uses.append(NetworkUse("git", file, number, hosts))
        if python and hosts and PYTHON_FETCH.search(line):
            uses.append(NetworkUse("python-fetch", file, number, hosts))
    return uses


def classify_task(task_dir: str | Path) -> VerifierNetwork:
    """Whether a Harbor task directory's verifier needs the network: every shell script
    and Python file below ``tests/`` is scanned, and ``task.toml`` says what the verifier
    phase gets under each policy."""
    task_dir = Path(task_dir)
    result = VerifierNetwork(task=task_dir.name)
    try:
        config = TaskConfig.parse((task_dir / "task.toml").read_text(), str(task_dir / "task.toml"))
        result.verifier_mode = {
            policy: resolve_network(config, policy).verifier.mode
            for policy in ("harbor", "task", "off")
        }
    except (OSError, TaskFormatError) as error:
        result.error = str(error)
    tests = task_dir / "tests"
    for path in sorted(tests.rglob("*")) if tests.is_dir() else []:
        if not path.is_file():
            continue
        suffix = path.suffix.lower()
        python = suffix in PYTHON_SUFFIXES
        if not python and suffix not in SCRIPT_SUFFIXES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not python and suffix == "" and not text.startswith("#!"):
            continue  # a data file without an extension
        result.uses += scan_text(text, str(path.relative_to(task_dir)), python=python)
    return result


def task_dirs(roots: Sequence[str | Path]) -> list[Path]:
    """Task directories: each root that holds a ``task.toml``, else its children that do."""
    found = []
    for root in map(Path, roots):
        if (root / "task.toml").is_file():
            found.append(root)
        else:
            found += sorted(p for p in root.iterdir() if (p / "task.toml").is_file())
    return found


def summary(results: Sequence[VerifierNetwork]) -> dict[str, Any]:
    """Counts and the task list, as recorded in ``data/verifier_network.yaml``: task
    names and command kinds only, never the scripts' text."""
    kinds = Counter(kind for result in results for kind in result.kinds())
    return {
        "tasks": len(results),
        "verifier_needs_network": sum(r.needs_network for r in results),
        "fails_offline": {
            policy: sum(r.fails_under(policy) for r in results)
            for policy in ("harbor", "task", "off")
        },
        "by_kind": dict(sorted(kinds.items())),
        "needs_network": {
            r.task: {"commands": r.commands(), "verifier_mode": r.verifier_mode}
            for r in results
            if r.needs_network
        },
        "unreadable": {r.task: r.error for r in results if r.error},
    }


def table(results: Sequence[VerifierNetwork]) -> str:
    """A plain-text table: one row per task, then the counts."""
    rows = [("task", "needs network", "verifier (harbor/task)", "commands")]
    for r in results:
        modes = f"{r.verifier_mode.get('harbor', '?')}/{r.verifier_mode.get('task', '?')}"
        rows.append((r.task, "yes" if r.needs_network else "no", modes, "; ".join(r.commands())))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]
    counts = summary(results)
    lines.append(
        f"\n{counts['verifier_needs_network']} of {counts['tasks']} verifiers need the network; "
        f"offline verifier under the 'task' policy fails {counts['fails_offline']['task']}, "
        f"under 'harbor' {counts['fails_offline']['harbor']}"
    )
    return "\n".join(line.rstrip() for line in lines)


MEASURED_KEY = "measured_from_release_logs"


class _DataDumper(yaml.SafeDumper):
    """Block style, but a short list of scalars (a task's kinds) on one line."""


def _represent_list(dumper: yaml.SafeDumper, items: list[Any]) -> yaml.Node:
    short = len(items) <= 8 and all(isinstance(item, str | int | float) for item in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=short)


_DataDumper.add_representer(list, _represent_list)


def _write_data(path: Path, data: Mapping[str, Any]) -> None:
    text = yaml.dump(dict(data), Dumper=_DataDumper, sort_keys=False, width=100)
    write_text(path, DATA_HEADER + text)


def _load_data(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text()) if path.exists() else None
    return data or {}


def update_data(
    path: Path, benchmark: str, commit: str, results: Sequence[VerifierNetwork]
) -> None:
    """Record one benchmark's counts (at ``commit``) in the data file, atomically; a
    measured section already there is kept."""
    data = _load_data(path)
    entries = data.setdefault("benchmarks", {})
    measured = (entries.get(benchmark) or {}).get(MEASURED_KEY)
    entries[benchmark] = {"commit": commit, "status": "measured", **summary(results)}
    if measured is not None:
        entries[benchmark][MEASURED_KEY] = measured
    _write_data(path, data)


# --- What verifiers did: their logs in released Harbor jobs -------------------------------

# Lines of a verifier's output that show it used the network, by kind. Each pattern is
# matched at the start of a line (after colour codes are dropped and carriage returns
# split it), so a test's own assertion output ("E   ...") never counts. Shapes: apt's
# index and package lines and its summary; the cargo-dist installer that astral.sh serves
# for uv ("downloading uv 0.9.5 x86_64-unknown-linux-gnu"), a finished curl transfer in
# curl's progress meter, wget's connection line; uv's download and install lines
# (uv prints "Downloading NAME (SIZE)" only for large wheels, but "Installed N packages"
# always, and a verifier starts without uv's cache); pip's; git clones of a remote URL and
# uv's fetch of a git dependency.
LOG_ACTIVITY: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("apt", r"^(?:Hit|Get|Ign):\d+ (?P<url>(?:https?|ftp)://\S+)"),
        ("apt", r"^Fetched [\d.,]+ [kMG]?B in "),
        ("download", r"^downloading \S+ v?\d+\.\d+\S* [\w.]+-(?:unknown-)?(?:linux|darwin)"),
        ("download", r"^\s*100\s+[\d.]+[kMGT]?\s+100\s+[\d.]+[kMGT]?\s+\d+\s+\d+\s"),
        (
            "download",
            r"^Connecting to (?P<host>[\w.-]+)(?: \([\w.-]+\))?(?:\|[\d.:a-fA-F]+\|)?:\d+"
            r"\.\.\. connected",
        ),
        ("uv", r"^\s*Downloading \S+(?: \(download\))? \([\d.]+[KMGT]iB\)\s*$"),
        ("uv", r"^\s*(?:Installed|Prepared) \d+ packages? in [\d.]+m?s\s*$"),
        ("pip", r"^\s*Collecting [A-Za-z0-9]"),
        ("pip", r"^\s*Downloading (?:\S+\.(?:whl|tar\.gz|zip)\b|(?P<url>https?://\S+))"),
        ("git", r"^\s*(?:\+ )?git\s+clone\b.*?(?P<url>(?:https?|git|ssh)://\S+)"),
        ("git", r"^\s*Updat(?:ing|ed) (?P<url>(?:https?|git|ssh)://\S+?)(?:\.git)?[\s#@(]"),
    )
)
# Lines that show a verifier tried the network and could not reach it: name resolution,
# connection and TLS failures of apt, curl, uv, pip and git. A line that names a local
# address is the test talking to its own service, not the network.
LOG_UNREACHABLE = re.compile(
    r"Could not resolve (?:host|'|proxy)"
    r"|Temporary failure (?:resolving|in name resolution)"
    r"|Name or service not known|Network is unreachable|No route to host"
    r"|(?:Could not|Unable to|Failed to) connect to [\w.-]+(?::| port)"
    r"|^curl: \((?:5|6|7|28|35|52|56)\)"
    r"|\bdns error\b|error sending request for url"
    r"|^fatal: unable to access '(?:https?|git)://"
)
LOCAL_ADDRESS = re.compile(r"localhost|\b127\.\d+\.\d+\.\d+|\b0\.0\.0\.0\b|\[::1\]")
TESTS_RAN = re.compile(r"^=+ test session starts =+$|^collected \d+ items?\b")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class VerifierLog:
    """What one verifier's output shows about the network."""

    kinds: Counter[str] = field(default_factory=Counter)
    """Lines of network activity, by kind (apt, download, uv, pip, git)."""
    unreachable: int = 0
    """Lines that show a failure to reach the network."""
    tests_ran: bool = False
    """Whether the tests themselves started (a pytest session)."""

    @property
    def used_network(self) -> bool:
        return bool(self.kinds)

    @property
    def state(self) -> str:
        """``network`` (downloads seen), ``unreachable`` (only failures to reach it),
        ``offline`` (the tests ran and nothing reached for the network) or
        ``inconclusive`` (the verifier stopped before downloading or testing)."""
        if self.kinds:
            return "network"
        if self.unreachable:
            return "unreachable"
        return "offline" if self.tests_ran else "inconclusive"


def _log_lines(text: str) -> Iterator[str]:
    for line in ANSI_ESCAPE.sub("", text).replace("\r", "\n").split("\n"):
        if line.strip():
            yield line


def _is_external(match: re.Match[str]) -> bool:
    """A match that names a URL or host counts only when it leaves the machine."""
    named = match.groupdict()
    if named.get("url"):
        return bool(_external_hosts(named["url"]))
    if named.get("host"):
        return bool(_external_hosts(f"http://{named['host']}/"))
    return True


def classify_log(text: str) -> VerifierLog:
    """The network activity a verifier's output (Harbor's ``verifier/test-stdout.txt``)
    shows: lines per kind, failures to reach the network, and whether the tests ran."""
    result = VerifierLog()
    for line in _log_lines(text):
        for kind, pattern in LOG_ACTIVITY:
            match = pattern.search(line)
            if match and _is_external(match):
                result.kinds[kind] += 1
                break
        if LOG_UNREACHABLE.search(line) and not LOCAL_ADDRESS.search(line):
            result.unreachable += 1
        if TESTS_RAN.search(line):
            result.tests_ran = True
    return result


@dataclass(frozen=True)
class ReleaseTrial:
    """One trial folder of a released Harbor job."""

    job: str
    """The job folder, below the release's root (one model's run of the benchmark)."""
    trial: str
    task: str
    git_url: str | None
    git_commit: str | None
    """The benchmark repository and commit the trial's task was taken from."""
    log: str | None
    """The verifier's output; None when the trial has none (the verifier never ran)."""
    reward: float | None


TRIAL_DIR = re.compile(r"^(?P<task>.+)__[A-Za-z0-9]+$")


class _ReleaseFiles:
    """The files below one folder of a release: a bare git mirror (read at HEAD with
    ``git ls-tree`` and one ``git cat-file --batch``) or a checked-out directory."""

    def __init__(self, source: Path, under: str) -> None:
        self.source, self.under = source, under.strip("/")
        self.git = (source / "HEAD").is_file() and (source / "objects").is_dir()
        if self.git:
            self.commit = self._git("rev-parse", "HEAD").strip()
            listing = self._git("ls-tree", "-r", "--name-only", "HEAD", "--", self.under)
            self.paths = listing.splitlines()
        else:
            self.commit = None
            root = source / self.under
            self.paths = sorted(str(p.relative_to(source)) for p in root.rglob("*") if p.is_file())

    def _git(self, *args: str) -> str:
        command = ["git", f"--git-dir={self.source}", *args]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def read(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of ``paths``; a path that cannot be read is left out."""
        if not self.git:
            found = {}
            for path in paths:
                try:
                    found[path] = (self.source / path).read_bytes()
                except OSError:
                    continue
            return found
        command = ["git", f"--git-dir={self.source}", "cat-file", "--batch"]
        request = "".join(f"HEAD:{path}\n" for path in paths).encode()
        output = subprocess.run(command, input=request, check=True, capture_output=True).stdout
        found, offset = {}, 0
        for path in paths:
            end = output.index(b"\n", offset)
            header = output[offset:end].split()
            offset = end + 1
            if header[-1] == b"missing" or len(header) != 3:
                continue  # not in the tree, or a blob the mirror does not hold
            size = int(header[2])
            found[path] = output[offset : offset + size]
            offset += size + 1
        return found


def _json(blob: bytes | None) -> dict[str, Any]:
    try:
        value = json.loads(blob or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _datasets(job_config: Mapping[str, Any]) -> list[str]:
    """A Harbor job's datasets as ``name@version``."""
    names = []
    for dataset in job_config.get("datasets") or []:
        if isinstance(dataset, dict) and dataset.get("name"):
            version = dataset.get("version")
            names.append(f"{dataset['name']}@{version}" if version else str(dataset["name"]))
    return names


def read_release(
    source: str | Path, dataset: str, under: str = "evaluation_assets"
) -> tuple[list[ReleaseTrial], str | None]:
    """The trials of every Harbor job below ``under`` whose ``config.json`` runs
    ``dataset`` (``name@version``, e.g. ``terminal-bench@2.0``), and the mirror's commit
    (None for a directory). A trial folder is a ``<task>__<id>`` folder with a
    ``config.json``; its verifier's output is ``verifier/test-stdout.txt``."""
    files = _ReleaseFiles(Path(source), under)
    trial_dirs = sorted(
        {
            path.rsplit("/", 1)[0]
            for path in files.paths
            if path.endswith("/config.json") and TRIAL_DIR.match(path.split("/")[-2])
        }
    )
    jobs = sorted({trial.rsplit("/", 1)[0] for trial in trial_dirs})
    job_configs = files.read([f"{job}/config.json" for job in jobs])
    chosen = {
        job for job in jobs if dataset in _datasets(_json(job_configs.get(f"{job}/config.json")))
    }
    log.info("%d of %d jobs below %s run %s", len(chosen), len(jobs), under, dataset)
    trials = []
    selected = [trial for trial in trial_dirs if trial.rsplit("/", 1)[0] in chosen]
    with progress_bar(disable=len(selected) < 200) as bar:
        reading = bar.add_task(f"reading {dataset} trials", total=len(selected))
        for start in range(0, len(selected), 500):
            batch = selected[start : start + 500]
            wanted = [
                f"{trial}/{name}"
                for trial in batch
                for name in ("config.json", "verifier/test-stdout.txt", "verifier/reward.txt")
            ]
            blobs = files.read(wanted)
            for trial in batch:
                trials.append(_release_trial(trial, blobs, under))
            bar.advance(reading, len(batch))
    return trials, files.commit


def _release_trial(trial: str, blobs: Mapping[str, bytes], under: str) -> ReleaseTrial:
    job, name = trial.rsplit("/", 1)
    task = _json(blobs.get(f"{trial}/config.json")).get("task") or {}
    stdout = blobs.get(f"{trial}/verifier/test-stdout.txt")
    reward_text = blobs.get(f"{trial}/verifier/reward.txt", b"").decode(errors="replace").strip()
    try:
        reward = float(reward_text) if reward_text else None
    except ValueError:
        reward = None
    match = TRIAL_DIR.match(name)
    return ReleaseTrial(
        job=job.removeprefix(under.strip("/") + "/"),
        trial=name,
        task=str(task.get("path") or task.get("name") or (match and match["task"]) or name),
        git_url=task.get("git_url"),
        git_commit=task.get("git_commit_id"),
        log=None if stdout is None else stdout.decode("utf-8", errors="replace"),
        reward=reward,
    )


TASK_CLASSES = ("needs network at verification", "mixed", "none seen")
TRIAL_STATES = ("network", "unreachable", "offline", "inconclusive")


@dataclass
class TaskLogs:
    """All verifier runs of one task, across the release's jobs."""

    task: str
    trials: int = 0
    states: Counter[str] = field(default_factory=Counter)
    """Verifier logs per state (see :attr:`VerifierLog.state`)."""
    kinds: Counter[str] = field(default_factory=Counter)
    """Verifier logs that show each kind of network activity."""
    passed: int = 0
    passed_with_network: int = 0
    """Trials with a positive reward, and those of them whose verifier downloaded."""

    @property
    def logs(self) -> int:
        return sum(self.states.values())

    @property
    def task_class(self) -> str:
        """``needs network at verification``: downloads in at least one verifier's log
        and no verifier that ran its tests without them (a verifier that stopped before
        downloading or testing, or failed to reach the network, does not contradict it);
        ``mixed``: downloads in some logs, and some verifiers ran their tests without;
        ``none seen``: no log shows downloads."""
        if not self.states["network"]:
            return "none seen"
        return "mixed" if self.states["offline"] else "needs network at verification"

    def record(self) -> dict[str, Any]:
        """Counts for the data file: trials, logs, logs per state (those that occur), kinds."""
        states = {state: self.states[state] for state in TRIAL_STATES if self.states[state]}
        return {"trials": self.trials, "logs": self.logs, **states, "kinds": sorted(self.kinds)}


def measure_release(trials: Sequence[ReleaseTrial]) -> dict[str, TaskLogs]:
    """Per task: every trial's verifier log classified and counted."""
    tasks: dict[str, TaskLogs] = {}
    for trial in trials:
        entry = tasks.setdefault(trial.task, TaskLogs(trial.task))
        entry.trials += 1
        passed = trial.reward is not None and trial.reward > 0
        entry.passed += passed
        if trial.log is None:
            continue
        verifier = classify_log(trial.log)
        entry.states[verifier.state] += 1
        entry.kinds.update(verifier.kinds.keys())
        if verifier.unreachable:
            entry.kinds["unreachable"] += 1
        entry.passed_with_network += passed and verifier.used_network
    return dict(sorted(tasks.items()))


def release_summary(
    trials: Sequence[ReleaseTrial],
    tasks: Mapping[str, TaskLogs],
    *,
    repository: str,
    commit: str | None,
    dataset: str,
    pin: str | None,
) -> dict[str, Any]:
    """The measured section of ``data/verifier_network.yaml``: where the logs came from,
    which benchmark commit the release ran (and whether it is ``pin``), and counts per
    state, kind and class, with the task names of each class. Facts only: no log text."""
    sources = Counter((t.git_url, t.git_commit) for t in trials)
    commits = sorted({c for _, c in sources if c})
    by_class = {
        name: [t for t, e in tasks.items() if e.task_class == name] for name in TASK_CLASSES
    }
    kinds = Counter(kind for entry in tasks.values() for kind in entry.kinds)
    return {
        "source": {
            "repository": repository,
            "commit": commit,
            "jobs": len({t.job for t in trials}),
        },
        "dataset": dataset,
        "benchmark_source": [
            {"git_url": url, "git_commit": sha, "trials": count}
            for (url, sha), count in sorted(sources.items(), key=lambda item: -item[1])
        ],
        "same_commit_as_pin": bool(pin) and commits == [pin],
        "trials": len(trials),
        "verifier_logs": sum(e.logs for e in tasks.values()),
        "trials_without_verifier_log": sum(e.trials - e.logs for e in tasks.values()),
        "tasks": len(tasks),
        "logs_by_state": {s: sum(e.states[s] for e in tasks.values()) for s in TRIAL_STATES},
        "logs_by_kind": dict(
            sorted(Counter({k: sum(e.kinds[k] for e in tasks.values()) for k in kinds}).items())
        ),
        "tasks_by_kind": dict(sorted(kinds.items())),
        "passed_trials": sum(e.passed for e in tasks.values()),
        "passed_trials_with_network": sum(e.passed_with_network for e in tasks.values()),
        "tasks_by_class": {name: len(names) for name, names in by_class.items()},
        "classes": by_class,
        "per_task": {name: entry.record() for name, entry in tasks.items()},
    }


def update_measured(path: Path, benchmark: str, measured: Mapping[str, Any]) -> None:
    """Record the measured section under ``benchmarks.<benchmark>``, atomically; the
    static analysis's keys there are kept."""
    data = _load_data(path)
    entry = data.setdefault("benchmarks", {}).setdefault(benchmark, {})
    entry[MEASURED_KEY] = dict(measured)
    _write_data(path, data)


def release_table(tasks: Mapping[str, TaskLogs]) -> str:
    """One row per task: its class, verifier logs per state, and the kinds seen."""
    rows = [("task", "class", "logs", "network/unreachable/offline/inconclusive", "kinds")]
    for name, entry in tasks.items():
        states = "/".join(str(entry.states[s]) for s in TRIAL_STATES)
        rows.append(
            (name, entry.task_class, str(entry.logs), states, ",".join(sorted(entry.kinds)))
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    counts = Counter(entry.task_class for entry in tasks.values())
    lines.append("\n" + "; ".join(f"{counts[name]} {name}" for name in TASK_CLASSES))
    return "\n".join(line.rstrip() for line in lines)


def _repository_name(source: Path) -> str:
    """``owner/name`` from a mirror folder named ``owner+name`` (``.../owner+name/repo``)."""
    for part in reversed(source.resolve().parts):
        if re.fullmatch(r"[\w.-]+\+[\w.-]+", part):
            return part.replace("+", "/", 1)
    return str(source)


def _release_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    source = Path(args.release)
    if not source.is_dir():
        parser.error(f"--release {source}: not a directory (a git mirror or a checkout)")
    try:
        trials, commit = read_release(source, args.dataset, args.under)
    except (OSError, subprocess.CalledProcessError) as error:
        parser.error(f"--release {source}: cannot be read: {error}")
    if not trials:
        parser.error(f"no trials of {args.dataset} below {source / args.under}")
    tasks = measure_release(trials)
    print(release_table(tasks))
    if args.update:
        entries = _load_data(args.update).get("benchmarks") or {}
        pin = args.commit or (entries.get(args.benchmark) or {}).get("commit")
        measured = release_summary(
            trials,
            tasks,
            repository=args.repository or _repository_name(source),
            commit=commit,
            dataset=args.dataset,
            pin=pin,
        )
        update_measured(args.update, args.benchmark, measured)
        log.info("recorded %d tasks, %d trials in %s", len(tasks), len(trials), args.update)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tmax.benchmarks.network",
        description="Which Harbor tasks' verifiers need the network: static analysis of "
        "task directories, or (--release) what released verifier logs show.",
    )
    parser.add_argument("dirs", nargs="*", help="task directories, or directories of them")
    parser.add_argument("--update", type=Path, help="record the counts in this YAML file")
    parser.add_argument("--benchmark", help="the benchmark's name in the YAML (with --update)")
    parser.add_argument(
        "--commit",
        help="the commit the tasks were read at (with --update); with --release, the pin "
        "to compare the release's commit with (default: the one already in the YAML)",
    )
    release = parser.add_argument_group("measured from released Harbor jobs")
    release.add_argument("--release", help="a release's bare git mirror, or a checkout of it")
    release.add_argument("--under", default="evaluation_assets", help="the jobs' folder in it")
    release.add_argument("--dataset", default="terminal-bench@2.0", help="the jobs' dataset")
    release.add_argument("--repository", help="the release's owner/name, for the record")
    args = parser.parse_args(argv)
    if args.release:
        if args.dirs:
            parser.error("give task directories or --release, not both")
        if args.update and not args.benchmark:
            parser.error("--update with --release needs --benchmark")
        return _release_main(args, parser)
    if not args.dirs:
        parser.error("give task directories, or --release")
    if args.update and not (args.benchmark and args.commit):
        parser.error("--update needs --benchmark and --commit")
    try:
        dirs = task_dirs(args.dirs)
    except OSError as error:
        parser.error(str(error))
    if not dirs:
        parser.error(f"no task directories (with a task.toml) in {' '.join(args.dirs)}")
    results = [classify_task(d) for d in dirs]
    print(table(results))
    if args.update:
        update_data(args.update, args.benchmark, args.commit, results)
    return 0


if __name__ == "__main__":
    from tmax.logs import setup_logging

    setup_logging()
    sys.exit(main())
