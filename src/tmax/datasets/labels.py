"""Label a prior dataset's tasks with our taxonomy's domain and skill types, so the
balance score exp(H)/N (paper §B.3, Table 1) is measured on the same axes for every
dataset in the dataset-comparison table.

A language model reads each task instruction and answers one JSON object,
``{"domain": ..., "skill_types": [...]}``, choosing from the taxonomy's nine domains
and the chosen domain's own skill types. The answer is checked strictly; an answer
that fails the check is sent back with the problem named, at most ``max_retries``
times, after which the task is recorded as ``unlabelled`` with the last problem.
Nothing is guessed. Tasks whose ``tmax.json`` already carries the axes (our own
generated tasks) take them from there and cost no call.

Calls go through the LLM generator's endpoint client and content-addressed cache
(:mod:`tmax.generate.llm.endpoint`, :mod:`tmax.generate.llm.cache`): the key covers
the rendered prompt (template, instruction, the taxonomy's label vocabulary), the
model, the sampling parameters and the taxonomy file's digest, so a rerun costs
nothing and any change to one of them asks again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from tmax.config import schema_default
from tmax.generate.llm.cache import CallCache
from tmax.generate.llm.endpoint import GeneratorClient
from tmax.generate.llm.settings import LLMSettings
from tmax.logs import progress_bar
from tmax.models.client import ChatModel, ContextLengthExceeded
from tmax.settings import LabellingSection
from tmax.taxonomy.balance import balance_score
from tmax.taxonomy.model import Taxonomy

log = logging.getLogger("tmax.datasets.labels")

LABELLER_VERSION = "labels/1"
BASE_URL_ENV = "TMAX_LABELLER_BASE_URL"
MODEL_ENV = "TMAX_LABELLER_MODEL"
DEFAULT_CACHE_DIR: str = schema_default("labelling", "cache_dir")
PROMPT_FILES = ("label.md", "label_retry.md")
MAX_SKILL_TYPES = 3
MAX_INSTRUCTION_CHARS = 12_000
"""Longer instructions are cut (their head is kept) so one task cannot overflow the
labeller's context; the cut is marked in the prompt."""

LABELLED = "labelled"
UNLABELLED = "unlabelled"
STATUS_OFF = "off"


class LabelError(ValueError):
    """A labeller answer that breaks the format or names a label we do not have."""


# --- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelSettings:
    """The ``labelling`` config section; ``base_url`` None means labelling is off."""

    base_url: str | None = schema_default("labelling", "base_url")
    model: str | None = schema_default("labelling", "model")
    api_key_env: str | None = schema_default("labelling", "api_key_env")
    temperature: float = float(schema_default("labelling", "temperature"))
    max_tokens: int = schema_default("labelling", "max_tokens")
    concurrency: int = schema_default("labelling", "concurrency")
    max_retries: int = schema_default("labelling", "max_retries")
    request_retries: int = schema_default("labelling", "request_retries")
    timeout_sec: float = float(schema_default("labelling", "timeout_sec"))
    cache_dir: str = DEFAULT_CACHE_DIR

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> LabelSettings:
        """Resolve from a validated config; ``$TMAX_LABELLER_BASE_URL`` and
        ``$TMAX_LABELLER_MODEL`` win over the config when set."""
        environ = os.environ if environ is None else environ
        section = LabellingSection.of(config.get("labelling") or {})
        base_url = environ.get(BASE_URL_ENV) or section.base_url
        model = environ.get(MODEL_ENV) or section.model
        if base_url and not model:
            raise ValueError(
                f"labelling.base_url is {base_url!r} but no model is set: give "
                f"labelling.model in the config or set ${MODEL_ENV}"
            )
        return cls(
            base_url=base_url,
            model=model,
            api_key_env=section.api_key_env,
            temperature=float(section.temperature),
            max_tokens=int(section.max_tokens),
            concurrency=int(section.concurrency),
            max_retries=int(section.max_retries),
            request_retries=int(section.request_retries),
            timeout_sec=float(section.timeout_sec),
            cache_dir=str(section.cache_dir),
        )

    @property
    def off_reason(self) -> str | None:
        """Why labelling cannot call a model (None when it can)."""
        if not self.base_url or not self.model:
            return f"labelling is off: labelling.base_url is null (or set ${BASE_URL_ENV})"
        return None

    def llm_settings(self) -> LLMSettings:
        """The generator's endpoint settings, so its client and cache can be reused."""
        return LLMSettings(
            model=str(self.model),
            base_url=str(self.base_url),
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout_sec=self.timeout_sec,
            max_retries=self.request_retries,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            cache_dir=self.cache_dir,
        )

    def cache_path(self, workdir: str | Path = ".") -> Path:
        path = Path(self.cache_dir)
        return path if path.is_absolute() else Path(workdir) / path

    def output_params(self) -> dict[str, Any]:
        """What changes the labels (a Snakemake parameter): throughput knobs such as
        concurrency, timeouts and the endpoint's address are left out on purpose."""
        return {
            "version": LABELLER_VERSION,
            "enabled": self.off_reason is None,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_retries": self.max_retries,
            "prompts": prompts_fingerprint(),
        }


# --- prompts ------------------------------------------------------------------------------


def prompts_dir() -> Path:
    return Path(str(resources.files("tmax").joinpath("datasets/prompts")))


@cache
def _prompt(name: str) -> str:
    return (prompts_dir() / name).read_text(encoding="utf-8")


def prompts_fingerprint() -> str:
    """sha256 (16 hex digits) over the labelling prompt files."""
    digest = hashlib.sha256()
    for name in PROMPT_FILES:
        digest.update(name.encode() + b"\0" + _prompt(name).encode() + b"\0")
    return digest.hexdigest()[:16]


def skill_types_of(taxonomy: Taxonomy, domain: str) -> tuple[str, ...]:
    """A domain's skill-type labels, in file order."""
    return tuple(st.label for st in taxonomy.domains[domain].skill_types.values())


def domains_block(taxonomy: Taxonomy) -> str:
    """The label vocabulary as the prompt lists it."""
    lines = []
    for name, domain in taxonomy.domains.items():
        description = " ".join(domain.description.split())
        lines.append(f"- {name}: {description}")
        lines.append(f"  skill types: {', '.join(skill_types_of(taxonomy, name))}")
    return "\n".join(lines)


def label_prompt(instruction: str, taxonomy: Taxonomy) -> str:
    """The first user message for one task."""
    text = instruction.strip()
    if len(text) > MAX_INSTRUCTION_CHARS:
        text = text[:MAX_INSTRUCTION_CHARS] + "\n[... the rest of the instruction is cut ...]"
    filled = Template(_prompt("label.md")).substitute(
        domains=domains_block(taxonomy), instruction=text
    )
    return filled.strip() + "\n"


def retry_prompt(problem: str) -> str:
    return Template(_prompt("label_retry.md")).substitute(problem=problem).strip() + "\n"


# --- parsing ------------------------------------------------------------------------------


def _strip_fence(content: str) -> str:
    """The answer without one surrounding Markdown code fence, if it has one."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2:
        text = text[3:-3]
        first, _, rest = text.partition("\n")
        text = rest if first.strip().lower() in ("", "json") else text
    return text.strip()


def parse_label(content: str, taxonomy: Taxonomy) -> tuple[str, tuple[str, ...]]:
    """(domain, skill types) from an answer, or :class:`LabelError` naming the problem.

    The answer must be one JSON object with exactly the keys ``domain`` (one of the
    taxonomy's domains) and ``skill_types`` (1 to 3 distinct skill types of that
    domain). One surrounding code fence is tolerated; nothing else is.
    """
    try:
        data = json.loads(_strip_fence(content))
    except json.JSONDecodeError as error:
        raise LabelError(f"the answer is not a JSON object ({error.msg})") from None
    if not isinstance(data, dict):
        raise LabelError("the answer is JSON but not an object")
    keys = set(data)
    if keys != {"domain", "skill_types"}:
        extra = sorted(keys - {"domain", "skill_types"})
        absent = sorted({"domain", "skill_types"} - keys)
        parts = [f"missing {', '.join(absent)}"] if absent else []
        parts += [f"unexpected {', '.join(extra)}"] if extra else []
        detail = "; ".join(parts)
        raise LabelError(f"the object must have exactly domain and skill_types ({detail})")
    domain = data["domain"]
    if not isinstance(domain, str) or domain not in taxonomy.domains:
        raise LabelError(f"domain {domain!r} is not one of: {', '.join(taxonomy.domains)}")
    skills = data["skill_types"]
    if not isinstance(skills, list) or not all(isinstance(s, str) for s in skills):
        raise LabelError("skill_types must be a list of strings")
    if not 1 <= len(skills) <= MAX_SKILL_TYPES or len(set(skills)) != len(skills):
        raise LabelError(f"skill_types must list 1 to {MAX_SKILL_TYPES} distinct skill types")
    allowed = skill_types_of(taxonomy, domain)
    wrong = [s for s in skills if s not in allowed]
    if wrong:
        raise LabelError(
            f"{', '.join(repr(s) for s in wrong)} not a skill type of domain {domain} "
            f"(its skill types: {', '.join(allowed)})"
        )
    return domain, tuple(skills)


# --- labelling ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelInput:
    """One task to label: its id, instruction and (if converted) its directory."""

    id: str
    instruction: str
    task_dir: Path | None = None


@dataclass(frozen=True)
class TaskLabel:
    """A task's labels; ``skill_type`` is the primary (first) one, which the balance
    score counts, as our own tasks have exactly one. ``source`` is ``llm`` or ``axes``
    (read from the task's ``tmax.json``)."""

    id: str
    status: str
    domain: str | None = None
    skill_types: tuple[str, ...] = ()
    source: str | None = None
    attempts: int = 0
    reason: str | None = None

    @property
    def skill_type(self) -> str | None:
        return self.skill_types[0] if self.skill_types else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["skill_types"] = list(self.skill_types)
        data["skill_type"] = self.skill_type
        return data


class LabelClient(GeneratorClient):
    """The generator's cached client, with the taxonomy's digest in every cache key."""

    def __init__(
        self,
        settings: LabelSettings,
        cache: CallCache,
        taxonomy_digest: str,
        model: ChatModel | None = None,
    ) -> None:
        super().__init__(settings.llm_settings(), cache, model)
        self.taxonomy_digest = taxonomy_digest

    def params(self) -> dict[str, Any]:
        return {**super().params(), "taxonomy": self.taxonomy_digest, "task": LABELLER_VERSION}


def axes_label(task: LabelInput, taxonomy: Taxonomy) -> TaskLabel | None:
    """The labels a task already carries in ``tmax.json`` (our generated tasks)."""
    if task.task_dir is None:
        return None
    try:
        meta = json.loads((task.task_dir / "tmax.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    axes = meta.get("axes") if isinstance(meta, dict) else None
    if not isinstance(axes, dict):
        return None
    domain, skill = axes.get("domain"), axes.get("skill_type")
    if domain not in taxonomy.domains or skill not in skill_types_of(taxonomy, domain):
        return None
    return TaskLabel(task.id, LABELLED, domain, (skill,), source="axes")


def label_one(task: LabelInput, client: LabelClient, taxonomy: Taxonomy, retries: int) -> TaskLabel:
    """Ask for one task's labels, sending a failed answer back at most ``retries``
    times; a ``ModelError`` (the endpoint kept failing) is raised, not recorded."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": label_prompt(task.instruction, taxonomy)}
    ]
    problem = ""
    for attempt in range(1, retries + 2):
        try:
            reply = client.chat(messages)
        except ContextLengthExceeded as error:
            return TaskLabel(task.id, UNLABELLED, attempts=attempt, reason=f"too long: {error}")
        try:
            domain, skills = parse_label(reply.content, taxonomy)
        except LabelError as error:
            problem = str(error)
            messages += [
                {"role": "assistant", "content": reply.content},
                {"role": "user", "content": retry_prompt(problem)},
            ]
            continue
        return TaskLabel(task.id, LABELLED, domain, skills, source="llm", attempts=attempt)
    reason = f"no valid answer in {retries + 1} attempt(s); last problem: {problem}"
    return TaskLabel(task.id, UNLABELLED, attempts=retries + 1, reason=reason)


def label_tasks(
    tasks: Sequence[LabelInput],
    taxonomy: Taxonomy,
    client: LabelClient | None,
    *,
    max_retries: int,
    concurrency: int = 1,
    off_reason: str | None = None,
    progress: bool = True,
) -> list[TaskLabel]:
    """Labels for ``tasks`` in their order: from ``tmax.json`` where present, else
    from the model; without a client every other task is unlabelled with
    ``off_reason``."""
    labels: dict[int, TaskLabel] = {}
    todo: list[int] = []
    for index, task in enumerate(tasks):
        known = axes_label(task, taxonomy)
        if known is not None:
            labels[index] = known
        elif client is None:
            labels[index] = TaskLabel(task.id, UNLABELLED, reason=off_reason or "no labeller")
        else:
            todo.append(index)
    if todo and client is not None:
        with (
            progress_bar(disable=not progress) as bar,
            ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool,
        ):
            bar_id = bar.add_task("labelling", total=len(todo))

            def work(index: int) -> None:
                labels[index] = label_one(tasks[index], client, taxonomy, max_retries)
                bar.advance(bar_id)

            for future in [pool.submit(work, index) for index in todo]:
                future.result()
    ordered = [labels[i] for i in range(len(tasks))]
    counts = Counter(label.status for label in ordered)
    log.info("%d task(s): %s", len(ordered), ", ".join(f"{k} {v}" for k, v in counts.items()))
    return ordered


# --- balance --------------------------------------------------------------------------------


def balance_block(labels: Sequence[TaskLabel], taxonomy: Taxonomy) -> dict[str, Any]:
    """exp(H)/N of the labelled tasks on the domain and (primary) skill-type axes, N
    being the taxonomy's number of categories, as for our own specs
    (:func:`tmax.taxonomy.balance.balance_score`); None when nothing is labelled."""
    done = [label for label in labels if label.status == LABELLED]
    block: dict[str, Any] = {"n_labelled": len(done), "n_unlabelled": len(labels) - len(done)}
    counts: dict[str, dict[str, int]] = {}
    for axis in ("domain", "skill_type"):
        categories = taxonomy.categories(axis)
        observed = Counter(getattr(label, axis) for label in done)
        counts[axis] = {name: observed.get(name, 0) for name in categories}
        block[axis] = balance_score(counts[axis], len(categories)) if done else None
    block["counts"] = counts
    return block


def labels_document(
    dataset: str,
    labels: Sequence[TaskLabel],
    taxonomy: Taxonomy,
    settings: LabelSettings,
    client: LabelClient | None,
) -> dict[str, Any]:
    """``labels.json``: per-task labels, the balance block and what produced them."""
    needed_model = any(label.source != "axes" for label in labels)
    off = settings.off_reason if needed_model else None
    return {
        "dataset": dataset,
        "status": STATUS_OFF if off else LABELLED,
        "reason": off,
        "labeller": {
            "version": LABELLER_VERSION,
            "model": settings.model,
            "temperature": settings.temperature,
            "max_retries": settings.max_retries,
            "prompts": prompts_fingerprint(),
            "taxonomy_digest": taxonomy.digest,
        },
        "balance": balance_block(labels, taxonomy),
        "tasks": [label.to_dict() for label in labels],
        "usage": client.totals.to_dict() if client else None,
        "cache": client.cache.stats() if client else None,
    }
