"""A task family's files as templates: a family is a folder shaped like the Harbor task
it renders (``instruction.md``, ``solution/solve.sh``, ``tests/test_task.py``,
``environment/…``), each file written as the task has it, with Jinja2 placeholders
where the family's drawn parameters go, beside the module that draws them.

The files are package data (``importlib.resources``), so they are real files with
their real extensions, which an editor, shellcheck, ``bash -n`` and a Python parser
can read. Rendering is strict: a placeholder the family does not fill is an error that
names it, never an empty string in a task.

Jinja2's comment marker ``{#`` is also bash's length of a variable (``${#name}``), so
template comments are written ``{## … ##}``; ``{{ … }}`` and ``{% … %}`` are as usual.
``{{ value | py }}`` writes a value as a Python literal (its ``repr``), for the tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import jinja2
import jinja2.bccache

from tmax.io import cache_dir


class TemplateError(RuntimeError):
    """A family's template is missing, malformed, or asks for a value it was not given."""


class _PackageFiles(jinja2.BaseLoader):
    """Templates read from a package's data files (a wheel, a zip or a source tree)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        node = _file(self.package, template)
        if not node.is_file():
            raise jinja2.TemplateNotFound(f"{self.package}:{template}")
        return node.read_text(encoding="utf-8"), f"{self.package}/{template}", lambda: True


def _file(package: str, path: str) -> Traversable:
    node = resources.files(package)
    for part in path.split("/"):
        node = node.joinpath(part)
    return node


class _CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept in the project's cache, keyed by each template's name and
    checked against its source (Jinja also keys them by its own and Python's version):
    a generation job loads what an earlier one compiled instead of parsing every
    template again (about 0.3 s a process for the paper config's families). A cache it
    cannot read or write is skipped."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


@cache
def _compiled() -> jinja2.BytecodeCache | None:
    try:
        directory = cache_dir() / "templates"
        directory.mkdir(exist_ok=True)
    except OSError:
        return None
    return _CompiledTemplates(str(directory))


class Templates:
    """The template files of one family folder (the package ``package``)."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.environment = jinja2.Environment(
            loader=_PackageFiles(package),
            bytecode_cache=_compiled(),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            comment_start_string="{##",
            comment_end_string="##}",
        )
        # ``{{ value | py }}``: the value as a Python literal (repr), for tests/*.py
        self.environment.filters["py"] = repr

    def render(self, path: str, **values: Any) -> str:
        """The file ``path`` of the folder (``tests/test_task.py``) with ``values`` in
        its placeholders."""
        try:
            return self.environment.get_template(path).render(**values)
        except jinja2.TemplateNotFound as error:
            raise TemplateError(f"{self.package}: no template {path}") from error
        except jinja2.UndefinedError as error:
            raise TemplateError(f"{self.package}/{path}: {error.message}") from error
        except jinja2.TemplateSyntaxError as error:
            raise TemplateError(f"{self.package}/{path}:{error.lineno}: {error.message}") from error

    def paths(self) -> list[str]:
        """Every template file of the folder (not its Python modules), as ``a/b.sh``."""
        found: list[str] = []

        def walk(node: Traversable, prefix: str) -> None:
            for child in node.iterdir():
                name = f"{prefix}{child.name}"
                if child.is_dir():
                    if child.name != "__pycache__":
                        walk(child, f"{name}/")
                elif not child.name.endswith((".py", ".pyc")) or prefix:
                    found.append(name)

        walk(resources.files(self.package), "")
        return sorted(found)


@cache
def templates(package: str) -> Templates:
    """The one :class:`Templates` of ``package`` (its compiled templates are kept)."""
    return Templates(package)
