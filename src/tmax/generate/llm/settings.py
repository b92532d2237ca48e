"""The LLM generator's settings: config keys, with the endpoint overridable from the
environment so no URL or key has to live in a committed file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from tmax.config import schema_default
from tmax.generate.llm.prompts import prompts_fingerprint
from tmax.models.client import ENDPOINT_TIMEOUT_SEC
from tmax.sandbox import BackendName, default_backend
from tmax.settings import GenerationSection, SandboxSection

BASE_URL_ENV = "TMAX_GENERATOR_BASE_URL"
MODEL_ENV = "TMAX_GENERATOR_MODEL"
DEFAULT_CACHE_DIR: str = schema_default("generation", "llm", "cache_dir")
GENERATOR_VERSION = "llm/1"


@dataclass(frozen=True)
class LLMSettings:
    """Everything the LLM backend needs; see ``generation`` in the config schema."""

    model: str
    base_url: str
    api_key_env: str | None = None
    concurrency: int = 8
    """Requests at once when the endpoint gives no ``max_concurrency``."""
    timeout_sec: float = ENDPOINT_TIMEOUT_SEC
    max_retries: int = schema_default("generation", "llm", "max_retries")
    backoff_sec: float = schema_default("generation", "llm", "backoff_sec")
    temperature: float = schema_default("generation", "llm", "temperature")
    max_tokens: int = schema_default("generation", "llm", "max_tokens")
    build_retries: int = schema_default("generation", "max_build_retries")
    cost_per_mtok_input: float = schema_default("generation", "llm", "cost_per_mtok_input")
    cost_per_mtok_output: float = schema_default("generation", "llm", "cost_per_mtok_output")
    cache_dir: str = DEFAULT_CACHE_DIR
    sandbox_backend: BackendName = field(default_factory=default_backend)
    sandbox_concurrency: int = schema_default("sandbox", "max_concurrency")

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> LLMSettings:
        """Resolve from a validated config; ``$TMAX_GENERATOR_BASE_URL`` and
        ``$TMAX_GENERATOR_MODEL`` win over the config's endpoint when set."""
        environ = os.environ if environ is None else environ
        generation = GenerationSection.of(config.get("generation", {}))
        endpoint = generation.endpoint or {}
        llm = generation.llm
        sandbox = SandboxSection.of(config.get("sandbox", {}))
        base_url = environ.get(BASE_URL_ENV) or endpoint.get("base_url")
        model = environ.get(MODEL_ENV) or endpoint.get("model")
        if not base_url or not model:
            raise ValueError(
                "generation.backend is 'llm' but no endpoint is set: give "
                "generation.endpoint.base_url and .model in the config, or set "
                f"${BASE_URL_ENV} and ${MODEL_ENV}"
            )
        return cls(
            model=model,
            base_url=base_url,
            api_key_env=endpoint.get("api_key_env"),
            concurrency=int(endpoint.get("max_concurrency", cls.concurrency)),
            timeout_sec=float(endpoint.get("timeout_sec", cls.timeout_sec)),
            max_retries=int(llm.max_retries),
            backoff_sec=float(llm.backoff_sec),
            temperature=float(llm.temperature),
            max_tokens=int(llm.max_tokens),
            build_retries=int(generation.max_build_retries),
            cost_per_mtok_input=float(llm.cost_per_mtok_input),
            cost_per_mtok_output=float(llm.cost_per_mtok_output),
            cache_dir=str(llm.cache_dir),
            sandbox_backend=cast(BackendName, sandbox.backend),
            sandbox_concurrency=int(sandbox.max_concurrency),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LLMSettings:
        return cls(**{key: value for key, value in data.items() if key != "prompts"})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def output_params(self) -> dict[str, Any]:
        """The settings that change what is generated, plus the prompts' hash: the
        Snakemake parameter that reruns a shard when one of them changes (throughput
        knobs such as concurrency and timeouts are left out on purpose)."""
        return {
            "version": GENERATOR_VERSION,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "build_retries": self.build_retries,
            "sandbox_backend": self.sandbox_backend,
            "prompts": prompts_fingerprint(),
        }

    def cache_path(self, workdir: str | Path = ".") -> Path:
        path = Path(self.cache_dir)
        return path if path.is_absolute() else Path(workdir) / path
