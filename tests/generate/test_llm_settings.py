"""The llm backend's settings: read from the config, the endpoint overridable from
the environment, checked by the schema, and fingerprinted for Snakemake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tmax.config import ConfigError, load_config, validate_config
from tmax.generate.fingerprint import generation_params
from tmax.generate.llm.settings import LLMSettings


def test_the_paper_config_selects_the_llm_backend_without_a_secret(root: Path) -> None:
    config = load_config(root / "configs/paper.yaml")
    settings = LLMSettings.from_config(config, environ={})
    assert config["generation"]["backend"] == "llm"
    assert settings.api_key_env == "TMAX_GENERATOR_API_KEY"  # a variable's name, not a key
    assert (settings.build_retries, settings.concurrency, settings.sandbox_backend) == (
        3,
        64,
        "apptainer",
    )
    assert settings.cache_dir == "results/cache/llm"


def test_the_environment_overrides_the_endpoint(root: Path) -> None:
    config = load_config(root / "configs/paper.yaml")
    environ = {"TMAX_GENERATOR_BASE_URL": "https://api.example/v1", "TMAX_GENERATOR_MODEL": "x"}
    settings = LLMSettings.from_config(config, environ=environ)
    assert (settings.base_url, settings.model) == ("https://api.example/v1", "x")


def test_an_llm_backend_without_an_endpoint_is_named(config: dict[str, Any]) -> None:
    config["generation"]["backend"] = "llm"
    with pytest.raises(ValueError, match="TMAX_GENERATOR_BASE_URL"):
        LLMSettings.from_config(config, environ={})


def test_the_schema_checks_the_llm_block(raw_config: dict[str, Any]) -> None:
    raw_config["generation"] = {"backend": "llm", "llm": {"temprature": 0.5, "max_tokens": 0}}
    with pytest.raises(ConfigError) as caught:
        validate_config(raw_config)
    text = str(caught.value)
    assert "unknown key 'temprature' in 'generation.llm' (did you mean 'temperature'?)" in text
    assert "'generation.llm.max_tokens' = 0 is out of range" in text


def test_generation_params_rerun_shards_only_for_output_settings(root: Path) -> None:
    config = load_config(root / "configs/paper.yaml")
    assert generation_params(load_config(root / "config.yaml")) == {}
    params = generation_params(config)
    assert set(params) == {
        "version",
        "model",
        "temperature",
        "max_tokens",
        "build_retries",
        "sandbox_backend",
        "prompts",
    }
    faster = {**config, "generation": {**config["generation"]}}
    faster["generation"]["endpoint"] = {**config["generation"]["endpoint"], "max_concurrency": 8}
    assert generation_params(faster) == params  # throughput knobs do not regenerate
