"""A shard of specs through the LLM generator: threads, a progress bar, a summary.

Specs run concurrently (``settings.concurrency`` workers; the endpoint client caps
in-flight requests at the same number), image checks share a smaller pool of
sandbox slots. The shard writes the same ``_generation_failures.json`` as the
procedural generator, so quarantined specs reach validation and the report, plus
``_llm_generation.json`` with reasons counted, token usage, cost and cache hits.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.progress import Progress

from tmax.generate.llm.cache import CallCache
from tmax.generate.llm.check import EnvironmentCheck, SandboxCheck
from tmax.generate.llm.endpoint import GeneratorClient
from tmax.generate.llm.pipeline import Pipeline, SpecOutcome
from tmax.generate.llm.prompts import prompt_hashes
from tmax.generate.llm.settings import LLMSettings
from tmax.io import write_json
from tmax.models.client import ChatModel
from tmax.taxonomy import TaskSpec, read_specs

log = logging.getLogger("tmax.generate.llm")

FAILED_FILE = "_generation_failures.json"  # the procedural stage's name for the same file
SUMMARY_FILE = "_llm_generation.json"


def generate_llm_shard(
    specs_path: str | Path,
    output_dir: str | Path,
    settings: LLMSettings,
    *,
    check: EnvironmentCheck | None = None,
    model: ChatModel | None = None,
    workdir: str | Path = ".",
) -> dict[str, Any]:
    """Generate every spec of a shard into ``output_dir/<spec_id>/``; returns the summary.

    ``check`` replaces the sandbox build-and-test (tests, benchmarks); ``model``
    replaces the OpenAI-compatible endpoint.
    """
    return generate_llm_specs(
        list(read_specs(specs_path)),
        output_dir,
        settings,
        check=check,
        model=model,
        workdir=workdir,
    )


def generate_llm_specs(
    specs: Sequence[TaskSpec],
    output_dir: str | Path,
    settings: LLMSettings,
    *,
    check: EnvironmentCheck | None = None,
    model: ChatModel | None = None,
    workdir: str | Path = ".",
) -> dict[str, Any]:
    output_dir = Path(output_dir)
    if model is None and settings.api_key_env and settings.api_key_env not in os.environ:
        raise ValueError(
            f"generation.endpoint.api_key_env names ${settings.api_key_env}, which is not set "
            "(export the endpoint's key under that name, or drop api_key_env for a keyless "
            "local server)"
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    cache = CallCache(settings.cache_path(workdir))
    client = GeneratorClient(settings, cache, model)
    pipeline = Pipeline(
        client,
        check or SandboxCheck(settings.sandbox_backend, run_id=f"llm-gen-{output_dir.name}"),
        output_dir,
        threading.BoundedSemaphore(settings.sandbox_concurrency),
    )
    started = time.monotonic()
    outcomes: list[SpecOutcome] = []
    with (
        ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="llm-gen") as pool,
        Progress(disable=len(specs) < 2) as progress,
    ):
        bar = progress.add_task(
            f"generating {output_dir.name} with {settings.model}", total=len(specs)
        )
        for outcome in pool.map(pipeline.run, specs):
            outcomes.append(outcome)
            progress.advance(bar)
    shutil.rmtree(output_dir / ".staging", ignore_errors=True)
    wall = time.monotonic() - started
    summary = _summary(settings, outcomes, client, cache, wall)
    write_json(output_dir / FAILED_FILE, {o.spec_id: o.reason for o in outcomes if not o.ok})
    write_json(output_dir / SUMMARY_FILE, summary)
    log.info(
        "llm generation of %s: %d written, %d quarantined, %d request(s), %d cached, "
        "%d+%d tokens, $%.4f, %.1fs",
        output_dir,
        summary["written"],
        summary["quarantined"],
        summary["usage"]["requests"],
        summary["usage"]["cached_requests"],
        summary["usage"]["prompt_tokens"],
        summary["usage"]["completion_tokens"],
        summary["usage"]["cost_usd"],
        wall,
    )
    return summary


def _summary(
    settings: LLMSettings,
    outcomes: list[SpecOutcome],
    client: GeneratorClient,
    cache: CallCache,
    wall: float,
) -> dict[str, Any]:
    reasons = Counter(o.reason.split(":")[0] for o in outcomes if o.reason)
    usage = client.totals.to_dict()
    return {
        "model": settings.model,
        "base_url": settings.base_url,
        "prompt_hashes": prompt_hashes(),
        "specs": len(outcomes),
        "written": sum(o.ok for o in outcomes),
        "quarantined": sum(not o.ok for o in outcomes),
        "quarantine_reasons": dict(reasons.most_common()),
        "build_retries": sum(max(0, o.build_attempts - 1) for o in outcomes),
        "usage": usage,
        "cache": cache.stats(),
        "wall_sec": round(wall, 3),
        "requests_per_sec": round(usage["requests"] / wall, 3) if wall > 0 else 0.0,
        "specs_detail": {
            o.spec_id: {
                "ok": o.ok,
                "reason": o.reason,
                "build_attempts": o.build_attempts,
                "seconds": o.seconds,
            }
            for o in outcomes
        },
    }
