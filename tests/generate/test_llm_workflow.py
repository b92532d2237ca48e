"""The llm backend inside Snakemake: a shard's job talks to a scripted endpoint on
loopback, builds and checks each task in bwrap, and reruns only for what changed;
a forced rerun is answered from the model-call cache (outside the outputs)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.generate.llm_support import GOOD, stage_of
from tests.workflow.test_snakemake import copy_workflow, edit_config, planned_jobs, snakemake
from tmax.models.scripted_server import Reply, scripted_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("podman") is None,
        reason="builds and checks tasks in sandboxes: needs root, bwrap and podman",
    ),
]

SHARDS = ["results/tasks/shards/00000", "results/tasks/shards/00001"]


def any_domain(request: dict[str, Any]) -> Reply:
    """Good answers for any spec: the environment answer starts with the base lines
    the prompt asked for (they differ by domain)."""
    stage = stage_of(request)
    content = GOOD[stage]
    if stage == "environment":
        prompt = request["messages"][-1]["content"]
        base = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
        content = content.replace(content.split("\nRUN mkdir")[0], "<dockerfile>\n" + base)
    return Reply(content=content)


def test_shards_are_generated_cached_and_rerun_only_on_change(tmp_path: Path) -> None:
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf", small=False)
    with scripted_server(any_domain) as server:

        def use_llm(config: dict[str, Any]) -> None:
            config["sampler"].update({"n_specs": 4, "shard_size": 2})
            config["generation"] = {
                "backend": "llm",
                "endpoint": {"base_url": server.base_url, "model": "g", "max_concurrency": 2},
                "llm": {"backoff_sec": 0.01},
            }

        edit_config(workdir, use_llm)
        snakemake(workdir, *SHARDS)
        assert server.request_count == 16  # 4 specs x 4 stages
        for shard in SHARDS:
            summary = json.loads((workdir / shard / "_llm_generation.json").read_text())
            assert summary["written"] == 2, summary
        assert planned_jobs(workdir, *SHARDS) == {}
        snakemake(workdir, *SHARDS, "--forcerun", "generate_tasks")
        assert server.request_count == 16  # every call answered from results/cache/llm
        edit_config(workdir, lambda c: c["generation"]["llm"].update({"temperature": 0.1}))
        assert planned_jobs(workdir, *SHARDS) == {"generate_tasks": 2}
