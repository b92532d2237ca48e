"""Typed settings (tmax.settings): one object per section, the schema's keys and
defaults, the config's values as they are, and no stage reading the raw mapping."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tmax.config import ConfigError, load_config, schema, validate_config
from tmax.rl.recipe import model_rl
from tmax.settings import RLSection, SFTSection

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["config.yaml", "configs/paper.yaml"]


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_objects_have_every_key_of_the_schema_and_no_other() -> None:
    rl = schema()["properties"]["rl"]["properties"]
    assert _names(RLSection) == set(rl)
    assert _names(SFTSection) == set(rl["sft"]["properties"])


def test_the_defaults_are_the_schemas() -> None:
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    filled = validate_config({**raw, "rl": {}})["rl"]
    assert RLSection() == RLSection.of(filled)
    assert RLSection().asdict() == filled


@pytest.mark.parametrize("path", CONFIGS)
def test_each_models_section_is_kept_as_the_config_holds_it(path: str) -> None:
    """Written back, the object is the section byte for byte (the launcher hands the
    ranks ``asdict()``): nothing is cast, reordered or dropped."""
    config = load_config(ROOT / path)
    for model in config["models"]:
        section = model_rl(config, model["name"])
        typed = RLSection.of(section)
        assert json.dumps(typed.asdict()) == json.dumps(section)
        assert RLSection.of(typed) is typed
        assert typed.sft == SFTSection.of(section["sft"])


def test_some_keys_are_completed_with_the_defaults() -> None:
    typed = RLSection.of({"group_size": 4, "sft": {"steps": 3}})
    assert (typed.group_size, typed.sft.steps) == (4, 3)
    assert typed.learning_rate == RLSection().learning_rate
    assert typed.sft.batch_size == SFTSection().batch_size


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"learnig_rate": 1e-6}, "'rl.learnig_rate' is not a setting"),
        ({"sft": {"step": 1}}, "'rl.sft.step' is not a setting"),
    ],
)
def test_a_key_the_section_lacks_is_named(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        RLSection.of(values)


def test_the_objects_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RLSection().steps = 3  # type: ignore[misc]


def test_the_recipe_is_the_trainers_settings() -> None:
    from tmax.rl.trainer import RLSettings

    config = load_config(ROOT / "configs/paper.yaml")
    section = model_rl(config, config["models"][0]["name"])
    assert RLSection.of(section).recipe(7) == RLSettings.from_config(section, 7)


READ = re.compile(r"""\brl\s*(\[\s*["']|\.get\()""")
"""A read of a raw rl mapping: ``rl["key"]``, ``rl['key']``, ``rl.get(``."""

SETTINGS_MODULES = {"src/tmax/settings.py", "src/tmax/config.py"}
"""Where the raw section may be read: the object's constructor, and the validator
(which checks the raw config before any object exists)."""


def test_no_stage_reads_the_raw_rl_mapping() -> None:
    sources = [*(ROOT / "src/tmax").rglob("*.py"), *(ROOT / "scripts").glob("*.py"),
               *(ROOT / "rules").glob("*.smk"), ROOT / "Snakefile"]  # fmt: skip
    reads = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        if str(path.relative_to(ROOT)) not in SETTINGS_MODULES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if READ.search(line)
    ]
    assert reads == [], "read the typed section (tmax.settings.RLSection) instead:\n" + "\n".join(
        reads
    )
