# Helpers shared by every stage: config validation, paths, input functions.
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from tmax.config import ConfigError, validate_config  # noqa: E402
from tmax.generate.fingerprint import (  # noqa: E402
    generation_params,
    generator_fingerprint,
    validator_fingerprint,
)
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
        "results/decontam/report.json",
        "results/decontam/report.md",
        "results/decontam/clean_tasks.parquet",
        "results/decontam/removed.json",
        "results/eval/summary.json",
        "results/eval/summary.md",
        "results/report/tables.md",
        "results/report/provenance.json",
    ]


# --- models and evaluation ----------------------------------------------------------

TINY_MODELS = ("tiny-qwen3",)
"""Model paths the workflow builds itself, offline (tmax.models.tiny)."""
MODELS = {model["name"]: model for model in config["models"]}
EVALUATION = config["evaluation"]
DECONTAMINATION = config["decontamination"]


wildcard_constraints:
    model="|".join(re.escape(name) for name in MODELS) or "^$",
    tiny="|".join(TINY_MODELS),
    benchmark="heldout|terminal-bench-2.0|tb-lite|swe-bench-verified|aime",
    harness="tmax|terminus-2|mini-swe-agent|openhands",
    run=r"\d+",


def base_model_dir(name):
    """The folder of a configured model: built here for the tiny model, a local
    folder when ``path`` is one; nothing for hub ids and external endpoints."""
    model = MODELS[name]
    if model.get("endpoint"):
        return []
    if model["path"] in TINY_MODELS:
        return f"results/models/{model['path']}"
    if Path(model["path"]).is_dir():
        return model["path"]
    return []


def model_dir(wildcards):
    return base_model_dir(wildcards.model)


def rl_config(name):
    """The rl section with the model's own overrides (``models[].rl``) applied."""
    return {**config["rl"], **MODELS[name].get("rl", {})}


def sft_params(name):
    """What the SFT warm-up depends on (so changing an RL-only knob keeps it)."""
    rl = rl_config(name)
    return {key: rl[key] for key in ("sft", "max_train_tasks", "max_tool_calls")}


def rl_start_model(wildcards):
    """RL starts from the SFT warm-up when it is on, else from the base model."""
    if rl_config(wildcards.model)["sft"]["steps"] > 0:
        return f"results/models/{wildcards.model}-sft"
    return base_model_dir(wildcards.model)


VARIANT_SUFFIX = {"base": "", "sft": "-sft", "tmax": "-tmax"}


def eval_models():
    """Every model evaluated, by label: each configured model's base, SFT and RL
    versions as ``evaluation.variants`` asks (SFT and RL only where they are run).
    ``dir`` is the local folder a job serves (none for hub ids and endpoints)."""
    models = {}
    for name, model in MODELS.items():
        for variant in EVALUATION["variants"]:
            if variant == "sft" and rl_config(name)["sft"]["steps"] == 0:
                continue
            if variant != "base" and not model.get("train", True):
                continue
            if variant == "base":
                models[name] = {**model, "dir": base_model_dir(name)}
            else:
                label = name + VARIANT_SUFFIX[variant]
                folder = f"results/models/{label}"
                models[label] = {"name": label, "path": folder, "dir": folder}
    return models


EVAL_MODELS = eval_models()


wildcard_constraints:
    eval_model="|".join(re.escape(name) for name in EVAL_MODELS) or "^$",


def eval_model_dir(wildcards):
    return EVAL_MODELS[wildcards.eval_model]["dir"]


def eval_model_entry(wildcards):
    """The model's config entry as the evaluation job needs it (no ``dir``)."""
    return {k: v for k, v in EVAL_MODELS[wildcards.eval_model].items() if k != "dir"}


def benchmark_inputs(wildcards):
    """Held-out tasks come from the generated export; others are fetched by the job."""
    if wildcards.benchmark == "heldout":
        return {"tasks": "results/tasks/tasks.parquet"}
    return {}


def eval_run_files(wildcards):
    runs = range(EVALUATION["runs"])
    base = (
        f"results/eval/{wildcards.eval_model}/{wildcards.benchmark}/{wildcards.harness}"
    )
    return [f"{base}/run{run}.json" for run in runs]


def eval_concurrency():
    return EVALUATION["concurrency"] or config["sandbox"]["max_concurrency"]


def eval_metric_files():
    return [
        f"results/eval/{model}/{benchmark}/{harness}/metrics.json"
        for model in EVAL_MODELS
        for benchmark in EVALUATION["benchmarks"]
        for harness in EVALUATION["harnesses"]
    ]


# --- tables, figures, report --------------------------------------------------------

REPORT = config["report"]


def report_reference_model():
    """``report.reference_model``, checked against the configured models."""
    name = REPORT["reference_model"]
    if name is not None and name not in MODELS:
        raise WorkflowError(
            f"report.reference_model is {name!r}; allowed: one of {sorted(MODELS)} or null"
        )
    return name


def report_run_files():
    """Every evaluation run: the tables recompute pass@1 from their trials, scoring
    infrastructure errors as failures as the paper does."""
    return [
        f"results/eval/{model}/{benchmark}/{harness}/run{run}.json"
        for model in EVAL_MODELS
        for benchmark in EVALUATION["benchmarks"]
        for harness in EVALUATION["harnesses"]
        for run in range(EVALUATION["runs"])
    ]


def report_trained_models():
    """Models with an RL curve to plot: those trained because a TMAX variant is
    evaluated (asking for a curve must not start a training nobody asked for)."""
    if "tmax" not in EVALUATION["variants"]:
        return []
    return [name for name, model in MODELS.items() if model.get("train", True)]
