"""Content hashes of the procedural generator and of the validator, cheap to compute
(they import no task family).

The workflow passes them as rule parameters, so editing a task family regenerates (and
revalidates) the tasks, editing the validation revalidates them, and nothing else does:
not the stage glue, and not the LLM backend, which has parameters of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tmax.sandbox.images import definitions_dir
from tmax.settings import GenerationSection

_PACKAGE = Path(__file__).parent
_ROOT = _PACKAGE.parent  # the tmax package


def _digest(paths: Iterable[Path]) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.relative_to(_ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return hasher.hexdigest()[:16]


def generator_fingerprint() -> str:
    """The procedural generator's code (its families, their builders and templates),
    the personas it fits to its families, the audit that decides which sampled skills a
    task realised (``tmax.json``), the task format it writes and the image definitions
    its Dockerfiles name."""
    sources = [_PACKAGE / "procedural.py", _PACKAGE / "family.py", _PACKAGE / "personas.py"]
    sources += [_PACKAGE / "audit.py", _PACKAGE / "builders.py", _PACKAGE / "templates.py"]
    # every file of every family folder: modules, templates, personas.yaml
    sources += sorted(path for path in (_PACKAGE / "families").rglob("*")
                      if path.is_file() and "__pycache__" not in path.parts)  # fmt: skip
    sources += [_ROOT / "tasks" / "format.py"]
    sources += sorted(definitions_dir().rglob("Dockerfile"))
    return _digest(sources)


def validator_fingerprint() -> str:
    """The checks a task must pass in its sandbox (oracle 1, no-op 0)."""
    return _digest([_PACKAGE / "validate.py"])


def generation_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The llm backend's own rule parameters: the settings that change its output and
    a hash of its prompt files (empty for the procedural backend). Snakemake then
    reruns just the shards whose specs, prompts or generator settings changed, while
    the model-call cache (outside the outputs) answers every unchanged call."""
    if GenerationSection.of(config.get("generation", {})).backend != "llm":
        return {}
    from tmax.generate.llm.settings import LLMSettings

    return LLMSettings.from_config(config).output_params()
