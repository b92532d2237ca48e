"""Our sandboxes as Harbor environments (tmax.harbor_environment), driven by Harbor's
own ``harbor run`` from the Harbor environment setup.sh builds: its ``oracle`` agent
scores 1 and its ``nop`` agent 0 on a generated task and on the Harbor-format fixtures
(shaped like TB 2.0, SWE-bench, TB 1.0 and Endless Terminals), and our red team's
attacks, played through Harbor's trial loop, earn nothing and are no trial's exception.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import tomli_w

from tests.conftest import ROOT
from tests.sandbox.test_redteam import _backend
from tmax.harness.upstream import harbor_python
from tmax.sandbox.harbor import HarborTrial, harbor_job
from tmax.sandbox.redteam import ATTACKS, family_task, program_paths

REDTEAM = ROOT / "tests" / "fixtures" / "redteam"
FAMILY = "data_querying.sales_report"
ATTACKER = "tests.sandbox.harbor_attacker:ScriptedAgent"
ON_PODMAN = ["reward files", "background rewriter", "shadowing modules", "kill -9 -1",
             "control-plane tampering", "program that writes the reward"]  # fmt: skip


@pytest.fixture(scope="module")
def harbor() -> str:
    python = harbor_python()
    if python is None or not Path(python).is_file():
        pytest.skip("no Harbor environment (.venv-harbor, built by setup.sh; TMAX_HARBOR_PYTHON)")
    return python


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Harbor dataset folder: one generated task and the four Harbor-format fixtures."""
    root = tmp_path_factory.mktemp("harbor-dataset")
    family_task(FAMILY, root)
    for fixture in sorted(p for p in REDTEAM.iterdir() if p.is_dir()):
        shutil.copytree(fixture, root / fixture.name)
    return root


def test_harbor_imports_our_environments_without_help(harbor: str) -> None:
    """setup.sh puts src/ on the Harbor environment's path: the import path works as
    the README gives it, with no PYTHONPATH."""
    probe = subprocess.run(
        [harbor, "-c", "import tmax.harbor_environment as m; print(m.BwrapEnvironment.type())"],
        capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.strip() == "tmax"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["bwrap", "podman"])
def test_harbor_oracle_scores_1_and_nop_0(
    harbor: str, dataset: Path, tmp_path: Path, backend: str
) -> None:
    _backend(backend)
    tasks = sorted(p.name for p in dataset.iterdir())
    assert len(tasks) == 5
    for agent, expected in (("oracle", 1.0), ("nop", 0.0)):
        trials = harbor_job(harbor, dataset, agent, backend, tmp_path, agent, concurrent=2)
        assert len(trials) == len(tasks), trials
        assert [t.exception for t in trials] == [None] * len(tasks), trials
        assert {t.task: t.reward for t in trials} == {
            _task_name(dataset / name): expected for name in tasks
        }, (agent, trials)


def _task_name(task_dir: Path) -> str:
    return tomllib.loads((task_dir / "task.toml").read_text())["task"]["name"]


def _attack_dataset(source: Path, names: list[str], root: Path) -> tuple[Path, Path]:
    """One copy of ``source`` per attack (named after it, with the red team's limits)
    and the commands each copy's agent plays: (the dataset, the commands file)."""
    plays: dict[str, list[str]] = {}
    targets = " ".join(program_paths(source))
    for name in names:
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        copy = root / f"{source.name}--{slug}"
        shutil.copytree(source, copy)
        config = tomllib.loads((copy / "task.toml").read_text())
        config["task"]["name"] = f"tmax/{copy.name}"
        config.setdefault("verifier", {})["timeout_sec"] = 60.0
        config.setdefault("environment", {})["storage_mb"] = 512
        config.setdefault("metadata", {})["command_timeout_sec"] = 30.0
        (copy / "task.toml").write_text(tomli_w.dumps(config))
        plays[copy.name] = [c.replace("@TARGETS@", targets) for c in ATTACKS[name].commands]
    commands = root.parent / f"{root.name}-commands.json"
    commands.write_text(json.dumps(plays))
    return root, commands


def _attacked(
    harbor: str, source: Path, names: list[str], backend: str, tmp_path: Path
) -> list[HarborTrial]:
    tasks, commands = _attack_dataset(source, names, tmp_path / "tasks")
    return harbor_job(
        harbor, tasks, ATTACKER, backend, tmp_path / "jobs", "attacks", concurrent=2,
        extra=["--agent-kwarg", f"commands={commands}"], python_path=[ROOT],
    )  # fmt: skip


# every attack but the one on the host's network (it needs our own runner's server and
# limits: benchmarks/redteam.py and tests/sandbox/test_redteam.py play it)
THROUGH_HARBOR = [name for name, attack in ATTACKS.items() if not attack.network]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["generated", "tb2-shaped-word-count"])
def test_red_team_through_harbor_earns_nothing_on_bwrap(
    harbor: str, dataset: Path, tmp_path: Path, task: str
) -> None:
    """Harbor's verifier, left to itself, would run test.sh in the agent's session and
    read a reward file the agent can write; through our environment it is ours."""
    _backend("bwrap")
    source = dataset / ("redteam-data-querying-sales-report" if task == "generated" else task)
    trials = _attacked(harbor, source, THROUGH_HARBOR, "bwrap", tmp_path)
    assert len(trials) == len(THROUGH_HARBOR)
    broken = [t for t in trials if t.reward != 0.0 or t.exception]
    assert not broken, broken


@pytest.mark.slow
def test_red_team_through_harbor_earns_nothing_on_podman(
    harbor: str, dataset: Path, tmp_path: Path
) -> None:
    _backend("podman")
    trials = _attacked(harbor, dataset / "tb2-shaped-word-count", ON_PODMAN, "podman", tmp_path)
    assert len(trials) == len(ON_PODMAN)
    broken = [t for t in trials if t.reward != 0.0 or t.exception]
    assert not broken, broken


# --- the server's protocol, without a sandbox


def test_a_bad_request_is_answered_and_the_server_goes_on() -> None:
    import io

    from tmax.sandbox.harbor import serve

    requests = io.StringIO(
        '{"op": "fly"}\nnot json\n{"op": "exec", "command": "true"}\n{"op": "stop"}\n'
        '{"op": "never read"}\n'
    )
    replies = io.StringIO()
    serve(requests, replies)
    answers = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert [a["ok"] for a in answers] == [False, False, False, True]
    assert "unknown request 'fly'" in answers[0]["error"]
    assert "not started" in answers[2]["error"]


def test_a_command_runs_in_a_subshell_with_its_directory_and_variables() -> None:
    from tmax.sandbox.harbor import subshell

    script = subshell("echo $A", "/w d", {"A": "x y"})
    assert script.splitlines() == ["(", "cd -- '/w d' || exit 1", "export A='x y'", "echo $A", ")"]
    run = subprocess.run(["bash", "-c", subshell("pwd; echo $A", "/tmp", {"A": "x y"})],
                         capture_output=True, text=True)  # fmt: skip
    assert run.stdout.split("\n")[:2] == ["/tmp", "x y"]
    with pytest.raises(ValueError, match="not a shell name"):
        subshell("true", None, {"A;rm": "x"})
