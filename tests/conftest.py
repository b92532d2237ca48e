"""Shared fixtures: the repository root, a validated default config, the taxonomy."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.leftovers import MARKER, Snapshot
from tmax.config import validate_config
from tmax.taxonomy import Taxonomy, load_taxonomy

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_TASKS = ROOT / "tests" / "fixtures" / "tasks"
_SNAPSHOT = pytest.StashKey[Snapshot]()


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def taxonomy() -> Taxonomy:
    return load_taxonomy()


@pytest.fixture(scope="session")
def _default_raw() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.fixture
def raw_config(_default_raw: dict[str, Any]) -> dict[str, Any]:
    """The embedded default config as written (a fresh copy per test)."""
    return copy.deepcopy(_default_raw)


@pytest.fixture
def config(raw_config: dict[str, Any]) -> dict[str, Any]:
    """The embedded default config, validated and with defaults filled."""
    return validate_config(raw_config)


@pytest.fixture(scope="session")
def small_workflow_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The embedded default, shrunk, run once locally: (its folder, the jobs its dry run
    planned). Read-only: a test that reruns or edits copies it first
    (:func:`tests.workflow.test_snakemake.copy_run`)."""
    import os
    import shutil

    if os.geteuid() != 0 or not (shutil.which("bwrap") and shutil.which("podman")):
        pytest.skip("the whole DAG validates tasks in sandboxes: needs root, bwrap, podman")
    from tests.workflow.test_snakemake import copy_workflow, planned_jobs, snakemake

    workdir = copy_workflow(tmp_path_factory.mktemp("small-run"))
    plan = planned_jobs(workdir)
    snakemake(workdir)
    return workdir, plan


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note what of ours exists before the first test (``tests/leftovers.py``)."""
    snapshot = Snapshot()
    os.environ[MARKER] = snapshot.session
    session.config.stash[_SNAPSHOT] = snapshot


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when the tests left processes, mounts, cgroups or containers of
    ours behind; list them, then remove them."""
    snapshot = session.config.stash.get(_SNAPSHOT, None)
    if snapshot is None or exitstatus == pytest.ExitCode.INTERRUPTED:
        return
    found = snapshot.leftovers()
    if not found:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"  {kind}: {item}" for kind, items in found.items() for item in items]
    message = "the tests left these behind (now removed):\n" + "\n".join(lines)
    if reporter is not None:
        reporter.write_sep("=", "leftovers", red=True)
        reporter.write_line(message)
    else:
        print(message)
    snapshot.remove(found)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
