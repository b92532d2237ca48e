"""Load and validate the workflow configuration.

The schema (``tmax/schemas/config.schema.yaml``) closes every object, so a typo'd
key, a wrong type or an out-of-range value is caught before any job starts. Errors
name the key, the value and what is allowed, and all of them are reported at once.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_RESOURCE = "schemas/config.schema.yaml"


class ConfigError(ValueError):
    """A configuration that does not satisfy the schema; ``problems`` lists each one."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"invalid {source} ({len(problems)} problem(s)):\n{lines}")


@cache
def schema() -> dict[str, Any]:
    """The configuration JSON schema, loaded from the package."""
    text = resources.files("tmax").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = yaml.safe_load(text)
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def schema_default(*path: str) -> Any:
    """The schema's default of the key at ``path`` (``"rl", "sft", "steps"``): the one
    place a default is written (typed settings objects take theirs from here)."""
    root = schema()
    node: Mapping[str, Any] = root
    for key in path:
        node = _resolve(node["properties"][key], root)
    if "default" not in node:
        raise KeyError(f"the config schema gives {'.'.join(path)} no default")
    return copy.deepcopy(node["default"])


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**root["$defs"][ref.removeprefix("#/$defs/")], **node}
    return node


def _typed(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """:func:`_resolve`, and an override of a top-level section (``x-keys-of``:
    ``models[].rl``) read with that section's keys, for their types only (defaults are
    never filled into an override)."""
    node = _resolve(node, root)
    section = node.get("x-keys-of")
    if isinstance(section, str):
        return {**root["properties"][section], "type": "object"}
    return node


def _fill_defaults(value: Any, node: Mapping[str, Any], root: Mapping[str, Any]) -> None:
    """Insert schema defaults into ``value`` in place, recursing into objects and arrays."""
    node = _resolve(node, root)
    if isinstance(value, dict):
        for key, sub in node.get("properties", {}).items():
            sub = _resolve(sub, root)
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _fill_defaults(value[key], sub, root)
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for item in value:
            _fill_defaults(item, node["items"], root)


_NUMBER = re.compile(r"[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
"""A number as YAML 1.2 writes it: ``1e-4`` too, which YAML 1.1 (PyYAML, Snakemake's
``--config``) reads as a string."""


_BOOLEANS = {word: truth for truth, words in ((True, "true True TRUE yes Yes YES on On ON"),
                                             (False, "false False FALSE no No NO off Off OFF"))
             for word in words.split()}  # fmt: skip
"""YAML 1.1's booleans, for a boolean setting given as text."""
_NULLS = frozenset({"null", "Null", "NULL", "~", ""})
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", type(None): "null"}


def _types(node: Mapping[str, Any], root: Mapping[str, Any]) -> set[str]:
    """The JSON types a schema node allows (through ``$ref`` and ``anyOf``/``oneOf``)."""
    node = _typed(node, root)
    declared = node.get("type")
    found = set([declared] if isinstance(declared, str) else declared or [])
    for key in ("anyOf", "oneOf"):
        for option in node.get(key, ()):
            found |= _types(option, root)
    for allowed in ([node["const"]] if "const" in node else []) + list(node.get("enum", ())):
        found.add(_JSON_TYPES.get(type(allowed), "string"))
    return found


def _object_nodes(node: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The object schemas a node allows (itself, or its ``anyOf`` options)."""
    node = _typed(node, root)
    options = [node] if "properties" in node or "additionalProperties" in node else []
    for key in ("anyOf", "oneOf"):
        for option in node.get(key, ()):
            options += _object_nodes(option, root)
    return options


def _child(node: Mapping[str, Any], root: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    for option in _object_nodes(node, root):
        if key in option.get("properties", {}):
            return option["properties"][key]
        extra = option.get("additionalProperties")
        if isinstance(extra, Mapping):
            return extra
    return {}


def _items(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    node = _typed(node, root)
    for candidate in (node, *node.get("anyOf", ()), *node.get("oneOf", ())):
        items = _typed(candidate, root).get("items")
        if isinstance(items, Mapping):
            return items
    return {}


def canonical(value: Any, node: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """``value`` written one way: mappings with their keys sorted, at every level; a
    number where the schema wants one, however it was written (``1e-4`` and ``0.0001``
    are the float 0.0001; ``30``, ``30.0`` and ``3e1`` the integer 30). Job params and
    recipe digests are built from the config, and Snakemake compares params by their
    text: two spellings of one setting must not read as a change (docs/reruns.md). Where
    the schema does not allow a string, a boolean, null or number given as text (as
    Snakemake's ``--config`` gives nested values) is read as what it spells."""
    if isinstance(value, Mapping):
        return {key: canonical(value[key], _child(node, root, str(key)), root)
                for key in sorted(value, key=str)}  # fmt: skip
    if isinstance(value, list | tuple):
        items = _items(node, root)
        return [canonical(item, items, root) for item in value]
    types = _types(node, root)
    numeric = types & {"number", "integer"} and "string" not in types
    if isinstance(value, str) and "string" not in types:
        # Snakemake's --config reads a nested value as text (YAML's BaseLoader): "true",
        # "null" and "0.7" there are what the schema wants, not strings.
        word = value.strip()
        if "boolean" in types and word in _BOOLEANS:
            return _BOOLEANS[word]
        if "null" in types and word in _NULLS:
            return None
        if numeric and _NUMBER.fullmatch(word):
            value = float(word.replace("_", ""))
    if not numeric or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if float(value).is_integer() and abs(value) < 2**53:
        return int(value)  # a whole number is written as one: 30 for 30.0
    return float(value)


def _key(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    value = json.dumps(error.instance, default=str)
    if len(value) > 80:
        value = value[:77] + "..."
    keyword = error.validator
    if keyword == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        messages = []
        for name in extra:
            hint = difflib.get_close_matches(name, allowed, n=1)
            did_you_mean = f" (did you mean '{hint[0]}'?)" if hint else ""
            where = f"'{key}'" if error.absolute_path else "the top level"
            messages.append(
                f"unknown key '{name}' in {where}{did_you_mean}; allowed keys: {', '.join(allowed)}"
            )
        return "; ".join(messages)
    if keyword == "required":
        return f"'{key}' is missing a required key: {error.message.split(' ')[0]}"
    if keyword == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return f"'{key}' = {value} is not allowed; choose one of: {allowed}"
    if keyword == "type":
        return f"'{key}' = {value} has the wrong type; expected {error.validator_value}"
    if keyword in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bound = {
            "minimum": ">=",
            "exclusiveMinimum": ">",
            "maximum": "<=",
            "exclusiveMaximum": "<",
        }[keyword]
        return f"'{key}' = {value} is out of range; it must be {bound} {error.validator_value}"
    if keyword in ("oneOf", "anyOf") and error.context:
        # Report the branch that got furthest: a wrong type means the value was
        # not meant for that branch at all (e.g. the `null` of "weights or null").
        specific = [e for e in error.context if e.validator != "type"] or list(error.context)
        best = max(specific, key=lambda e: len(e.absolute_path))
        return _describe(best)
    return f"'{key}' = {value}: {error.message}"


def validate_config(config: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Return a validated deep copy of ``config`` with schema defaults filled in.

    Raises:
        ConfigError: listing every problem, each naming the key, value and what is allowed.
    """
    if not isinstance(config, Mapping):
        raise ConfigError([f"expected a mapping of keys, got {type(config).__name__}"], source)
    root = schema()
    filled = canonical(copy.deepcopy(dict(config)), root, root)
    _fill_defaults(filled, root, root)
    filled = canonical(filled, root, root)  # defaults too, and in key order
    validator = jsonschema.Draft202012Validator(root)
    errors = sorted(
        validator.iter_errors(filled), key=lambda e: (list(map(str, e.path)), e.message)
    )
    problems = [_describe(error) for error in errors]
    problems += _semantic_problems(filled) if not problems else []
    if problems:
        raise ConfigError(problems, source)
    for section, key in (("sandbox", "limits"), ("evaluation", "network")):
        if filled[section][key] is False:  # `off` in YAML 1.1
            filled[section][key] = "off"
    return filled


def _semantic_problems(config: Mapping[str, Any]) -> list[str]:
    """Checks a JSON schema cannot express (relations between keys)."""
    problems = []
    skills = config["sampler"]["primitive_skills"]
    if skills["min"] > skills["max"]:
        problems.append(
            f"'sampler.primitive_skills.min' = {skills['min']} is greater than "
            f"'sampler.primitive_skills.max' = {skills['max']}"
        )
    names = [model["name"] for model in config.get("models", [])]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        problems.append(
            f"'models' repeats the name(s) {', '.join(duplicates)}; names must be unique"
        )
    decontamination = config["decontamination"]
    if decontamination["remove_ngram"] not in decontamination["ngram_sizes"]:
        problems.append(
            f"'decontamination.remove_ngram' = {decontamination['remove_ngram']} is not one of "
            f"'decontamination.ngram_sizes' {decontamination['ngram_sizes']}"
        )
    sources = config.get("datasets", {}).get("sources", [])
    problems += _dataset_source_problems(sources)
    problems += _rl_data_problems(config.get("models", []), sources)
    problems += _engine_problems(config)
    return problems


def _engine_problems(config: Mapping[str, Any]) -> list[str]:
    """Engines on inference nodes are vLLM servers (the transformers engine lives in the
    training process)."""
    problems = []
    base = config.get("rl", {})
    scopes = [("rl", base)] + [
        (f"models[{i}].rl", {**base, **(model.get("rl") or {})})
        for i, model in enumerate(config.get("models", []))
    ]
    for key, rl in scopes:
        if rl.get("inference_nodes") and rl.get("engine") != "vllm":
            problems.append(
                f"'{key}.inference_nodes' = {rl['inference_nodes']} needs '{key}.engine' = "
                f"vllm (got {rl.get('engine')!r}): engines on their own nodes are vLLM servers"
            )
    return problems


def _rl_data_problems(
    models: list[Mapping[str, Any]], sources: list[Mapping[str, Any]]
) -> list[str]:
    """A model's ``rl_data`` names a configured prior dataset with environments."""
    layouts = {source["name"]: source["layout"] for source in sources}
    problems = []
    for index, model in enumerate(models):
        dataset = model.get("rl_data")
        if dataset is None:
            continue
        key = f"'models[{index}].rl_data' = {dataset!r}"
        if dataset not in layouts:
            allowed = ", ".join(layouts) or "none configured"
            problems.append(f"{key} is not a datasets.sources name; allowed: {allowed}")
        elif layouts[dataset] == "trajectories":
            problems.append(f"{key}: the dataset ships trajectories, no environments to train in")
        if not model.get("train", True):
            problems.append(f"{key} is set on a model with train: false; drop one of them")
    return problems


def _dataset_source_problems(sources: list[Mapping[str, Any]]) -> list[str]:
    """Each prior-dataset source names where its files are, and names are unique."""
    problems = []
    names = [source["name"] for source in sources]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        problems.append(
            f"'datasets.sources' repeats the name(s) {', '.join(duplicates)}; names must be unique"
        )
    for index, source in enumerate(sources):
        key = f"'datasets.sources[{index}]' ({source['name']})"
        if not any(source.get(where) for where in ("path", "git", "hf")):
            problems.append(f"{key} gives no location; set one of path, git or hf")
        if source.get("git") and source.get("hf"):
            problems.append(f"{key} sets both git and hf; choose one (path may go with either)")
        if source.get("git") and not source.get("path") and not source.get("revision"):
            problems.append(f"{key} reads git without a revision; set revision to a commit sha")
    return problems


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file and validate it (see :func:`validate_config`)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([f"file not found: {path}"], str(path)) from None
    except yaml.YAMLError as error:
        raise ConfigError([f"not valid YAML: {error}"], str(path)) from None
    return validate_config(raw if raw is not None else {}, str(path))


def config_hash(config: Mapping[str, Any]) -> str:
    """A short content hash of a (validated) config, for provenance records."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
