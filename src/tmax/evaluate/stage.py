"""The evaluation stage as the workflow runs it (rules/evaluate.smk).

1. ``prepare_benchmark``: resolve a benchmark into a manifest of task directories
   (held-out generated tasks, a Harbor directory or git repository, SWE-bench
   Verified, AIME).
2. ``evaluate_run``: one (model × benchmark × harness × run): serve the model (or use
   its endpoint), run every task's trial, write the run's summary.
3. The metrics of a (model, benchmark, harness) over its runs, and the summary of
   them all, are :func:`tmax.evaluate.metrics.write_metrics` and ``write_summary``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from tmax.evaluate.harbor_agents import HARBOR_AGENTS, harbor_run_seed, run_harbor_agent
from tmax.evaluate.records import load_exception_kinds
from tmax.evaluate.runner import plan_trials, run_trials
from tmax.evaluate.trial import task_checksum
from tmax.harness import HarnessSettings
from tmax.io import write_json
from tmax.settings import EvaluationSection

T = TypeVar("T")

log = logging.getLogger("tmax.evaluate")


# --- 1. benchmarks ------------------------------------------------------------------


def stable_subset(items: Sequence[T], limit: int | None, *, name: Callable[[T], str]) -> list[T]:
    """At most ``limit`` of ``items`` (all of them for None), chosen by a hash of each
    one's name and returned in name order: raising the limit only adds items, and the
    choice does not depend on the order they came in."""
    if limit is None or limit >= len(items):
        return sorted(items, key=name)
    chosen = sorted(items, key=lambda item: hashlib.sha256(name(item).encode()).hexdigest())
    return sorted(chosen[:limit], key=name)


def prepare_benchmark(
    name: str,
    output: Path,
    *,
    work_dir: Path,
    sources: Mapping[str, Mapping[str, Any]] | None = None,
    tasks_parquet: Path | None = None,
    tasks_root: Path | None = None,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    max_tasks: int | None = None,
) -> dict[str, Any]:
    """Write ``output``: the benchmark's task directories and domains (a manifest)."""
    from tmax.benchmarks import resolve_benchmark

    heldout_names: list[str] | None = None
    if name == "heldout":
        if tasks_parquet is None:
            raise ValueError("the heldout benchmark needs the exported tasks.parquet")
        import pyarrow.parquet as pq

        from tmax.tasks.split import heldout_tasks

        task_ids = pq.read_table(tasks_parquet, columns=["task_id"]).column(0).to_pylist()
        heldout_names = heldout_tasks(task_ids, heldout_fraction, seed, limit=max_tasks)
        if not heldout_names:
            raise ValueError(
                f"no generated task is held out ({len(task_ids)} tasks, fraction "
                f"{heldout_fraction}): raise evaluation.heldout_fraction or sampler.n_specs"
            )
    task_set = resolve_benchmark(
        name,
        overrides=sources,
        work_dir=work_dir,
        heldout_root=tasks_root,
        heldout_names=heldout_names,
    )
    tasks = sorted(task_set.tasks, key=lambda p: p.name)
    if name != "heldout" and max_tasks is not None:
        tasks = stable_subset(tasks, max_tasks, name=lambda p: p.name)
    # Each task's content hash: a rewritten list equal to the last one means the same
    # tasks, so the workflow can keep the evaluations that read it (rules/common.smk).
    manifest = {
        "benchmark": name,
        "source": task_set.source,
        "tasks": [
            {"name": path.name, "path": str(path), "domain": task_set.domains.get(path.name),
             "sha256": task_checksum(path)}
            for path in tasks
        ],
    }  # fmt: skip
    write_json(output, manifest)
    log.info("%s: %d task(s) from %s", name, len(tasks), task_set.source)
    return manifest


# --- 2. one run -------------------------------------------------------------------------


HARNESS_SETTINGS = (
    "max_tool_calls",
    "max_turn_tokens",
    "max_total_tokens",
    "temperature",
    "top_p",
    "interleaved_thinking",
    "max_format_errors",
    "command_timeout_sec",
    "max_turns",
    "prompts",
)
"""The ``evaluation`` settings an episode runs under (:class:`HarnessSettings`)."""
OPTIONAL_SETTINGS = ("max_turns", "prompts", "top_p")
"""Settings a hand-made section may leave out (HarnessSettings' defaults apply); a
validated config always has them."""


def settings_from_config(evaluation: Mapping[str, Any]) -> HarnessSettings:
    """The harness settings of a mapping of :data:`HARNESS_SETTINGS` (an evaluation
    job's params, difficulty's resolved budgets)."""
    settings = {
        key: evaluation[key]
        for key in HARNESS_SETTINGS
        if key in evaluation or key not in OPTIONAL_SETTINGS
    }
    settings["command_timeout_sec"] = float(settings["command_timeout_sec"])
    return HarnessSettings(**settings)


def run_settings(evaluation: EvaluationSection | Mapping[str, Any]) -> dict[str, Any]:
    """What one evaluation run's result depends on: the harness settings and the engine
    that serves the model. Not the lists it was chosen from (runs, variants,
    benchmarks, harnesses), nor concurrency, nor where tasks come from (the task list
    is the job's input); the workflow's evaluation jobs take exactly these as params
    (plain values: Snakemake tracks a param only if it can ``repr`` it)."""
    section = EvaluationSection.of(evaluation)
    settings = {key: getattr(section, key) for key in (*HARNESS_SETTINGS, "engine", "network")}
    if section.seed is not None:
        settings["seed"] = section.seed
    return settings


@dataclass(frozen=True)
class RunSettings:
    """One evaluation run's settings, as its job gets them (:func:`run_settings`, with
    rules/common.smk's per-harness task cap)."""

    harness: HarnessSettings
    engine: str
    network: str
    seed: int | None = None
    """The sampling seed of every trial (None: each trial's own, from its name)."""
    max_tasks: int | None = None
    """This harness's cap (evaluation.harness_max_tasks, resolved for its jobs only)."""

    @classmethod
    def of(cls, params: RunSettings | Mapping[str, Any]) -> RunSettings:
        if isinstance(params, RunSettings):
            return params
        return cls(
            harness=settings_from_config(params),
            engine=params["engine"],
            network=params["network"],
            seed=params.get("seed"),
            max_tasks=params.get("harness_max_tasks"),
        )


@contextlib.contextmanager
def serve_model(
    model: Mapping[str, Any],
    model_dir: Path | None,
    engine: str,
    log_path: Path,
    threads: int | None = None,
) -> Iterator[Any]:
    """A chat client for a config ``models`` entry: its endpoint when it has one, else
    a server started for the job (``transformers serve`` on CPU with ``threads`` CPU
    threads, ``vllm serve`` on GPU) and stopped afterwards."""
    from tmax.models.client import ENDPOINT_TIMEOUT_SEC, CompletionsChatModel, OpenAIChatModel
    from tmax.models.serve import ModelServer

    endpoint = model.get("endpoint")
    if endpoint:
        yield OpenAIChatModel(
            endpoint["base_url"],
            endpoint.get("model", model["name"]),
            api_key_env=endpoint.get("api_key_env"),
            timeout_sec=endpoint.get("timeout_sec", ENDPOINT_TIMEOUT_SEC),
        )
        return
    if engine == "vllm":
        # Sampling as each request says, none of the checkpoint's generation_config.json
        # (Qwen3's top_k 20 and top_p 0.95, say).
        server = ModelServer.vllm(
            str(model_dir or model["path"]), log_path=log_path,
            extra_args=["--generation-config", "vllm"],
        )  # fmt: skip
    else:
        if model_dir is None:
            raise ValueError(
                f"model {model['name']}: `transformers serve` needs a local model folder; "
                "give the model an endpoint or use evaluation.engine: vllm"
            )
        server = ModelServer.transformers(model_dir, log_path=log_path, threads=threads)
    with server:
        if engine == "transformers" and model_dir is not None:
            # Rendered and parsed here: transformers serve answers HTTP 500 when the
            # model writes a malformed tool call, which would count as infrastructure.
            yield CompletionsChatModel(server.base_url, server.model, model_dir)
        else:
            yield OpenAIChatModel(server.base_url, server.model)


def trials_dir(
    root: Path,
    settings: HarnessSettings,
    model: Mapping[str, Any],
    backend: str,
    network: str,
    seed: int | None = None,
) -> Path:
    """Where a (model, benchmark, harness)'s trials live, keyed by what changes their
    outcome: changing a budget, the model, the network policy or the sampling seed
    starts fresh trials, resuming reuses."""
    parts: list[Any] = [asdict(settings), dict(model), backend, network]
    if seed is not None:
        parts.append({"seed": seed})
    key = json.dumps(parts, sort_keys=True, default=str)
    return root / f"trials-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def evaluate_run(
    manifest_path: Path,
    model: Mapping[str, Any],
    model_dir: Path | None,
    harness: str,
    run: int,
    evaluation: RunSettings | Mapping[str, Any],
    backend: str,
    output: Path,
    *,
    concurrency: int,
    server_log: Path,
) -> dict[str, Any]:
    """Run every task of a benchmark once under ``harness`` and summarise the run."""
    from tmax.sandbox.episode import sandbox_for_task

    evaluation = RunSettings.of(evaluation)
    manifest = json.loads(manifest_path.read_text())
    tasks = stable_subset(manifest["tasks"], evaluation.max_tasks, name=lambda t: t["name"])
    if len(tasks) < len(manifest["tasks"]):
        log.info("%s: %d of the benchmark's %d task(s) (evaluation.harness_max_tasks)",
                 harness, len(tasks), len(manifest["tasks"]))  # fmt: skip
    settings = evaluation.harness
    network = evaluation.network
    seed = evaluation.seed
    root = trials_dir(output.parent, settings, model, backend, network, seed)
    specs = plan_trials(
        ((Path(t["path"]), t["name"], t.get("domain")) for t in tasks),
        model=model["name"],
        benchmark=manifest["benchmark"],
        harness=harness,
        runs=[run],
        seed=seed,
    )
    run_id = os.environ.get("TMAX_RUN_ID") or f"eval-{os.getpid()}"
    # The server gets the job's threads (one per trial played at once).
    with serve_model(
        model, model_dir, evaluation.engine, server_log, threads=concurrency
    ) as client:
        if harness in HARBOR_AGENTS:  # Harbor's own agent code, through our sandboxes
            endpoint = model.get("endpoint") or {}
            key = os.environ.get(endpoint["api_key_env"]) if endpoint.get("api_key_env") else None
            job = root / f"run{run}"  # one Harbor job per run
            results = run_harbor_agent(
                harness, tasks, client, settings, job, backend, network,
                concurrency=concurrency, api_key=key,
                seed=None if seed is None else harbor_run_seed(seed, run),
            )  # fmt: skip
            summary = run_summary(
                results, job, model["name"], manifest["benchmark"], harness, run
            )  # fmt: skip
            write_json(output, summary)
            return summary
        results = run_trials(
            specs,
            client,
            settings,
            root,
            lambda task_dir: sandbox_for_task(
                task_dir, backend, run_id=run_id, network_policy=network
            ),
            concurrency=concurrency,
        )
    summary = run_summary(results, root, model["name"], manifest["benchmark"], harness, run)
    write_json(output, summary)
    return summary


def run_summary(
    results: Sequence[Mapping[str, Any]],
    root: Path,
    model: str,
    benchmark: str,
    harness: str,
    run: int,
) -> dict[str, Any]:
    trials = []
    for result in results:
        rewards = (result.get("verifier_result") or {}).get("rewards") or {}
        meta = (result.get("agent_result") or {}).get("metadata", {}).get("tmax", {})
        exception = result.get("exception_info")
        kind = meta.get("failure_kind", "infra")
        if not meta and exception:  # Harbor's own trial: sorted as any Harbor trial we read
            kind = load_exception_kinds().kind(str(exception.get("exception_type")))
        if kind != "infra":
            exception = None  # the agent's failure (timeout, memory): a counted attempt
        trials.append(
            {
                "trial": result["trial_name"],
                "task": result["task_name"],
                "reward": rewards.get("reward"),
                "exit_status": meta.get("exit_status"),
                "infra_failure": exception["exception_type"] if exception else None,
            }
        )
    valid = [t for t in trials if t["infra_failure"] is None]
    accuracy = sum(t["reward"] or 0.0 for t in valid) / len(valid) if valid else None
    return {
        "model": model,
        "benchmark": benchmark,
        "harness": harness,
        "run": run,
        "trials_dir": str(root),
        "n_trials": len(trials),
        "n_infra_failures": len(trials) - len(valid),
        "accuracy": accuracy,
        "trials": trials,
    }
