"""Where a dataset comes from, made local: a folder (``path``), a git repository at a
commit (``git`` + ``revision``) or a Hugging Face dataset (``hf`` + ``revision``).

Remote sources are fetched once into the project cache (``$TMAX_CACHE/datasets/…``,
keyed by location and revision) and reused. A source that cannot be reached raises
:class:`DatasetError` naming the dataset and how to provide it locally; nothing falls
back silently. ``path`` wins when it is given beside ``git``/``hf``, which then only
record where the local copy came from.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tmax.datasets.base import DatasetError, ResolvedSource
from tmax.io import built_once, cache_dir

log = logging.getLogger("tmax.datasets.sources")

GIT_TIMEOUT_SEC = 3600
_SHA = re.compile(r"[0-9a-f]{40}")


def _origin(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The public location an entry names (git or hf), for the record."""
    keys = ("git", "hf", "revision", "subdir", "files")
    return {key: entry[key] for key in keys if entry.get(key) is not None}


def _select(root: Path, pattern: str | None) -> tuple[Path, ...] | None:
    """Files under ``root`` whose relative path matches the ``files`` glob."""
    if pattern is None:
        return None
    found = [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and fnmatch.fnmatch(path.relative_to(root).as_posix(), pattern)
    ]
    return tuple(found)


def visible_files(root: Path) -> list[Path]:
    """Files under ``root`` outside hidden folders (``.git``, the Hub client's
    ``.cache``), whose bookkeeping changes without the data changing."""
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and not any(p.startswith(".") for p in path.relative_to(root).parts)
    ]


def content_hash(paths: Iterable[Path], root: Path) -> str:
    """``sha256:<hex>`` over the relative paths and bytes of ``paths`` (sorted), the
    revision of a local folder: the same files give the same hash anywhere."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def _local(name: str, entry: Mapping[str, Any]) -> ResolvedSource:
    path = Path(str(entry["path"])).expanduser()
    if not path.exists():
        raise DatasetError(
            f"dataset {name!r}: path {str(path)!r} does not exist; "
            f"{how_to_provide(name, entry, path)}"
        )
    if path.is_file():
        root, files = path.parent, (path,)
    else:
        root = path / entry["subdir"] if entry.get("subdir") else path
        if not root.is_dir():
            raise DatasetError(f"dataset {name!r}: {path} has no directory {entry['subdir']!r}")
        files = _select(root, entry.get("files"))
    read = files if files is not None else visible_files(root)
    description = {"kind": "path", "path": str(path.resolve())}
    origin = _origin(entry)
    if origin:
        description["origin"] = origin
    return ResolvedSource(name, root, files, content_hash(read, root), description)


def how_to_provide(name: str, entry: Mapping[str, Any], target: Path | str = "DIR") -> str:
    """The instruction for making a dataset available without network access."""
    revision = entry.get("revision")
    if entry.get("hf"):
        repo = entry["hf"]
        pinned = f" --revision {revision}" if revision else ""
        files = f" --include '{entry['files']}'" if entry.get("files") else ""
        fetch = (
            f"download it where the Hub is reachable (huggingface-cli download --repo-type "
            f"dataset {repo}{pinned}{files} --local-dir {target}), copy the folder here"
        )
    elif entry.get("git"):
        fetch = (
            f"clone it where {entry['git']} is reachable (git clone {entry['git']} {target} && "
            f"git -C {target} checkout {revision or '<commit>'}), copy the folder here"
        )
    else:
        fetch = "put the dataset's files in a folder"
    return f"{fetch} and set `path: {target}` in the datasets.sources entry named {name!r}"


# --- git ----------------------------------------------------------------------------------


def _git(args: Sequence[str], cwd: Path, name: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # fail, never ask for credentials
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=GIT_TIMEOUT_SEC,
        )  # fmt: skip
    except FileNotFoundError:
        raise DatasetError(f"dataset {name!r}: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise DatasetError(
            f"dataset {name!r}: git {args[0]} took over {GIT_TIMEOUT_SEC}s"
        ) from None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _clone(url: str, revision: str, staging: Path, name: str, entry: Mapping[str, Any]) -> str:
    """Fetch ``revision`` of ``url`` into the empty directory ``staging`` and check it
    out; returns the full commit sha."""
    _git(["init", "--quiet"], staging, name)
    _git(["remote", "add", "origin", url], staging, name)
    fetched = _git(["fetch", "--quiet", "--depth", "1", "origin", revision], staging, name)
    if fetched.returncode != 0:  # the server may refuse fetching by sha: fetch everything
        fetched = _git(["fetch", "--quiet", "--tags", "origin"], staging, name)
        if fetched.returncode != 0:
            raise DatasetError(
                f"dataset {name!r}: cannot fetch {url} ({_last_line(fetched.stderr)}); "
                f"{how_to_provide(name, entry)}"
            )
        target = revision
    else:
        target = "FETCH_HEAD"
    checkout = _git(["-c", "advice.detachedHead=false", "checkout", "-q", target], staging, name)
    if checkout.returncode != 0:
        raise DatasetError(
            f"dataset {name!r}: {url} has no revision {revision!r} ({_last_line(checkout.stderr)})"
        )
    head = _git(["rev-parse", "HEAD"], staging, name).stdout.strip()
    if _SHA.fullmatch(revision) and head != revision:
        raise DatasetError(f"dataset {name!r}: checked out {head}, not {revision}")
    return head


def _git_source(name: str, entry: Mapping[str, Any]) -> ResolvedSource:
    url, revision = str(entry["git"]), str(entry.get("revision") or "")
    if not revision:
        raise DatasetError(f"dataset {name!r}: a git source needs `revision:` (a commit sha)")
    key = hashlib.sha256(f"{url}\0{revision}".encode()).hexdigest()[:16]

    def fetch(staging: Path) -> None:
        log.info("%s: fetching %s at %s", name, url, revision)
        _clone(url, revision, staging, name, entry)

    checkout = built_once(cache_dir() / "datasets" / "git" / key, fetch)
    head = _git(["rev-parse", "HEAD"], checkout, name).stdout.strip()
    root = checkout / entry["subdir"] if entry.get("subdir") else checkout
    if not root.is_dir():
        raise DatasetError(f"dataset {name!r}: {url}@{head} has no directory {entry['subdir']!r}")
    description = {"kind": "git", **_origin(entry), "commit": head}
    return ResolvedSource(name, root, _select(root, entry.get("files")), head, description)


# --- Hugging Face -------------------------------------------------------------------------


def _hf_source(name: str, entry: Mapping[str, Any]) -> ResolvedSource:
    repo = str(entry["hf"])
    revision = entry.get("revision")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise DatasetError(
            f"dataset {name!r}: reading {repo} from the Hugging Face Hub needs the "
            f"huggingface_hub package (pip install huggingface_hub), or "
            f"{how_to_provide(name, entry)}"
        ) from None
    try:
        snapshot = Path(
            snapshot_download(
                repo_id=repo,
                repo_type="dataset",
                revision=revision,
                allow_patterns=entry.get("files"),
                cache_dir=str(cache_dir() / "datasets" / "hf"),
            )
        )
    except Exception as error:  # the hub client raises many kinds (network, auth, 404)
        first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        raise DatasetError(
            f"dataset {name!r}: cannot download the Hugging Face dataset "
            f"{repo}@{revision or 'main'} ({type(error).__name__}: {first}); "
            f"{how_to_provide(name, entry)}"
        ) from None
    commit = snapshot.name  # the hub cache keeps each snapshot under its commit sha
    snapshot = _materialised(snapshot, repo)
    root = snapshot / entry["subdir"] if entry.get("subdir") else snapshot
    if not root.is_dir():
        raise DatasetError(
            f"dataset {name!r}: {repo}@{commit} has no directory {entry['subdir']!r}"
        )
    description = {"kind": "hf", **_origin(entry), "commit": commit}
    return ResolvedSource(name, root, _select(root, entry.get("files")), commit, description)


def _materialised(snapshot: Path, repo: str) -> Path:
    """The Hub snapshot as plain files: the hub cache keeps every file as a link into
    its shared ``blobs/`` folder, and a task folder made of links that leave it would
    be skipped as escaping. Files are hard-linked (copied across file systems) once
    into ``$TMAX_CACHE/datasets/hf-files/<repo>/<commit>``, under a lock, through a
    temporary folder and a rename."""

    def link(staging: Path) -> None:
        for path in sorted(snapshot.rglob("*")):
            dest = staging / path.relative_to(snapshot)
            if path.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            elif path.is_file():  # a link is followed to its blob; a dangling one dropped
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path.resolve(), dest)
                except OSError:
                    shutil.copyfile(path, dest)

    folder = cache_dir() / "datasets" / "hf-files" / repo.replace("/", "__") / snapshot.name
    return built_once(folder, link)


def resolve_source(entry: Mapping[str, Any]) -> ResolvedSource:
    """Make a ``datasets.sources`` entry local; see the module docstring."""
    name = str(entry.get("name") or "<unnamed>")
    if entry.get("path"):
        return _local(name, entry)
    if entry.get("git"):
        return _git_source(name, entry)
    if entry.get("hf"):
        return _hf_source(name, entry)
    raise DatasetError(f"dataset {name!r}: give one of `path`, `git` or `hf`")
