"""Shared fixtures: the repository root, a validated default config, the taxonomy."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tmax.config import validate_config
from tmax.taxonomy import Taxonomy, load_taxonomy

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_TASKS = ROOT / "tests" / "fixtures" / "tasks"


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
