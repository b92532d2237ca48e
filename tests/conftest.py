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
