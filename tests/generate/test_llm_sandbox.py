"""The build-and-check loop on a real sandbox (bwrap): the generated Dockerfile is
built on the domain base and the initial-state tests run inside it; a broken build
and a failing initial test are caught, fed back, and the fixed task is kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.generate.llm_support import (
    GOOD,
    environment_answer,
    make_spec,
    settings_for,
    stage_responder,
)
from tmax.generate.llm.check import SandboxCheck
from tmax.generate.llm.shard import generate_llm_specs
from tmax.generate.validate import check_task
from tmax.models.scripted_server import Reply, scripted_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("podman") is None,
        reason="needs root, bwrap and podman (./setup.sh installs them)",
    ),
]


def test_build_errors_and_failing_initial_tests_are_fed_back_until_fixed(tmp_path: Path) -> None:
    spec = make_spec(1)
    broken_build = environment_answer(extra="RUN false\n")
    # The second try builds, but the planted file has 2 lines where the tests want 3.
    wrong_fixture = GOOD["environment"].replace("gamma\n", "")
    answers = iter([wrong_fixture, GOOD["environment"]])
    responder = stage_responder({spec.persona: {"environment": broken_build}})

    def respond(request: dict[str, Any]) -> Reply:
        reply = responder(request)
        last = request["messages"][-1]["content"]
        if "container check failed" in last:
            return Reply(content=next(answers))
        return reply

    with scripted_server(respond) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", concurrency=1)
        summary = generate_llm_specs(
            [spec], tmp_path / "out", settings, check=SandboxCheck("bwrap", run_id="pytest")
        )
        feedback = [
            r["messages"][-1]["content"]
            for r in server.requests
            if "container check failed" in r["messages"][-1]["content"]
        ]
    assert summary["written"] == 1, summary
    assert "**image build** step" in feedback[0] and "RUN false" in feedback[0]
    assert "**initial-state tests** step" in feedback[1]
    task_dir = tmp_path / "out" / spec.spec_id
    # The kept task passes the workflow's own validation: the oracle 1, a no-op 0.
    verdict = check_task(task_dir, "bwrap", run_id="pytest")
    assert verdict.ok, verdict.reason
