"""Config validation: every mistake is caught up front and named precisely."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.workflow.rerun_matrix import reordered
from tmax.config import ConfigError, config_hash, load_config, schema, validate_config
from tmax.sandbox import BACKENDS, backend_class, default_backend


def problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return caught.value.problems


@pytest.mark.parametrize("name", ["config.yaml", "configs/paper.yaml"])
def test_shipped_configs_are_valid(root: Path, name: str) -> None:
    config = load_config(root / name)
    assert config["sampler"]["n_specs"] > 0


def test_paper_config_carries_the_paper_recipe(root: Path) -> None:
    config = load_config(root / "configs/paper.yaml")
    rl = config["rl"]
    assert config["sampler"]["n_specs"] == 14600
    assert [m["name"] for m in config["models"] if "rl_data" not in m] == [
        "qwen3.5-2b",
        "qwen3.5-4b",
        "qwen3.5-9b",
        "qwen3.6-27b",
    ]
    # the RL-dataset ablation: the 9B model on each prior dataset with environments,
    # evaluated on TB-Lite under the tmax harness only
    ablation = {m["rl_data"]: m for m in config["models"] if "rl_data" in m}
    assert set(ablation) == {
        "termigen", "cli-gym", "endless-terminals", "openthinker-agent", "swe-smith",
        "terminaltraj", "tmax-15k",
    }  # fmt: skip
    for model in ablation.values():
        assert model["path"] == "Qwen/Qwen3.5-9B"
        assert model["evaluation"] == {
            "variants": ["tmax"], "benchmarks": ["tb-lite"], "harnesses": ["tmax"],
        }  # fmt: skip
    assert (rl["group_size"], rl["prompts_per_step"], rl["steps"]) == (32, 8, 500)
    assert rl["learning_rate"] == pytest.approx(1e-6)
    assert (rl["loss"], rl["dppo_divergence"], rl["dppo_threshold"]) == ("dppo", "binary_tv", 0.1)
    assert (rl["max_tool_calls"], rl["max_total_tokens"]) == (64, 65536)
    assert len(config["evaluation"]["harnesses"]) == 4
    assert set(config["evaluation"]["benchmarks"]) == {
        "terminal-bench-2.0",
        "tb-lite",
        "swe-bench-verified",
        "aime",
    }


def test_defaults_are_filled(raw_config: dict[str, Any]) -> None:
    del raw_config["rl"]
    del raw_config["sampler"]["shard_size"]
    config = validate_config(raw_config)
    assert config["rl"]["dppo_threshold"] == 0.1
    assert config["rl"]["group_size"] == 32
    assert config["sampler"]["shard_size"] == 100


def test_typo_key_is_named_with_a_suggestion(raw_config: dict[str, Any]) -> None:
    raw_config["sampler"]["n_spec"] = raw_config["sampler"].pop("n_specs")
    found = " | ".join(problems(raw_config))
    assert "unknown key 'n_spec' in 'sampler'" in found
    assert "did you mean 'n_specs'" in found
    assert "'sampler' is missing a required key: 'n_specs'" in found


def test_unknown_top_level_section(raw_config: dict[str, Any]) -> None:
    raw_config["trainer"] = {}
    (problem,) = problems(raw_config)
    assert "unknown key 'trainer' in the top level" in problem
    assert "allowed keys:" in problem and "rl" in problem


def test_wrong_type_names_key_value_and_type(raw_config: dict[str, Any]) -> None:
    raw_config["rl"]["group_size"] = "thirty-two"
    (problem,) = problems(raw_config)
    assert problem == "'rl.group_size' = \"thirty-two\" has the wrong type; expected integer"


def test_out_of_range_names_the_bound(raw_config: dict[str, Any]) -> None:
    raw_config["rl"]["dppo_threshold"] = 0
    (problem,) = problems(raw_config)
    assert problem == "'rl.dppo_threshold' = 0 is out of range; it must be > 0"


def test_enum_lists_allowed_values(raw_config: dict[str, Any]) -> None:
    raw_config["sandbox"]["backend"] = "docker"
    (problem,) = problems(raw_config)
    assert "'sandbox.backend' = \"docker\" is not allowed" in problem
    assert '"podman", "bwrap", "apptainer"' in problem


def test_the_sandbox_backends_the_schema_allows_are_the_ones_that_open(
    raw_config: dict[str, Any],
) -> None:
    """``sandbox.backend``'s enum is BackendName's names, each with its class, and its
    default is the one settings built without a config fall back to."""
    backend = schema()["properties"]["sandbox"]["properties"]["backend"]
    assert tuple(backend["enum"]) == BACKENDS
    assert [backend_class(name).backend for name in BACKENDS] == list(BACKENDS)
    del raw_config["sandbox"]["backend"]
    assert validate_config(raw_config)["sandbox"]["backend"] == default_backend()


def test_nested_list_items_are_checked(raw_config: dict[str, Any]) -> None:
    raw_config["models"] = [{"name": "bad name!", "path": "x"}]
    (problem,) = problems(raw_config)
    assert problem.startswith("'models[0].name' = \"bad name!\"")


def test_negative_weight_in_a_mix(raw_config: dict[str, Any]) -> None:
    raw_config["sampler"]["fixture_mix"]["image"] = -1
    (problem,) = problems(raw_config)
    assert problem == "'sampler.fixture_mix.image' = -1 is out of range; it must be >= 0"


def test_relations_between_keys(raw_config: dict[str, Any]) -> None:
    raw_config["sampler"]["primitive_skills"] = {"min": 5, "max": 3}
    raw_config["models"] = [{"name": "a", "path": "x"}, {"name": "a", "path": "y"}]
    found = problems(raw_config)
    assert any("min' = 5 is greater than" in p for p in found)
    assert any("repeats the name(s) a" in p for p in found)


def test_all_problems_reported_at_once(raw_config: dict[str, Any]) -> None:
    raw_config["seed"] = -1
    raw_config["rl"]["steps"] = 0
    raw_config["evaluation"]["harnesses"] = ["claude"]
    assert len(problems(raw_config)) == 3


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sampler: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml"):
        load_config(bad)
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml")


def test_config_hash_is_stable_and_sensitive(config: dict[str, Any]) -> None:
    same = validate_config(config)
    assert config_hash(same) == config_hash(config)
    same["seed"] += 1
    assert config_hash(same) != config_hash(config)


def test_the_removal_ngram_must_be_checked(raw_config: dict) -> None:
    raw_config["decontamination"]["remove_ngram"] = 10
    with pytest.raises(ConfigError, match=r"'decontamination.remove_ngram' = 10 is not one of"):
        validate_config(raw_config)


def test_engines_on_inference_nodes_must_be_vllm(raw_config: dict) -> None:
    raw_config["models"][0]["rl"] = {"inference_nodes": 1}
    with pytest.raises(ConfigError, match=r"'models\[0\]\.rl\.inference_nodes' = 1 needs"):
        validate_config(raw_config)
    raw_config["models"][0]["rl"]["engine"] = "vllm"
    validate_config(raw_config)
    raw_config["rl"]["inference_nodes"] = 2
    with pytest.raises(ConfigError, match=r"'rl\.inference_nodes' = 2 needs 'rl\.engine'"):
        validate_config(raw_config)


@pytest.mark.parametrize("written", ["limits: off", "limits: 'off'", "limits: best_effort"])
def test_sandbox_limits_off_reads_as_written(raw_config: dict, written: str) -> None:
    """A bare `off` is YAML 1.1's false: both mean off, as the string every sandbox
    backend reads from $TMAX_SANDBOX_LIMITS."""
    raw_config["sandbox"].update(yaml.safe_load(written))
    limits = validate_config(raw_config)["sandbox"]["limits"]
    assert limits == written.split()[-1].strip("'")


def test_the_paper_run_is_what_its_config_says(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Snakemake merges configs/paper.yaml over config.yaml key by key, so each setting
    the embedded default's miniature makes (a cap on the other harnesses' tasks, their
    run counts, one training thread, the tiny model's SFT rate) reaches the paper's run
    unless paper.yaml sets it again: merged, it must equal paper.yaml alone."""
    from tmax.cli import _merged_config

    monkeypatch.chdir(root)
    merged = _merged_config([root / "configs/paper.yaml"])
    alone = load_config(root / "configs/paper.yaml")

    def leaks(a: Any, b: Any, path: str = "") -> list[str]:
        if isinstance(a, dict) and isinstance(b, dict):
            return [leak for key in sorted(set(a) | set(b))
                    for leak in leaks(a.get(key), b.get(key), f"{path}.{key}")]  # fmt: skip
        return [] if a == b else [f"{path}: {a!r} (merged) != {b!r} (paper.yaml)"]

    assert leaks(merged, alone) == []
    evaluation = merged["evaluation"]
    assert all(evaluation["harness_runs"].get(h) is None for h in evaluation["harnesses"])
    assert all(evaluation["harness_max_tasks"].get(h) is None for h in evaluation["harnesses"])


@pytest.mark.parametrize("name", ["config.yaml", "configs/paper.yaml"])
def test_one_config_spelled_otherwise_validates_to_the_same_text(root: Path, name: str) -> None:
    """Job params are compared by their text: key order, number spellings and written-out
    defaults must not change it."""
    raw = yaml.safe_load((root / name).read_text())
    expected = repr(validate_config(raw))
    assert repr(validate_config(reordered(raw))) == expected
    assert repr(validate_config(validate_config(raw))) == expected  # defaults written out
    respelled = yaml.safe_load(yaml.safe_dump(raw).replace("1.0e-04", "1e-4"))
    respelled["rl"]["learning_rate"] = f"{raw['rl']['learning_rate']:e}"  # a string in YAML 1.1
    respelled["seed"] = float(raw["seed"])
    respelled["evaluation"]["command_timeout_sec"] = f"{raw['evaluation']['command_timeout_sec']}.0"
    assert repr(validate_config(respelled)) == expected
    config = validate_config(raw)
    assert list(config) == sorted(config) and list(config["rl"]) == sorted(config["rl"])


def test_a_number_is_read_as_the_schema_says_and_only_there(raw_config: dict) -> None:
    raw_config["rl"]["learning_rate"] = "2e-4"
    raw_config["rl"]["steps"] = 18.0
    raw_config["evaluation"]["command_timeout_sec"] = 30.0
    raw_config["models"][0]["name"] = "1e3"  # a string setting keeps what it was given
    config = validate_config(raw_config)
    assert config["rl"]["learning_rate"] == 2e-4 and isinstance(
        config["rl"]["learning_rate"], float
    )
    assert config["rl"]["steps"] == 18 and isinstance(config["rl"]["steps"], int)
    assert config["evaluation"]["command_timeout_sec"] == 30
    assert isinstance(config["evaluation"]["command_timeout_sec"], int)
    assert config["models"][0]["name"] == "1e3"
    raw_config["rl"]["learning_rate"] = "fast"
    assert problems(raw_config) == [
        "'rl.learning_rate' = \"fast\" has the wrong type; expected number"
    ]


ONLY_VALIDATED = {"rl.kl_beta": "0 is its only value (the learner has no KL term)"}
"""Schema keys no code reads, each with the reason the schema still names it."""


def _leaf(key: str) -> str:
    return key.rsplit(".", 1)[-1].removesuffix("[]")


def test_every_setting_the_schema_names_is_read_somewhere(root: Path) -> None:
    """A key the schema accepts and nothing reads would be a setting that silently does
    nothing: its name must appear in the code (as a string key or an attribute)."""
    schema = yaml.safe_load((root / "src/tmax/schemas/config.schema.yaml").read_text())
    keys: set[str] = set()

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        for key, child in (node.get("properties") or {}).items():
            keys.add(f"{path}.{key}".lstrip("."))
            walk(child, f"{path}.{key}")
        for nested in ("items", "additionalProperties"):
            walk(node.get(nested), f"{path}[]")
        for option in [*node.get("anyOf", ()), *node.get("oneOf", ())]:
            walk(option, path)

    walk(schema, "")
    sources = [*(root / "src").rglob("*.py"), *(root / "rules").glob("*.smk"),
               root / "Snakefile", *(root / "scripts").glob("*.py")]  # fmt: skip
    code = "\n".join(path.read_text(errors="replace") for path in sources)
    unread = sorted(
        key for key in keys - set(ONLY_VALIDATED)
        if not re.search(rf"[\"']{re.escape(_leaf(key))}[\"']|\.{re.escape(_leaf(key))}\b", code)
    )  # fmt: skip
    assert len(keys) > 150 and unread == []
    assert set(ONLY_VALIDATED) <= keys
