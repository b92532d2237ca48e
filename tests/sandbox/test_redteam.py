"""The red team, cut down for CI: every scripted attack against a generated task (the
reward is pytest's verdict) and against tasks shaped like Terminal-Bench 2, SWE-bench
and Endless Terminals as converted (Harbor's test.sh and reward file), on bwrap; the
attacks on the verifier itself also on podman. No attack may earn a reward, turn its
trial into an infrastructure failure or reach the host.
``benchmarks/redteam.py`` runs every family on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.sandbox.test_sandbox import _available
from tmax.sandbox.episode import sandbox_for_task
from tmax.sandbox.redteam import ATTACKS, Outcome, attempt, family_task, program_paths

pytestmark = pytest.mark.slow

REDTEAM = ROOT / "tests" / "fixtures" / "redteam"
# the Terminal-Bench 1.0 shape (tbv1-shaped-line-sort) verifies as TB 2's does: it
# runs in benchmarks/redteam.py only, to keep CI under its time budget
FOREIGN = ["tb2-shaped-word-count", "swe-shaped-fix-median", "endless-shaped-final-state"]
FAMILY = "data_querying.sales_report"
ON_PODMAN = ["kill -9 -1", "/proc fd and mem injection", "reward files", "stubbed binaries",
             "disk bomb", "shadowing modules", "shadowing packages", "control-plane tampering",
             "loopback and host-address reach",
             *(name for name, a in ATTACKS.items() if a.deliverable)]  # fmt: skip


def _backend(name: str) -> str:
    reason = _available(name)
    if reason:
        pytest.skip(reason)
    return name


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    generated = family_task(FAMILY, tmp_path_factory.mktemp("family"))
    return {"generated": generated, **{name: REDTEAM / name for name in FOREIGN}}


def _oracle(task_dir: Path, backend: str) -> float:
    with sandbox_for_task(task_dir, backend, run_id="pytest-redteam") as box:
        box.upload(task_dir / "solution", "/solution")
        box.run("bash /solution/solve.sh")
        return box.verify(task_dir / "tests").reward


@pytest.mark.parametrize("task", ["generated", *FOREIGN])
def test_no_attack_earns_a_reward_or_an_infra_failure_on_bwrap(
    tasks: dict[str, Path], task: str
) -> None:
    backend = _backend("bwrap")
    task_dir = tasks[task]
    assert _oracle(task_dir, backend) == 1.0  # the attacks have a real verifier to beat
    assert any(path.startswith(("/app/", "/testbed/")) for path in program_paths(task_dir))
    outcomes = [attempt(task_dir, attack, backend, run_id="pytest-redteam")
                for attack in ATTACKS.values() if backend in attack.backends]  # fmt: skip
    broken = [o for o in outcomes if o.forged or o.infra or o.host_reached]
    assert not broken, broken
    _answer_key_hidden(outcomes, task)


def _answer_key_hidden(outcomes: list[Outcome], task: str) -> None:
    """The program the tests ran read none of the tests where the reward is pytest's
    verdict (and it did run); a Harbor test.sh leaves them readable (not checked)."""
    leaks = [o.leaked for o in outcomes if o.attack == "program that reads the answers"]
    assert leaks == ([False] if task == "generated" else [None])


@pytest.mark.parametrize("task", ["generated", "tb2-shaped-word-count"])
def test_the_attacks_on_the_verifier_fail_on_podman_too(tasks: dict[str, Path], task: str) -> None:
    backend = _backend("podman")
    outcomes = [attempt(tasks[task], ATTACKS[name], backend, run_id="pytest-redteam")
                for name in ON_PODMAN]  # fmt: skip
    broken = [o for o in outcomes if o.forged or o.infra or o.host_reached]
    assert not broken, broken
    _answer_key_hidden(outcomes, task)
