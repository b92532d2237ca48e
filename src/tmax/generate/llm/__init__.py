"""The paper's LLM task generator (§3.1): multi-stage prompting of an
OpenAI-compatible endpoint, a build-and-check loop in a sandbox, cached calls.

    from tmax.generate.llm.settings import LLMSettings
    from tmax.generate.llm.shard import generate_llm_shard

    summary = generate_llm_shard("specs.parquet", "tasks/00000", LLMSettings.from_config(cfg))

The package imports none of its modules: they import each other, so re-exports here
would make the package and its modules one import cycle.
"""
