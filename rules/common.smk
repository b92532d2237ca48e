# Helpers shared by every stage: config validation, paths, input functions.
import os
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
from tmax.evaluate.harbor_agents import HARBOR_AGENTS  # noqa: E402
from tmax.evaluate.stage import run_settings  # noqa: E402
from tmax.harness import HARNESSES  # noqa: E402
from tmax.rl.select import snapshot_steps  # noqa: E402
from tmax.rl.recipe import model_rl, rl_recipe  # noqa: E402
from tmax.settings import RLSection  # noqa: E402
from tmax.sandbox import images  # noqa: E402
from tmax.taxonomy.model import load_taxonomy, packaged_taxonomy_path  # noqa: E402
from tmax.taxonomy.sampler import shard_bounds  # noqa: E402
from tmax.tracking import RUN_ID_ENV, new_run_id  # noqa: E402

# Validate before any job starts; fill schema defaults into the live config.
try:
    _validated = validate_config(config, source="workflow config")
except ConfigError as error:
    raise WorkflowError(str(error)) from None
config.clear()
config.update(_validated)
# Read by the sandbox backends in every job (a job re-reads this file on a cluster node).
os.environ.setdefault("TMAX_SANDBOX_LIMITS", config["sandbox"]["limits"])
# The workflow's run id, one per `snakemake` invocation unless set beforehand: its jobs
# inherit it (locally, and through sbatch's --export=ALL), and it groups each job's
# tracked run (config `tracking`, tmax.tracking).
os.environ.setdefault(RUN_ID_ENV, new_run_id())


wildcard_constraints:
    shard=r"\d{5}",
    domain=r"[a-z_]+",


SPEC_SHARDS = shard_bounds(
    config["sampler"]["n_specs"], config["sampler"]["shard_size"]
)
DOMAINS = list(load_taxonomy(config["taxonomy"]).domains)


def project_path(path):
    """``path`` relative to the working directory when it lies inside it. Snakemake
    records each job's set of inputs; absolute paths of the package's own data files
    would make a moved or copied project rerun every job."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def taxonomy_file():
    """The taxonomy YAML: an input of sampling, so editing it reruns the sampler."""
    return config["taxonomy"] or project_path(packaged_taxonomy_path())


def domain_definition(wildcards):
    """The Dockerfile a domain's base image is built from (an input: edits rebuild)."""
    return project_path(images.domain_definition(wildcards.domain))


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
    """Everything `rule all` asks for; configured prior datasets add their measures."""
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
    ] + dataset_measure_files()


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
    harness="|".join(re.escape(name) for name in [*HARNESSES, *HARBOR_AGENTS]),
    step=r"\d+",
    run=r"\d+",
    n=r"\d+",


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
    """The rl section with the model's own overrides (``models[].rl``) applied, as a
    mapping (what a rule's params carry)."""
    return model_rl(config, name)


def rl_section(name):
    """:func:`rl_config` typed (tmax.settings.RLSection): what the rules read."""
    return RLSection.of(rl_config(name))


def rl_recipe_params(wildcards):
    """rl_train's rerun trigger: the settings that change the trained model (not the
    layout, concurrency, timeouts, checkpoint cadence or the selection's evaluation)."""
    return rl_recipe(rl_config(wildcards.model))


_PLAN_GATES = {}


def rl_plan_gate(wildcards):
    """rl_train's extra input when its model's memory plan does not fit: the rl_plan
    job, which fails naming the knob, so that model stops before its training job asks
    Slurm for nodes while the others go on (--keep-going). Nothing when the plan fits,
    is off (hardware.plan_check) or does not apply (not a multi-node GPU layout), so a
    training run's inputs, and Snakemake's rerun decisions, stay as they were."""
    name = wildcards.model
    if name not in _PLAN_GATES:
        from tmax.rl.launch.plan import PlanError, check_model_cached

        try:
            check_model_cached(config, name)
            _PLAN_GATES[name] = []
        except PlanError:
            _PLAN_GATES[name] = [f"results/rl/{name}/plan.json"]
    return _PLAN_GATES[name]


def training_job(name):
    """Nodes and Slurm tasks of a model's training job: training ranks' nodes (one task
    each, or rl.ranks_per_node) and engine servers' nodes (one task each, or
    rl.engines_per_node). On GPU nodes the ranks and engines per node follow the GPUs.
    """
    rl = rl_section(name)
    training, inference = rl.training_nodes, rl.inference_nodes
    tasks = training * (rl.ranks_per_node or 1)
    tasks += inference * (rl.engines_per_node or 1)
    return {"nodes": training + inference, "tasks": tasks}


def selection_steps(name):
    """The training steps whose snapshots are kept."""
    rl = rl_section(name)
    return snapshot_steps(rl.steps, rl.select_every)


def selection_settings(name):
    """What the trained model is chosen on, or None (the last step's snapshot)."""
    rl = rl_section(name)
    if not rl.select_every:
        return None
    return {
        "select_benchmark": rl.select_benchmark,
        "select_harness": rl.select_harness,
        "select_runs": rl.select_runs,
    }


def selection_runs(name):
    """{step: [run files]} of the snapshot evaluations (empty: no selection)."""
    on = selection_settings(name)
    if on is None:
        return {}
    return {
        step: [
            f"results/rl/{name}/selection/step{step}/run{run}.json"
            for run in range(on["select_runs"])
        ]
        for step in selection_steps(name)
    }


def selection_run_files(wildcards):
    return [f for files in selection_runs(wildcards.model).values() for f in files]


def after_checkpoints(name, variant="tmax"):
    """Wait, in an input function, for the checkpoints that model ``name``'s ``variant``
    (sft or tmax) depends on, directly or not: the clean generated tasks it trains on
    (or the removed tasks of its prior dataset) and, for tmax with selection, the
    selection benchmark's task list.

    Snakemake drops a job from a running plan only when the job itself is re-planned
    after a checkpoint finished: the checkpoint's direct dependents are, but a job
    further down keeps the reason it was planned for ("its input will be rewritten") and
    runs although nothing above it did. Every job below a training therefore calls this:
    it then depends on the checkpoints (until they finish), is re-planned with them, and
    runs only if its inputs did change. Returns no file: an input item of its own
    (``gate=``), so that a dry run still sees the job's other inputs."""
    if rl_data(name) is None:
        checkpoints.decontam_filter.get()
    else:
        checkpoints.dataset_filter.get(dataset=rl_data(name))
    on = selection_settings(name)
    if variant == "tmax" and on is not None:
        benchmark_manifest(on["select_benchmark"])
    return []


def trained_model_gate(wildcards):
    return after_checkpoints(wildcards.model)


def sft_params(name):
    """What the SFT warm-up depends on (so changing an RL-only knob keeps it)."""
    rl = rl_section(name)
    return {"sft": rl.sft.asdict(), "max_tool_calls": rl.max_tool_calls}


def rl_start_model(wildcards):
    """RL starts from the SFT warm-up when it is on, else from the base model."""
    if rl_section(wildcards.model).sft.steps > 0:
        return f"results/models/{wildcards.model}-sft"
    return base_model_dir(wildcards.model)


VARIANT_SUFFIX = {"base": "", "sft": "-sft", "control": "-control", "tmax": "-tmax"}


def model_evaluation(name):
    """evaluation.variants, .benchmarks and .harnesses with the model's own
    ``models[].evaluation`` overrides (an ablation model: fewer settings)."""
    own = MODELS[name].get("evaluation", {})
    return {
        key: own.get(key, EVALUATION[key])
        for key in ("variants", "benchmarks", "harnesses")
    }


def eval_models():
    """Every model evaluated, by label: each configured model's base, SFT and RL
    versions as its evaluation variants ask (SFT and RL only where they are run).
    ``input`` is the job's model input: ``model``, the local folder it serves (none for
    hub ids and endpoints), or for a tmax variant ``pointer``, select_checkpoint's file
    naming the chosen weights and their sha256 (a new choice of the same weights then
    keeps the evaluations);
    ``grid`` is the model's (benchmarks, harnesses), not part of the job's entry."""
    models = {}
    for name, model in MODELS.items():
        evaluation = model_evaluation(name)
        grid = (evaluation["benchmarks"], evaluation["harnesses"])
        for variant in evaluation["variants"]:
            if variant in ("sft", "control") and rl_section(name).sft.steps == 0:
                continue  # no SFT model to evaluate or to train on
            if variant != "base" and not model.get("train", True):
                continue
            if variant == "base":
                models[name] = {
                    **model,
                    "input": (
                        {"model": base_model_dir(name)} if base_model_dir(name) else {}
                    ),
                    "grid": grid,
                    "trained": None,
                }
            else:
                label = name + VARIANT_SUFFIX[variant]
                folder = f"results/models/{label}"
                models[label] = {
                    "name": label,
                    "path": folder,
                    "input": (
                        {"pointer": f"results/rl/{name}/model.json"}
                        if variant == "tmax"
                        else {"model": folder}
                    ),
                    "grid": grid,
                    "trained": (name, variant),
                }
    return models


EVAL_MODELS = eval_models()


def eval_settings():
    """Every (model label, benchmark, harness) evaluated."""
    return [
        (label, benchmark, harness)
        for label, model in EVAL_MODELS.items()
        for benchmark in model["grid"][0]
        for harness in model["grid"][1]
    ]


wildcard_constraints:
    eval_model="|".join(re.escape(name) for name in EVAL_MODELS) or "^$",


def eval_model_input(wildcards):
    return EVAL_MODELS[wildcards.eval_model]["input"]


def eval_model_gate(wildcards):
    """An evaluation of a trained model waits for its checkpoints (no input file)."""
    trained = EVAL_MODELS[wildcards.eval_model]["trained"]
    return after_checkpoints(*trained) if trained else []


def eval_model_entry(wildcards):
    """What an evaluation job needs of its model: the name, path and endpoint (not the
    model's rl overrides, evaluation grid or dataset: changing those keeps its base
    model's evaluations)."""
    entry = EVAL_MODELS[wildcards.eval_model]
    return {k: v for k, v in entry.items() if k in ("name", "path", "endpoint")}


def eval_run_settings(harness=None):
    """What one evaluation run depends on (tmax.evaluate.stage.run_settings), with the
    harness's own task cap (evaluation.harness_max_tasks) when it has one: only its
    jobs see that number, so changing it reruns nothing else."""
    seed = EVALUATION["seed"]
    settings = run_settings(
        {**EVALUATION, "seed": config["seed"] if seed is None else seed}
    )
    cap = EVALUATION["harness_max_tasks"].get(harness)
    if cap is not None:
        settings["harness_max_tasks"] = cap
    return settings


def benchmark_inputs(wildcards):
    """Held-out tasks come from the generated export; others are fetched by the job."""
    if wildcards.benchmark == "heldout":
        return {"tasks": "results/tasks/tasks.parquet"}
    return {}


def benchmark_images(benchmark):
    """The images a benchmark's tasks run on: the domain images for the generated
    held-out tasks (layered on them); none for a published benchmark, whose tasks
    build their own (an edited domain image then re-evaluates nothing of it)."""
    if benchmark == "heldout":
        return expand("results/images/domains/{domain}.json", domain=DOMAINS)
    return []


def benchmark_params(wildcards):
    """What a benchmark's task list depends on: its own source and the cap; for the
    held-out split also the fraction and the seed that draw it."""
    own = {"max_tasks": EVALUATION["max_tasks"]}
    source = EVALUATION["sources"].get(wildcards.benchmark)
    own["sources"] = {wildcards.benchmark: source} if source else {}
    if wildcards.benchmark == "heldout":
        own.update(heldout_fraction=EVALUATION["heldout_fraction"], seed=config["seed"])
    return own


def benchmark_manifest(benchmark):
    """A benchmark's task list, through the benchmark_tasks checkpoint: the list names
    every task's content hash, so when the job reruns and writes the same list (the
    tasks.parquet it reads changed elsewhere, the cap rose past the benchmark's size),
    the evaluations that read it stay as they are (see training_task_files)."""
    return checkpoints.benchmark_tasks.get(benchmark=benchmark).output[0]


def eval_runs(harness):
    """How many runs a harness's evaluations make: evaluation.harness_runs, else runs."""
    runs = EVALUATION["harness_runs"].get(harness)
    return EVALUATION["runs"] if runs is None else runs


def eval_run_files(wildcards):
    runs = range(eval_runs(wildcards.harness))
    base = (
        f"results/eval/{wildcards.eval_model}/{wildcards.benchmark}/{wildcards.harness}"
    )
    return [f"{base}/run{run}.json" for run in runs]


def eval_concurrency():
    return EVALUATION["concurrency"] or config["sandbox"]["max_concurrency"]


def eval_metric_files():
    return [
        f"results/eval/{model}/{benchmark}/{harness}/metrics.json"
        for model, benchmark, harness in eval_settings()
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
        for model, benchmark, harness in eval_settings()
        for run in range(eval_runs(harness))
    ]


def report_trained_models():
    """Models with an RL curve to plot: those trained because a TMAX variant is
    evaluated (asking for a curve must not start a training nobody asked for)."""
    if "tmax" not in EVALUATION["variants"]:
        return []
    return [name for name, model in MODELS.items() if model.get("train", True)]


# --- prior datasets (rules/datasets.smk, rules/datasets_measure.smk) -------------------

from tmax.datasets.convert import converter_fingerprint  # noqa: E402
from tmax.datasets.difficulty import DifficultySettings  # noqa: E402
from tmax.datasets.labels import LabelSettings  # noqa: E402

try:
    LABELLING = LabelSettings.from_config(config)
    DIFFICULTY = DifficultySettings.from_config(config)
except ValueError as error:
    raise WorkflowError(str(error)) from None
DATASET_SOURCES = {entry["name"]: entry for entry in config["datasets"]["sources"]}
"""Each configured prior dataset's entry by name, in config order (none by default)."""
DATASET_NAMES = "|".join(re.escape(name) for name in DATASET_SOURCES) or "^$"


def dataset_source(wildcards):
    """The config entry of one prior dataset (a param: editing it reconverts)."""
    return DATASET_SOURCES[wildcards.dataset]


def dataset_sample(wildcards):
    """Tasks to draw from one dataset: its own `sample`, else datasets.sample."""
    entry = DATASET_SOURCES[wildcards.dataset]
    return entry["sample"] if "sample" in entry else config["datasets"]["sample"]


def difficulty_model_dir(wildcards):
    """The reference model's local folder when a job must serve it (a configured
    model without an endpoint); nothing for an endpoint."""
    model = DIFFICULTY.model
    if model is None or model.get("endpoint"):
        return []
    return base_model_dir(model["name"])


def dataset_measure_files():
    """What the workflow measures of every configured prior dataset: its manifest,
    labels, difficulty and n-gram check (none in the embedded default: the report's
    dataset table then stays as it was)."""
    return [
        f"results/datasets/{name}/{kind}.json"
        for name in DATASET_SOURCES
        for kind in ("manifest", "labels", "difficulty", "decontam")
    ]


# --- what RL trains on: the generated tasks, or a prior dataset (models[].rl_data) -----


def rl_data(name):
    """The prior dataset a model is trained on (``models[].rl_data``), else None."""
    return MODELS[name].get("rl_data")


def training_task_files(wildcards):
    """The list of a model's training tasks: the clean generated tasks, or a prior
    dataset's manifest with its n-gram check (what the SFT warm-up reads).

    The clean set comes through the decontam_filter checkpoint as a pointer that names
    the set's sha256 (clean_tasks.json; the Parquet can be far above Snakemake's 1 MB
    checksum limit). When that checkpoint reruns, Snakemake re-evaluates the plan after
    it finishes; a pointer whose content equals the checksum recorded when the training
    job last ran is not an updated input, so a decontamination change that removes the
    same tasks retrains nothing."""
    dataset = rl_data(wildcards.model)
    if dataset is None:
        return {"clean": checkpoints.decontam_filter.get().output.pointer}
    return {
        "tasks": f"results/datasets/{dataset}/manifest.json",
        "removed": checkpoints.dataset_filter.get(dataset=dataset).output[0],
    }


def training_task_support(wildcards):
    """What RL needs of its tasks besides their list (training_task_files, apart so a
    dry run sees these before the checkpoint runs): the folders (the generated tasks'
    shards, or the dataset's converted tasks beside its manifest) and the images they
    build on (the domain images, or the public base a dataset's tasks name)."""
    if rl_data(wildcards.model) is None:
        return {
            "shards": task_shard_dirs(),
            "images": expand("results/images/domains/{domain}.json", domain=DOMAINS),
        }
    return {"images": "results/images/base.json"}


def training_task_params(wildcards):
    """Where the chosen training tasks' folders are."""
    dataset = rl_data(wildcards.model)
    if dataset is None:
        return {"tasks_root": "results/tasks/shards"}
    return {"tasks_root": f"results/datasets/{dataset}/tasks"}


def rl_dataset_ablations():
    """The RL-dataset ablation: each model trained on a prior dataset, with the
    dataset and the model it ablates (the configured model with the same ``path``
    that trains on the generated tasks, if any)."""
    plain = {m["path"]: n for n, m in MODELS.items() if rl_data(n) is None}
    return {
        name: {"dataset": rl_data(name), "base": plain.get(model["path"])}
        for name, model in MODELS.items()
        if rl_data(name) is not None
    }
