"""envs/*.yaml (for --sdm conda) and the workflow image (containers/Dockerfile, for
--sdm apptainer) must install exactly what pyproject.toml pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from containers.image import image_pins


def pins(requirements: list[str]) -> dict[str, str]:
    found = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^;\s]+)", requirement.strip())
        assert match, f"not an exact pin: {requirement!r}"
        found[match[1].lower().replace("_", "-")] = match[2]
    return found


def pyproject_pins(root: Path) -> dict[str, str]:
    """Every exact pin of pyproject.toml: the core and each extra."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    pinned = pins(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        pinned.update(pins(extra))
    return pinned


def env_pins(env_file: Path) -> dict[str, str]:
    """The pip pins of a conda env file."""
    env = yaml.safe_load(env_file.read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert pip_sections, f"{env_file.name}: no pip section"
    return pins(pip_sections[0])


def rule_env_files(root: Path) -> set[Path]:
    """The env files that some rule's ``conda:`` names."""
    return {
        root / env
        for rules in (root / "rules").glob("*.smk")
        for env in re.findall(r'"\.\./(envs/[^"]+)"', rules.read_text())
    }


def test_every_env_pin_matches_pyproject(root: Path) -> None:
    pinned = pyproject_pins(root)
    env_files = sorted((root / "envs").glob("*.yaml"))
    assert env_files, "no conda env files under envs/"
    for env_file in env_files:
        for name, version in env_pins(env_file).items():
            assert name in pinned, f"{env_file.name}: {name} is not pinned in pyproject.toml"
            assert version == pinned[name], (
                f"{env_file.name}: {name}=={version} but pyproject.toml pins {pinned[name]}"
            )


def test_the_image_holds_what_every_rule_env_holds(root: Path) -> None:
    """Under --sdm apptainer every rule runs in the one image, so it installs each rule
    env's pins, and Snakemake's (the workflow extra), each at pyproject.toml's version,
    and nothing else."""
    pinned = pyproject_pins(root)
    image = image_pins(root / "containers" / "Dockerfile")
    for name, version in image.items():
        assert name in pinned, f"containers/Dockerfile: {name} is not pinned in pyproject.toml"
        assert version == pinned[name], (
            f"containers/Dockerfile: {name}=={version} but pyproject.toml pins {pinned[name]}"
        )
    expected = {}
    for env_file in rule_env_files(root):
        expected.update(env_pins(env_file))
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    expected.update(pins(project["optional-dependencies"]["workflow"]))
    assert set(image) == set(expected), (
        f"containers/Dockerfile lacks {sorted(set(expected) - set(image))}, "
        f"has more: {sorted(set(image) - set(expected))}"
    )


def test_core_dependencies_are_in_the_sampling_env(root: Path) -> None:
    """The sampling scripts import only core dependencies: the env must have all."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert env_pins(root / "envs/sample.yaml") == pins(project["dependencies"])


def test_every_conda_directive_points_at_an_env_file(root: Path) -> None:
    for rules in (root / "rules").glob("*.smk"):
        for env in re.findall(r'"\.\./(envs/[^"]+)"', rules.read_text()):
            assert (root / env).is_file(), f"{rules.name} refers to missing {env}"
