"""Typed settings (tmax.settings): one object per section, the schema's keys and
defaults, the config's values as they are, no stage reading the raw mapping, and no
default written a second time in the classes built from a section."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tmax.config import ConfigError, load_config, schema, validate_config
from tmax.rl.launch.plan import Hardware
from tmax.rl.recipe import model_rl
from tmax.settings import (
    SECTIONS,
    LLMSection,
    RLSection,
    Section,
    SFTSection,
    SkillsSection,
)
from tmax.tracking import TrackingSettings

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
    assert RLSettings.from_config(RLSection.of(section), 7) == RLSettings.from_config(section, 7)


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


def _schema_node(path: tuple[str, ...]) -> dict[str, Any]:
    node = schema()["properties"][path[0]]
    for key in path[1:]:
        node = node["properties"][key]
    return node


EVERY_SECTION = [*SECTIONS.values(), SkillsSection, LLMSection, Hardware, TrackingSettings]


@pytest.mark.parametrize("cls", EVERY_SECTION, ids=lambda cls: cls.__name__)
def test_every_section_has_the_schemas_keys_and_defaults(cls: type[Section]) -> None:
    """A key the schema gives a default has it as the field's default; one it gives none
    is required (``sampler.n_specs``) or None while unset, and left out when written
    back (``generation.endpoint``, difficulty's own budgets)."""
    properties = _schema_node(cls.PATH)["properties"]
    assert _names(cls) == set(properties)
    for f in dataclasses.fields(cls):
        if f.name in cls.NESTED:
            assert f.default_factory() == cls.NESTED[f.name]()  # type: ignore[misc]
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            assert "default" not in properties[f.name], f.name  # required
            continue
        value = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        if "default" in properties[f.name]:
            expected = properties[f.name]["default"]
            assert value == (tuple(expected) if isinstance(expected, list) else expected), f.name
        else:
            assert f.name in cls.UNSET and value is None, f.name


@pytest.mark.parametrize("path", CONFIGS)
def test_every_section_is_kept_as_the_config_holds_it(path: str) -> None:
    config = load_config(ROOT / path)
    for name, cls in SECTIONS.items():
        typed = cls.of(config[name])
        assert json.dumps(typed.asdict()) == json.dumps(config[name]), name
        assert cls.of(typed) is typed


def test_a_section_key_the_object_lacks_is_named() -> None:
    from tmax.settings import EvaluationSection, SamplerSection

    with pytest.raises(ConfigError, match=re.escape("'evaluation.temprature' is not a setting")):
        EvaluationSection.of({"temprature": 0.7})
    with pytest.raises(
        ConfigError, match=re.escape("'sampler.primitive_skills.maximum' is not a setting")
    ):
        SamplerSection.of({"n_specs": 4, "primitive_skills": {"maximum": 3}})


SECTION_NAMES = (*SECTIONS, "hardware", "tracking")
SECTION_READ = re.compile(
    r"""\bconfig\b[^\n#]*?["'](?:""" + "|".join(SECTION_NAMES)
    + r""")["']\s*(?:,[^)]*)?[)\]](?:\s*or\s*\{\}\s*\))?\s*(?:\[|\.get\()"""
)  # fmt: skip
"""A key read straight from a raw section: ``config["sampler"]["n_specs"]``,
``config.get("generation", {}).get("tier")``."""

HASHED = {"src/tmax/datasets/convert.py"}
"""Files hashed byte for byte into a fingerprint (converter_fingerprint): editing one
reconverts every dataset, so a raw read there stays until the fingerprint stops
hashing bytes."""


def test_no_stage_reads_a_raw_section() -> None:
    """Stage code (src/tmax, the rule scripts) reads the other sections through their
    objects too. The rules themselves read Snakemake's validated ``config``: a param
    must be a plain value (Snakemake drops a param it cannot ``repr`` from its rerun
    check, so an object there would silently never rerun anything)."""
    sources = [*(ROOT / "src/tmax").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    reads = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        if str(path.relative_to(ROOT)) not in SETTINGS_MODULES | HASHED
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SECTION_READ.search(line)
    ]
    assert reads == [], "read the section's object (tmax.settings.SECTIONS) instead:\n" + "\n".join(
        reads
    )


def test_the_section_reader_finds_raw_reads() -> None:
    """The pattern above matches what it names (else the test could not fail)."""
    for line in ('n = config["sampler"]["n_specs"]',
                 'tier = (config or {}).get("generation", {}).get("tier", "full")',
                 'x = snakemake.config["sandbox"]["max_concurrency"]',
                 'ok = config.get("hardware", {}).get("plan_check", True)',
                 'ok = (config.get("hardware") or {}).get("plan_check", True)'):  # fmt: skip
        assert SECTION_READ.search(line), line
    assert not SECTION_READ.search('section = SamplerSection.of(config["sampler"])')


BUILT_FROM_SECTIONS = {
    # class: (module, the section its fields come from, fields named differently)
    "LabelSettings": ("src/tmax/datasets/labels.py", ("labelling",), {}),
    "LLMSettings": (
        "src/tmax/generate/llm/settings.py",
        ("generation", "llm"),
        {
            "build_retries": ("generation", "max_build_retries"),
            "sandbox_concurrency": ("sandbox", "max_concurrency"),
        },
    ),
    "DifficultySettings": (
        "src/tmax/datasets/difficulty.py",
        ("difficulty",),
        {"concurrency": ("sandbox", "max_concurrency"), "engine": ("evaluation", "engine")},
    ),
    "SamplerSettings": (
        "src/tmax/taxonomy/sampler.py",
        ("sampler",),
        {
            "min_skills": ("sampler", "primitive_skills", "min"),
            "max_skills": ("sampler", "primitive_skills", "max"),
            "skill_scope": ("sampler", "primitive_skills", "scope"),
        },
    ),
    "Hardware": ("src/tmax/rl/launch/plan.py", ("hardware",), {}),
    "TrackingSettings": ("src/tmax/tracking.py", ("tracking",), {}),
    "EngineSettings": (
        "src/tmax/rl/engines/remote.py",
        ("rl",),
        {
            "tensor_parallel": ("rl", "engine_tensor_parallel"),
            "dtype": ("rl", "engine_dtype"),
            "options": ("rl", "engine_options"),
            "ready_timeout": ("rl", "engine_start_timeout_sec"),
            "untrained": ("rl", "engine_untrained_weights"),
            "max_model_len": None,
            "threads": None,
        },  # max_model_len None: the model's own length; threads: the job's (from_config)
    ),
    # top_p None is the endpoint's own default, not evaluation.top_p's 1 (RL sends none)
    "HarnessSettings": ("src/tmax/harness/base.py", ("evaluation",), {"top_p": None}),
}
"""The classes a stage builds from a section (with what they resolve: the environment,
the taxonomy, other sections). A field renamed to None stands for no setting."""


def _literal_defaults(module: str, name: str) -> dict[str, str]:
    """The fields of class ``name`` whose default is written as a literal."""
    tree = ast.parse((ROOT / module).read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
    return {
        node.target.id: ast.unparse(node.value)
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        and node.value is not None
        and isinstance(node.value, (ast.Constant, ast.UnaryOp, ast.List, ast.Dict, ast.Tuple))
    }  # fmt: skip


@pytest.mark.parametrize("name", BUILT_FROM_SECTIONS)
def test_no_class_built_from_a_section_writes_a_default_again(name: str) -> None:
    """A field that stands for a setting the schema gives a default takes it from the
    schema (``schema_default``), never as a second literal that can drift from it."""
    module, section, renamed = BUILT_FROM_SECTIONS[name]
    properties = _schema_node(section)["properties"]
    settings = {key: (*section, key) for key in properties if "default" in properties[key]}
    settings.update(renamed)
    again = {
        field: f"{value} (the schema's {'.'.join(settings[field])})"
        for field, value in _literal_defaults(module, name).items()
        if settings.get(field) is not None
    }
    assert again == {}
