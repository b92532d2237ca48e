"""Family templates (tmax.generate.templates): strict, bash-safe, read as package data."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tmax.config import load_config
from tmax.generate.families.easy import EASY_FAMILIES
from tmax.generate.family import FAMILIES, Family
from tmax.generate.procedural import render_task
from tmax.generate.templates import TemplateError, Templates, _CompiledTemplates
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parents[2]
TAXONOMY = load_taxonomy()
SETTINGS = SamplerSettings.from_config(load_config(ROOT / "config.yaml"), TAXONOMY)


@pytest.fixture
def family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Templates:
    folder = tmp_path / "a_family"
    (folder / "solution").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "instruction.md").write_text("Count the lines of `{{ source }}`.\n")
    (folder / "solution" / "solve.sh").write_text(
        'lines=({{ words | join(" ") }})\necho "${#lines[@]}" > {{ target }}\n'
    )
    (folder / "tests" / "test_task.py").write_text(
        "EXPECTED = {{ expected }}\nNAME = {{ name | py }}\n{## a note ##}"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "a_family", raising=False)
    return Templates("a_family")


def test_a_template_renders_with_its_values_and_keeps_bash_as_written(family: Templates) -> None:
    assert family.render("instruction.md", source="/app/in.txt") == (
        "Count the lines of `/app/in.txt`.\n"
    )
    assert family.render("solution/solve.sh", words=["a", "b"], target="/app/n.txt") == (
        'lines=(a b)\necho "${#lines[@]}" > /app/n.txt\n'
    )
    assert family.render("tests/test_task.py", expected={"/app/n.txt": "2\n"}, name="it's") == (
        "EXPECTED = {'/app/n.txt': '2\\n'}\nNAME = \"it's\"\n"
    )


def test_a_missing_value_or_file_is_an_error_naming_it(family: Templates) -> None:
    with pytest.raises(TemplateError, match=r"a_family/instruction\.md: .source. is undefined"):
        family.render("instruction.md")
    with pytest.raises(TemplateError, match=r"no template solution/other\.sh"):
        family.render("solution/other.sh")


def test_the_folder_lists_its_templates_not_its_module(family: Templates) -> None:
    assert family.paths() == ["instruction.md", "solution/solve.sh", "tests/test_task.py"]


def test_a_template_edited_after_it_was_compiled_renders_as_it_now_is(
    family: Templates, tmp_path: Path
) -> None:
    """Compiled templates are cached across processes (tmax.generate.templates); an
    entry for an older source is never used."""
    assert family.render("instruction.md", source="a") == "Count the lines of `a`.\n"
    (tmp_path / "a_family" / "instruction.md").write_text("Sort `{{ source }}`.\n")
    assert Templates("a_family").render("instruction.md", source="a") == "Sort `a`.\n"


def test_a_cache_that_cannot_be_written_only_costs_the_compile(
    family: Templates, tmp_path: Path
) -> None:
    (tmp_path / "not_a_folder").write_text("")
    unwritable = _CompiledTemplates(str(tmp_path / "not_a_folder" / "templates"))
    family.environment.bytecode_cache = unwritable
    family.environment.cache = None  # compile again, through the unwritable cache
    assert family.render("instruction.md", source="b") == "Count the lines of `b`.\n"


def _every_family() -> list[Family]:
    return [*(f for families in FAMILIES.values() for f in families), *EASY_FAMILIES]


@pytest.mark.parametrize("family", _every_family(), ids=lambda f: f.name)
def test_every_family_renders_scripts_bash_reads_and_python_that_parses(
    family: Family, tmp_path: Path
) -> None:
    """At two seeds: each rendered shell script passes `bash -n`, each Python file parses."""
    spec = next(
        spec for spec in sample_specs(TAXONOMY, SETTINGS, 0, 400) if spec.domain in _domains(family)
    )
    for seed in (1, 2):
        task = write_task(render_task(spec, seed, family_name=family.name), tmp_path / str(seed))
        scripts = list(task.rglob("*.sh"))
        assert task / "solution" / "solve.sh" in scripts and task / "tests" / "test.sh" in scripts
        for script in scripts:
            checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert checked.returncode == 0, f"{family.name} {script.name}: {checked.stderr}"
        for source in task.rglob("*.py"):
            ast.parse(source.read_text(), filename=str(source))


def _domains(family: Family) -> set[str]:
    return set(getattr(family, "domains", {family.domain}))
