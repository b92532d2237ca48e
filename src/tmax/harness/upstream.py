"""Upstream agents' own prompt templates, read at run time (``evaluation.prompts: upstream``).

Our harnesses speak in our own words by default (``prompts/<harness>/``). With
``upstream`` they use the templates the upstream agents ship, read from the installed
upstream package when an episode starts. No upstream text is copied into this
repository: only where to find it (package, pinned version, path inside it).

Where a package is looked for, in order:

1. ``TMAX_UPSTREAM_PATH``: directories (``os.pathsep``-separated) that *contain* the
   package directory: a ``pip install --target`` folder, a site-packages, or a git
   checkout's root (hamishivi/tmax has ``rl_data/`` at its root);
2. this interpreter's import path (``pip install --no-deps mini-swe-agent==2.4.6``
   into the main venv is enough: only data files and source are read, nothing is
   imported);
3. the Harbor environment (Python 3.12, where Harbor and its Terminus-2 templates
   live): ``TMAX_HARBOR_PYTHON``, else ``.venv-harbor/bin/python`` in the checkout.
   Its site-packages directories are asked for once and cached.

API for harnesses::

    upstream_path("terminus-2", "agents/terminus_2/templates/terminus-json-plain.txt")
    upstream_text("mini-swe-agent", "config/mini.yaml")
    upstream_yaml("mini-swe-agent", "config/mini.yaml")
    render_jinja(template, **variables)      # StrictUndefined, as the upstream agents do
    literal_assignment("tmax", "rl_data/generator/sample_solutions.py", "_DEFAULT_TOOL_SCHEMAS")

Paths are relative to the package directory (``UPSTREAM[harness].package``), except
for the tmax source, whose paths are relative to the checkout root (it has several
top-level packages). A missing package raises :class:`UpstreamMissing`, whose message
says what to install.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("tmax.harness.upstream")

PROMPT_MODES = ("own", "upstream")
"""Values of ``evaluation.prompts`` (HarnessSettings.prompts)."""


@dataclass(frozen=True)
class UpstreamSource:
    """Where one harness's upstream templates come from."""

    distribution: str
    """The installable name (PyPI, or the git repository for tmax)."""
    package: str
    """The top-level directory looked for (an import name)."""
    version: str
    """The version the harness rules were checked against (docs/harnesses.md)."""
    install: str
    """What to run when it is missing."""
    root_is_parent: bool = False
    """Paths are relative to the directory holding ``package`` (a source checkout)."""


UPSTREAM: dict[str, UpstreamSource] = {
    "tmax": UpstreamSource(
        distribution="hamishivi/tmax",
        package="rl_data",
        version="1cce58a2",
        install=(
            "git clone https://github.com/hamishivi/tmax && git -C tmax checkout 1cce58a2, "
            "then export TMAX_UPSTREAM_PATH=$PWD/tmax"
        ),
        root_is_parent=True,
    ),
    "mini-swe-agent": UpstreamSource(
        distribution="mini-swe-agent",
        package="minisweagent",
        version="2.4.6",
        install=".venv/bin/pip install --no-deps mini-swe-agent==2.4.6",
    ),
    "terminus-2": UpstreamSource(
        distribution="harbor",
        package="harbor",
        version="0.26.0",
        install=(
            "harbor==0.26.0 into a Python 3.12 venv (.venv-harbor, or set TMAX_HARBOR_PYTHON "
            "to its python)"
        ),
    ),
    "openhands": UpstreamSource(
        distribution="openhands-ai",
        package="openhands",
        version="1.6.0",
        # It asks for Python 3.12; nothing of it is imported, so the 3.11 venv holds it.
        install=(
            ".venv/bin/pip install --no-deps --no-compile --ignore-requires-python "
            "openhands-ai==1.6.0"
        ),
    ),
}
"""Harness name → upstream source."""


class UpstreamMissing(RuntimeError):
    """``evaluation.prompts: upstream`` was asked for and the upstream package is absent."""


# --- finding packages --------------------------------------------------------------------


def harbor_python() -> str | None:
    """The Harbor environment's interpreter: ``TMAX_HARBOR_PYTHON``, else the checkout's
    ``.venv-harbor/bin/python`` when it exists."""
    configured = os.environ.get("TMAX_HARBOR_PYTHON")
    if configured:
        return configured
    for root in (Path(__file__).resolve().parents[3], Path.cwd()):
        candidate = root / ".venv-harbor" / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    return None


@functools.cache
def site_dirs(python: str) -> tuple[Path, ...]:
    """The site-packages directories of another interpreter (asked once; nothing of the
    upstream package is imported). Empty when it cannot be run."""
    query = (
        "import json, sysconfig; p = sysconfig.get_paths(); "
        "print(json.dumps([p['purelib'], p['platlib']]))"
    )
    try:
        answer = subprocess.run(
            [python, "-c", query], capture_output=True, text=True, timeout=60, check=True
        )
        return tuple(dict.fromkeys(Path(p) for p in json.loads(answer.stdout)))
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        log.warning("could not ask %s for its site-packages: %s", python, error)
        return ()


def search_roots() -> list[Path]:
    """Directories that may hold an upstream package directory, in search order."""
    roots = [Path(p) for p in os.environ.get("TMAX_UPSTREAM_PATH", "").split(os.pathsep) if p]
    roots += [Path(p) for p in sys.path if p]
    python = harbor_python()
    if python:
        roots += site_dirs(python)
    return roots


@functools.cache
def package_dir(harness: str) -> Path:
    """The installed directory of ``harness``'s upstream package."""
    source = upstream_source(harness)
    for root in search_roots():
        candidate = root / source.package
        if candidate.is_dir():
            _note_version(harness, root)
            return candidate
    spec = importlib.util.find_spec(source.package)  # e.g. an editable install
    if spec and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    raise UpstreamMissing(
        f"evaluation.prompts is 'upstream', but the {harness} harness's upstream package "
        f"{source.distribution} ({source.version}; import name {source.package!r}) was not "
        f"found. Install it: {source.install}. Or set evaluation.prompts: own."
    )


def _note_version(harness: str, root: Path) -> None:
    """Log the installed version next to the pinned one (a different one may reword
    prompts, so results should say which was read)."""
    source = UPSTREAM[harness]
    name = source.distribution.replace("-", "_")
    found = sorted(root.glob(f"{name}-*.dist-info"))
    version = found[-1].name.removeprefix(f"{name}-").removesuffix(".dist-info") if found else "?"
    if found and version != source.version:
        log.warning(
            "%s: upstream %s %s; the rules were checked against %s",
            *(harness, name, version, source.version),
        )
    else:
        log.info("%s: upstream templates from %s (%s)", harness, root, version)


def upstream_source(harness: str) -> UpstreamSource:
    if harness not in UPSTREAM:
        known = ", ".join(UPSTREAM)
        raise ValueError(f"no upstream source for harness {harness!r}; known: {known}")
    return UPSTREAM[harness]


# --- reading ----------------------------------------------------------------------------


def upstream_path(harness: str, relative: str) -> Path:
    """A file of ``harness``'s upstream package (see the module docstring for ``relative``)."""
    package = package_dir(harness)
    base = package.parent if upstream_source(harness).root_is_parent else package
    path = base / relative
    if not path.is_file():
        raise UpstreamMissing(
            f"evaluation.prompts is 'upstream', but {path} does not exist: the installed "
            f"{upstream_source(harness).distribution} is not the expected version "
            f"({upstream_source(harness).version})."
        )
    return path


def upstream_text(harness: str, relative: str) -> str:
    return upstream_path(harness, relative).read_text(encoding="utf-8")


@functools.cache
def upstream_yaml(harness: str, relative: str) -> Any:
    import yaml

    return yaml.safe_load(upstream_text(harness, relative))


@functools.cache
def literal_assignment(harness: str, relative: str, name: str) -> Any:
    """The literal value assigned to module-level ``name`` in an upstream source file,
    read with ``ast`` (the module is never imported: its dependencies need not exist)."""
    tree = ast.parse(upstream_text(harness, relative))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value:
            return ast.literal_eval(node.value)
    raise UpstreamMissing(f"{name} is not assigned in {upstream_path(harness, relative)}")


def string_arguments(harness: str, relative: str, function: str) -> list[str]:
    """The string literals passed as first argument to ``function`` in an upstream file."""
    tree = ast.parse(upstream_text(harness, relative))
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == function
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def render_jinja(template: str, **variables: Any) -> str:
    """Render an upstream Jinja template the way mini-swe-agent does (StrictUndefined:
    a variable we do not provide is an error, not an empty string)."""
    from jinja2 import StrictUndefined, Template

    return Template(template, undefined=StrictUndefined).render(**variables)


def check_mode(prompts: str) -> str:
    if prompts not in PROMPT_MODES:
        raise ValueError(f"evaluation.prompts is {prompts!r}; allowed: {', '.join(PROMPT_MODES)}")
    return prompts
