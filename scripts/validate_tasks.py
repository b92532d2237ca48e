"""Snakemake entry: validate one shard of tasks in sandboxes (oracle 1, no-op 0)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.generate.stage import validate_shard
from tmax.logs import setup_logging
from tmax.settings import SandboxSection

setup_logging(snakemake.log[0])
validate_shard(
    snakemake.input.tasks,
    snakemake.params.backend,
    snakemake.output[0],
    # not a param: changing it reruns nothing
    workers=SandboxSection.of(snakemake.config["sandbox"]).max_concurrency,
)
