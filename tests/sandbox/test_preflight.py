"""``tmax sandbox preflight`` on the real local backends: everything an episode needs
passes, the result is kept per node, and a failed check stops the table's caller."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sandbox.test_sandbox import _available
from tmax.sandbox import preflight as preflight_module
from tmax.sandbox.base import SandboxError
from tmax.sandbox.preflight import Check, ensure_preflight, passed, preflight, table

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["bwrap", "podman"])
def test_a_working_node_passes_every_check(backend: str) -> None:
    reason = _available(backend)
    if reason:
        pytest.skip(reason)
    checks = preflight(backend)
    assert [c.name for c in checks] == [
        "image", "start", "root inside", "writable /tests and /logs", "200 MB writable",
        "own PID namespace", "network off", "memory/CPU/PID limits", "storage limit", "verifier",
        "network phases",
    ]  # fmt: skip
    assert all(c.status == "ok" for c in checks), table(checks)


def test_the_result_is_kept_per_node_and_a_failure_raises_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMAX_SANDBOX_DIR", str(tmp_path))
    monkeypatch.setattr(preflight_module, "_done", set())
    runs: list[str] = []
    answer = [Check("root inside", "FAIL", "1000 -> the sandbox user must be root inside")]

    def fake_preflight(backend: str) -> list[Check]:
        runs.append(backend)
        return answer

    monkeypatch.setattr(preflight_module, "preflight", fake_preflight)
    with pytest.raises(SandboxError, match=r"\| root inside \| FAIL \|"):
        ensure_preflight("apptainer")
    assert not passed(answer) and not list(tmp_path.glob("preflight-*.json"))
    answer[:] = [Check("root inside", "ok", "0"), Check("storage limit", "degraded", "x")]
    ensure_preflight("apptainer")
    ensure_preflight("apptainer")  # once per process
    assert runs == ["apptainer", "apptainer"]
    monkeypatch.setattr(preflight_module, "_done", set())
    ensure_preflight("apptainer")  # another process on the same node: the kept result
    assert runs == ["apptainer", "apptainer"]
    assert len(list(tmp_path.glob("preflight-apptainer-*.json"))) == 1
