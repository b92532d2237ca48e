"""Sources: git checkouts are cached by URL and commit, and a source that cannot be
reached stops with a message naming the dataset and how to provide it locally."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.datasets.adapter_support import DATASET_FIXTURES, out_dir
from tmax.config import ConfigError, validate_config
from tmax.datasets.base import DatasetError
from tmax.datasets.convert import prepare_dataset
from tmax.datasets.sources import resolve_source


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMAX_CACHE", str(tmp_path / "cache"))


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_git_source_is_checked_out_at_the_commit_and_cached(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(DATASET_FIXTURES / "harbor", repo / "environments_harbor")
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "tasks", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    (repo / "environments_harbor" / "tasks" / "count-words" / "instruction.md").write_text("new\n")
    git("commit", "-qam", "later", cwd=repo)
    entry = {"name": "fx", "layout": "harbor", "git": f"file://{repo}", "revision": commit,
             "subdir": "environments_harbor"}  # fmt: skip
    manifest = prepare_dataset(entry, out_dir(tmp_path), seed=1, sample=None)
    assert manifest["revision"] == commit
    assert manifest["source"] == {"kind": "git", "git": f"file://{repo}", "revision": commit,
                                  "subdir": "environments_harbor", "commit": commit}  # fmt: skip
    assert manifest["tasks"][0]["instruction"].startswith("Count the words")  # not "new"
    shutil.rmtree(repo)  # the cached checkout is enough from now on
    again = resolve_source(entry)
    assert again.revision == commit and (again.root / "tasks" / "count-words").is_dir()
    assert again.root.is_relative_to(tmp_path / "cache" / "datasets" / "git")


def test_unreachable_git_source_says_how_to_provide_it(tmp_path: Path) -> None:
    entry = {"name": "termigen", "layout": "harbor", "git": f"file://{tmp_path}/missing.git",
             "revision": "dc329464161db64b0c670f46fa39b62e4719dddd"}  # fmt: skip
    with pytest.raises(DatasetError) as caught:
        resolve_source(entry)
    message = str(caught.value)
    assert message.startswith("dataset 'termigen': cannot fetch")
    assert "git -C DIR checkout dc329464161db64b0c670f46fa39b62e4719dddd" in message
    assert "set `path: DIR` in the datasets.sources entry named 'termigen'" in message


def test_unreachable_hub_dataset_says_how_to_provide_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def offline(**kwargs: Any) -> str:
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    entry = {"name": "tmax-15k", "layout": "tmax15k", "hf": "allenai/TMax-15K",
             "revision": "abc123", "files": "tasks.zip"}  # fmt: skip
    with pytest.raises(DatasetError) as caught:
        resolve_source(entry)
    message = str(caught.value)
    assert "cannot download the Hugging Face dataset allenai/TMax-15K@abc123" in message
    assert "ConnectionError: Name or service not known" in message
    assert (
        "huggingface-cli download --repo-type dataset allenai/TMax-15K --revision abc123 "
        "--include 'tasks.zip' --local-dir DIR" in message
    )
    assert "set `path: DIR` in the datasets.sources entry named 'tmax-15k'" in message


def test_hub_source_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    entry = {"name": "swe-smith", "layout": "swe", "hf": "SWE-bench/SWE-smith"}
    with pytest.raises(DatasetError, match="needs the huggingface_hub package"):
        resolve_source(entry)


def test_hub_snapshot_revision_is_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    snapshot = tmp_path / "hub" / "snapshots" / ("a" * 40)
    shutil.copytree(DATASET_FIXTURES / "trajectories", snapshot)
    seen: dict[str, Any] = {}

    def download(**kwargs: Any) -> str:
        seen.update(kwargs)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    entry = {"name": "nemotron", "layout": "trajectories", "hf": "nvidia/X", "files": "*.jsonl"}
    manifest = prepare_dataset(entry, out_dir(tmp_path), seed=1, sample=None)
    assert manifest["revision"] == "a" * 40 and manifest["source"]["kind"] == "hf"
    assert seen["repo_type"] == "dataset" and seen["allow_patterns"] == "*.jsonl"
    assert len(manifest["tasks"]) == 2


def test_hub_snapshot_of_links_into_blobs_converts_as_plain_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub cache stores every file of a snapshot as a link into ``blobs/``; Harbor
    task folders downloaded that way convert, and the links are not followed out of
    the cache by the tasks themselves."""
    import huggingface_hub

    repo = tmp_path / "hub" / "datasets--x--tasks"
    snapshot = repo / "snapshots" / ("b" * 40)
    blobs = repo / "blobs"
    blobs.mkdir(parents=True)
    source = DATASET_FIXTURES / "harbor"
    for path in sorted(source.rglob("*")):
        if path.is_file():
            blob = blobs / f"{len(list(blobs.iterdir())):04d}"
            shutil.copyfile(path, blob)
            link = snapshot / path.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            depth = len(link.relative_to(repo).parts) - 1
            link.symlink_to(Path("../" * depth) / "blobs" / blob.name)
    assert all(p.is_symlink() for p in snapshot.rglob("*") if not p.is_dir())
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kwargs: str(snapshot))
    entry = {"name": "endless", "layout": "harbor", "hf": "x/tasks"}
    manifest = prepare_dataset(entry, out_dir(tmp_path), seed=1, sample=None)
    local = {"name": "endless", "layout": "harbor", "path": str(source)}
    plain = prepare_dataset(local, tmp_path / "plain", seed=1, sample=None)
    assert manifest["revision"] == "b" * 40 and len(manifest["tasks"]) > 0
    for key in ("tasks", "skipped"):  # as if the files had been plain all along
        assert [t["id"] for t in manifest[key]] == [t["id"] for t in plain[key]], key


def test_local_path_wins_and_records_the_origin(tmp_path: Path) -> None:
    entry = {"name": "fx", "layout": "harbor", "hf": "owner/name", "revision": "main",
             "path": str(DATASET_FIXTURES / "harbor")}  # fmt: skip
    source = resolve_source(entry)
    assert source.description["kind"] == "path"
    assert source.description["origin"] == {"hf": "owner/name", "revision": "main"}


# --- config ---------------------------------------------------------------------------


def test_default_config_converts_nothing(config: dict[str, Any]) -> None:
    assert config["datasets"] == {"sample": 250, "sources": []}


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ({"name": "x", "layout": "harbor"}, "gives no location; set one of path, git or hf"),
        ({"name": "x", "layout": "harbor", "git": "u", "hf": "a/b"}, "sets both git and hf"),
        ({"name": "x", "layout": "harbor", "git": "u"}, "reads git without a revision"),
        ({"name": "x", "layout": "folders", "path": "p"}, "'datasets.sources[0].layout'"),
        ({"name": "X Y", "layout": "harbor", "path": "p"}, "'datasets.sources[0].name'"),
        ({"name": "x", "layout": "harbor", "path": "p", "colums": {}}, "did you mean 'columns'"),
    ],
)
def test_bad_sources_are_named(raw_config: dict, source: dict, problem: str) -> None:
    raw_config["datasets"] = {"sources": [source]}
    with pytest.raises(ConfigError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        validate_config(raw_config)


def test_repeated_dataset_names(raw_config: dict) -> None:
    entry = {"name": "x", "layout": "harbor", "path": "p"}
    raw_config["datasets"] = {"sources": [entry, dict(entry)]}
    with pytest.raises(ConfigError, match="repeats the name"):
        validate_config(raw_config)
