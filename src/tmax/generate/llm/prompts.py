"""The generator's prompts: data files in ``prompts/``, filled from a spec's axes.

Templates use ``$name`` placeholders (``string.Template``) so code and Dockerfile
snippets in them need no escaping. :func:`prompt_hashes` fingerprints the files: the
workflow passes it to Snakemake, so editing a prompt regenerates the LLM shards.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import yaml

from tmax.generate.llm.sections import SectionSpec, render_section_list
from tmax.sandbox.episode import dockerfile_instructions
from tmax.sandbox.images import domain_definition
from tmax.taxonomy import TaskSpec, Taxonomy, load_taxonomy
from tmax.taxonomy.model import packaged_taxonomy_path

STAGES = ("task", "initial_tests", "final_tests", "environment")
"""The paper's four generation steps, in order (§3.1)."""

STAGE_SECTIONS: dict[str, SectionSpec] = {
    "task": SectionSpec(required=("instruction", "truth", "solution")),
    "initial_tests": SectionSpec(required=("initial_tests",)),
    "final_tests": SectionSpec(required=("final_tests",)),
    "environment": SectionSpec(required=("dockerfile",), repeatable=("file",)),
    "feedback": SectionSpec(
        required=("dockerfile",), optional=("initial_tests",), repeatable=("file",)
    ),
}

_FILES = (
    "system.md",
    "stage_task.md",
    "stage_initial_tests.md",
    "stage_final_tests.md",
    "stage_environment.md",
    "feedback.md",
    "verifier_guidance.yaml",
)


class PromptError(ValueError):
    """A prompt file or placeholder that is missing (names which)."""


def prompts_dir() -> Path:
    return Path(str(resources.files("tmax").joinpath("generate/llm/prompts")))


@cache
def _read(name: str) -> str:
    path = prompts_dir() / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"prompt file {path} is missing") from None


def prompt_hashes() -> dict[str, str]:
    """sha256 (16 hex digits) of every prompt file, by file name."""
    return {name: hashlib.sha256(_read(name).encode("utf-8")).hexdigest()[:16] for name in _FILES}


def prompts_fingerprint() -> str:
    """One hash over all prompt files (a Snakemake parameter)."""
    blob = "".join(f"{name}={digest}\n" for name, digest in sorted(prompt_hashes().items()))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _fill(name: str, **values: Any) -> str:
    try:
        return Template(_read(name)).substitute(values).strip() + "\n"
    except KeyError as error:
        raise PromptError(f"{name}: no value for placeholder ${error.args[0]}") from None


@cache
def _axis_descriptions() -> dict[str, dict[str, Any]]:
    """Descriptions of the categorical axes, read from the packaged taxonomy file."""
    data = yaml.safe_load(packaged_taxonomy_path().read_text(encoding="utf-8"))
    return {
        axis: data.get(axis, {})
        for axis in ("task_complexity", "command_complexity", "fixture_kinds", "verifier_kinds")
    }


@cache
def _taxonomy() -> Taxonomy:
    """The packaged taxonomy, parsed once per process (the YAML takes ~0.2 s)."""
    return load_taxonomy()


@cache
def _verifier_guidance() -> dict[str, Any]:
    return yaml.safe_load(_read("verifier_guidance.yaml")) or {}


def _description(axis: str, value: str) -> str:
    entry = _axis_descriptions()[axis].get(value) or {}
    return str(entry.get("description", "")).strip()


def base_dockerfile(domain: str) -> str:
    """The domain base definition's instructions, which a task Dockerfile starts with
    (so bwrap can layer it on the cached domain root file system)."""
    return "\n".join(dockerfile_instructions(domain_definition(domain).read_text()))


def system_prompt(spec: TaskSpec) -> str:
    domain = _taxonomy().domains.get(spec.domain)
    description = domain.description if domain else ""
    return _fill("system.md", domain=spec.domain, domain_description=description)


def command_range(task_complexity: str) -> tuple[int, int] | None:
    """How many commands a task of this complexity takes (the taxonomy's range)."""
    commands = (_axis_descriptions()["task_complexity"].get(task_complexity) or {}).get("commands")
    return (int(commands[0]), int(commands[1])) if commands else None


def stage_prompt(stage: str, spec: TaskSpec) -> str:
    """The user prompt of one stage for ``spec``."""
    sections = render_section_list(STAGE_SECTIONS[stage])
    if stage == "task":
        commands = command_range(spec.task_complexity) or ("?", "?")
        return _fill(
            "stage_task.md",
            sections=sections,
            skill_type=spec.skill_type,
            language=_taxonomy().language_labels.get(spec.language, spec.language),
            primitive_skills="\n".join(f"  - {skill}" for skill in spec.primitive_skills),
            task_complexity=spec.task_complexity,
            task_complexity_description=_description("task_complexity", spec.task_complexity),
            commands_low=commands[0],
            commands_high=commands[1],
            command_complexity=spec.command_complexity,
            command_complexity_description=_description(
                "command_complexity", spec.command_complexity
            ),
            persona=spec.persona,
            fixture_kind=spec.fixture_kind,
            fixture_kind_description=_description("fixture_kinds", spec.fixture_kind),
            verifier_kind=spec.verifier_kind,
            verifier_kind_description=_description("verifier_kinds", spec.verifier_kind),
        )
    if stage == "initial_tests":
        return _fill("stage_initial_tests.md", sections=sections)
    if stage == "final_tests":
        guidance = _verifier_guidance()
        return _fill(
            "stage_final_tests.md",
            sections=sections,
            verifier_kind=spec.verifier_kind,
            verifier_guidance=str(guidance.get(spec.verifier_kind, "")).strip(),
        )
    if stage == "environment":
        return _fill(
            "stage_environment.md", sections=sections, base_dockerfile=base_dockerfile(spec.domain)
        )
    raise PromptError(f"unknown generation stage {stage!r}; stages are {', '.join(STAGES)}")


def feedback_prompt(failed_step: str, log: str, attempt: int, attempts: int) -> str:
    """The retry prompt: what failed and the tail of its output."""
    return _fill(
        "feedback.md",
        sections=render_section_list(STAGE_SECTIONS["feedback"]),
        failed_step=failed_step,
        log=log.strip()[-4000:] or "(no output)",
        attempt=attempt,
        attempts=attempts,
    )
