"""envs/*.yaml (for --sdm conda) must install exactly what pyproject.toml pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml


def pins(requirements: list[str]) -> dict[str, str]:
    found = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^;\s]+)", requirement.strip())
        assert match, f"not an exact pin: {requirement!r}"
        found[match[1].lower().replace("_", "-")] = match[2]
    return found


def test_every_env_pin_matches_pyproject(root: Path) -> None:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    pinned = pins(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        pinned.update(pins(extra))
    env_files = sorted((root / "envs").glob("*.yaml"))
    assert env_files, "no conda env files under envs/"
    for env_file in env_files:
        env = yaml.safe_load(env_file.read_text())
        pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
        assert pip_sections, f"{env_file.name}: no pip section"
        for name, version in pins(pip_sections[0]).items():
            assert name in pinned, f"{env_file.name}: {name} is not pinned in pyproject.toml"
            assert version == pinned[name], (
                f"{env_file.name}: {name}=={version} but pyproject.toml pins {pinned[name]}"
            )


def test_core_dependencies_are_in_the_sampling_env(root: Path) -> None:
    """The sampling scripts import only core dependencies: the env must have all."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((root / "envs/sample.yaml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pins(pip_section) == pins(project["dependencies"])


def test_every_conda_directive_points_at_an_env_file(root: Path) -> None:
    for rules in (root / "rules").glob("*.smk"):
        for env in re.findall(r'"\.\./(envs/[^"]+)"', rules.read_text()):
            assert (root / env).is_file(), f"{rules.name} refers to missing {env}"
