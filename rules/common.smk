# Helpers shared by every stage: config validation, paths, input functions.
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from tmax.config import ConfigError, validate_config  # noqa: E402
from tmax.generate.fingerprint import generator_fingerprint  # noqa: E402
from tmax.sandbox import images  # noqa: E402
from tmax.taxonomy.model import load_taxonomy, packaged_taxonomy_path  # noqa: E402
from tmax.taxonomy.sampler import shard_bounds  # noqa: E402

# Validate before any job starts; fill schema defaults into the live config.
try:
    _validated = validate_config(config, source="workflow config")
except ConfigError as error:
    raise WorkflowError(str(error)) from None
config.clear()
config.update(_validated)


wildcard_constraints:
    shard=r"\d{5}",
    domain=r"[a-z_]+",


SPEC_SHARDS = shard_bounds(
    config["sampler"]["n_specs"], config["sampler"]["shard_size"]
)
DOMAINS = list(load_taxonomy(config["taxonomy"]).domains)


def taxonomy_file():
    """The taxonomy YAML: an input of sampling, so editing it reruns the sampler."""
    return config["taxonomy"] or str(packaged_taxonomy_path())


def domain_definition(wildcards):
    """The Dockerfile a domain's base image is built from (an input: edits rebuild)."""
    return str(images.domain_definition(wildcards.domain))


def spec_shard_files():
    return [f"results/specs/shards/{i:05d}.parquet" for i in range(len(SPEC_SHARDS))]


def shard_range(wildcards):
    """[start, stop) of one spec shard; a param, so only resized shards rerun."""
    index = int(wildcards.shard)
    if index >= len(SPEC_SHARDS):
        raise WorkflowError(
            f"spec shard {index} does not exist ({len(SPEC_SHARDS)} shards)"
        )
    return list(SPEC_SHARDS[index])


def sampler_params():
    """Sampler settings that change every shard; n_specs and shard_size only
    decide which shards exist, so they are left out."""
    sampler = {
        k: v for k, v in config["sampler"].items() if k not in ("n_specs", "shard_size")
    }
    return {"seed": config["seed"], **sampler}


def task_shard_dirs():
    return [f"results/tasks/shards/{i:05d}" for i in range(len(SPEC_SHARDS))]


def validation_files():
    return [f"results/tasks/validation/{i:05d}.json" for i in range(len(SPEC_SHARDS))]


def final_outputs():
    return [
        "results/specs/specs.parquet",
        "results/specs/balance.json",
        "results/specs/balance.md",
        "results/tasks/tasks.parquet",
        "results/tasks/report.json",
        "results/tasks/report.md",
    ]
