"""The paper's LLM task generator (§3.1): multi-stage prompting of an
OpenAI-compatible endpoint, a build-and-check loop in a sandbox, cached calls.

    summary = generate_llm_shard("specs.parquet", "tasks/00000", LLMSettings.from_config(cfg))
"""

from tmax.generate.llm.settings import LLMSettings
from tmax.generate.llm.shard import generate_llm_shard, generate_llm_specs

__all__ = ["LLMSettings", "generate_llm_shard", "generate_llm_specs"]
