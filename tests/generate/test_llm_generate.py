"""The LLM generator against a scripted OpenAI-compatible server on loopback: the
task directories it writes, how bad answers and a bad endpoint are quarantined, the
build-and-check loop, and the call cache."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.generate.llm_support import (
    GOOD,
    FakeCheck,
    make_spec,
    settings_for,
    stage_of,
    stage_responder,
)
from tmax.generate.llm.check import CheckResult, lint_dockerfile
from tmax.generate.llm.pipeline import QUARANTINE_DIR, Quarantine, _environment_path
from tmax.generate.llm.shard import generate_llm_specs
from tmax.generate.procedural import TEST_SH, render_task
from tmax.generate.stage import _reason_key, generate_for_backend, generation_report
from tmax.models.client import ModelError
from tmax.models.scripted_server import Reply, error, scripted_server
from tmax.tasks import read_task, write_task
from tmax.taxonomy import write_specs


def _files(task_dir: Path) -> set[str]:
    return {p.relative_to(task_dir).as_posix() for p in task_dir.rglob("*") if p.is_file()}


def test_a_good_conversation_gives_a_task_shaped_like_the_procedural_ones(tmp_path: Path) -> None:
    spec = make_spec(1)
    check = FakeCheck()
    with scripted_server(stage_responder()) as server:
        settings = settings_for(server.base_url, tmp_path / "cache")
        summary = generate_llm_specs([spec], tmp_path / "out", settings, check=check)
        assert server.request_count == 4  # one request per stage
        stages = [stage_of(r) for r in server.requests]
    assert stages == ["task", "initial_tests", "final_tests", "environment"]
    assert summary["written"] == 1 and summary["quarantined"] == 0
    task_dir = tmp_path / "out" / spec.spec_id
    task = read_task(task_dir)
    procedural = write_task(render_task(spec, 7), tmp_path / "procedural")
    top = {name.split("/")[0] for name in _files(task_dir)}
    assert top == {name.split("/")[0] for name in _files(procedural)}
    assert task.tests["test.sh"].data.decode() == TEST_SH and task.tests["test.sh"].executable
    assert "wc -l" in task.solution["solve.sh"].data.decode()  # type: ignore[index]
    assert task.environment["app/data/input.txt"].data == b"alpha\nbeta\ngamma\n"
    generator = task.meta.generator  # type: ignore[union-attr]
    assert generator["backend"] == "llm" and generator["model"] == "scripted-generator"
    assert set(generator["prompt_hashes"]) >= {"system.md", "stage_task.md", "feedback.md"}
    assert generator["usage"]["requests"] == 4
    assert generator["usage"]["prompt_tokens"] == 400
    assert generator["usage"]["cost_usd"] == (400 * 1.0 + 80 * 2.0) / 1e6
    assert generator["retries"] == 0 and set(generator["timings_sec"]) >= {"task", "checks"}
    assert task.meta.axes == spec.axes()  # type: ignore[union-attr]
    assert json.loads((tmp_path / "out" / "_generation_failures.json").read_text()) == {}
    assert summary["usage"]["cost_usd"] > 0 and summary["cache"]["misses"] == 4


def test_bad_sections_quarantine_their_spec_and_the_run_goes_on(tmp_path: Path) -> None:
    bad = {
        "missing": {"task": GOOD["task"].split("<solution>")[0]},
        "duplicated": {"final_tests": GOOD["final_tests"] * 2},
        "empty": {"initial_tests": "<initial_tests>\n\n</initial_tests>"},
    }
    specs = [make_spec(i, persona) for i, persona in enumerate([*bad, "fine"])]
    with scripted_server(stage_responder(bad)) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", concurrency=4)
        summary = generate_llm_specs(specs, tmp_path / "out", settings, check=FakeCheck())
    assert summary["written"] == 1
    assert summary["quarantine_reasons"] == {
        "missing section": 1,
        "duplicate section": 1,
        "empty section": 1,
    }
    failures = json.loads((tmp_path / "out" / "_generation_failures.json").read_text())
    assert failures[specs[0].spec_id].startswith("missing section: <solution>")
    kept = tmp_path / "out" / QUARANTINE_DIR / specs[1].spec_id
    reason = json.loads((kept / "reason.json").read_text())
    assert reason["reason"] == "duplicate section"
    transcript = json.loads((kept / "transcript.json").read_text())
    assert transcript[-1] == {"role": "assistant", "content": GOOD["final_tests"] * 2}
    assert (tmp_path / "out" / specs[3].spec_id / "task.toml").exists()
    # The report counts the kinds apart (validation prefixes "generation failed: ").
    checks = [{"ok": False, "reason": f"generation failed: {r}"} for r in failures.values()]
    report = generation_report([], checks, _taxonomy())
    assert report["quarantine_reasons"]["generation failed: empty section"] == 1
    assert _reason_key("generation failed: family x failed on spec-1: boom") == "generation failed"


def _taxonomy() -> Any:
    from tmax.taxonomy import load_taxonomy

    return load_taxonomy()


class FailFirst:
    """Answer the first ``count`` requests with ``reply``, then behave well."""

    def __init__(self, reply: Reply, count: int = 1) -> None:
        self.reply, self.count = reply, count
        self.good = stage_responder()
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            self.count -= 1
            failing = self.count >= 0
        return self.reply if failing else self.good(request)


def _one_spec_through(tmp_path: Path, responder: Any, **changes: Any) -> tuple[dict, int]:
    with scripted_server(responder) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", **changes)
        summary = generate_llm_specs([make_spec(1)], tmp_path / "out", settings, check=FakeCheck())
        return summary, server.request_count


def test_429_then_success_is_retried(tmp_path: Path) -> None:
    summary, requests = _one_spec_through(tmp_path, FailFirst(error(429, "slow down"), 2))
    assert summary["written"] == 1 and requests == 6
    assert summary["usage"]["requests"] == 4  # only answered calls are billed


def test_500_then_success_is_retried(tmp_path: Path) -> None:
    summary, requests = _one_spec_through(tmp_path, FailFirst(error(500, "oops")))
    assert summary["written"] == 1 and requests == 5


def test_an_answer_slower_than_the_timeout_is_retried(tmp_path: Path) -> None:
    slow = Reply(content=GOOD["task"], delay_sec=1.5)
    summary, requests = _one_spec_through(tmp_path, FailFirst(slow), timeout_sec=0.4)
    assert summary["written"] == 1 and requests == 5


def test_an_endpoint_that_keeps_failing_stops_the_shard_and_the_work_is_kept(
    tmp_path: Path,
) -> None:
    good = stage_responder()
    served = iter(range(10**6))

    def flaky(request: dict[str, Any]) -> Reply:  # 4 good answers, then only 503s
        return good(request) if next(served) < 4 else error(503, "down")

    specs = [make_spec(1), make_spec(2)]
    with scripted_server(flaky) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", concurrency=1, max_retries=1)
        with pytest.raises(ModelError, match="failed 2 times"):
            generate_llm_specs(specs, tmp_path / "out", settings, check=FakeCheck())
    with scripted_server(stage_responder()) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", concurrency=1)
        summary = generate_llm_specs(specs, tmp_path / "out", settings, check=FakeCheck())
        assert server.request_count == 4  # the first spec's calls came from the cache
    assert summary["written"] == 2 and summary["cache"]["hits"] == 4


def test_a_missing_key_variable_is_named_before_any_work(tmp_path: Path) -> None:
    settings = settings_for("http://127.0.0.1:9/v1", tmp_path, api_key_env="TMAX_NO_SUCH_KEY")
    with pytest.raises(ValueError, match=r"\$TMAX_NO_SUCH_KEY, which is not set"):
        generate_llm_specs([make_spec(1)], tmp_path / "out", settings)


def test_a_dockerfile_that_never_builds_is_quarantined_after_the_retries(tmp_path: Path) -> None:
    check = FakeCheck([CheckResult(False, "image build", "E: Unable to locate package nope")] * 9)
    with scripted_server(stage_responder()) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", build_retries=3)
        summary = generate_llm_specs([make_spec(1)], tmp_path / "out", settings, check=check)
        stages = [stage_of(r) for r in server.requests]
    assert len(check.calls) == 4  # the first build and 3 retries
    assert stages.count("feedback") == 3
    assert summary["quarantine_reasons"] == {"image build failed": 1}
    feedback = server.requests[-1]["messages"][-1]["content"]
    assert "Unable to locate package nope" in feedback and "attempt 3 of 4" in feedback


def test_failing_initial_tests_are_fed_back_then_the_fix_is_kept(tmp_path: Path) -> None:
    check = FakeCheck([CheckResult(False, "initial-state tests", "assert 2 == 3")])
    fixed = GOOD["environment"].replace("gamma\n", "gamma\ndelta\n")
    responder = stage_responder({make_spec(1).persona: {"feedback": fixed}})
    with scripted_server(responder) as server:
        settings = settings_for(server.base_url, tmp_path / "cache")
        summary = generate_llm_specs([make_spec(1)], tmp_path / "out", settings, check=check)
    assert summary["written"] == 1 and len(check.calls) == 2
    task = read_task(tmp_path / "out" / make_spec(1).spec_id)
    assert task.environment["app/data/input.txt"].data.endswith(b"delta\n")
    assert task.meta.generator["retries"] == 1  # type: ignore[union-attr]
    assert "assert 2 == 3" in server.requests[-1]["messages"][-1]["content"]


def test_a_rerun_is_answered_from_the_cache(tmp_path: Path) -> None:
    specs = [make_spec(i) for i in range(3)]
    with scripted_server(stage_responder()) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", concurrency=3)
        first = generate_llm_specs(specs, tmp_path / "first", settings, check=FakeCheck())
        assert server.request_count == 12
        second = generate_llm_specs(specs, tmp_path / "second", settings, check=FakeCheck())
        assert server.request_count == 12  # not one more request
    assert first["cache"]["hit_rate"] == 0.0 and second["cache"]["hit_rate"] == 1.0
    assert second["usage"]["requests"] == 0 and second["usage"]["cached_requests"] == 12
    for spec in specs:
        assert (
            read_task(tmp_path / "second" / spec.spec_id).instruction
            == read_task(tmp_path / "first" / spec.spec_id).instruction
        )


def test_the_dockerfile_is_checked_before_any_build() -> None:
    assert lint_dockerfile("FROM debian\nRUN true\nCOPY app/ /app/\n", {"app/x"}) == []
    problems = lint_dockerfile("RUN true\nCMD ls\nCOPY data/ /d/\n", {"app/x"})
    assert problems == [
        "the first instruction must be FROM",
        "instruction CMD is not allowed; use FROM, RUN, COPY, WORKDIR, ENV",
        "COPY source data/ is not among the supplied files",
    ]


def test_the_workflow_entry_selects_the_llm_backend(tmp_path: Path, config: dict) -> None:
    specs_path = tmp_path / "specs.parquet"
    write_specs([make_spec(0), make_spec(1)], specs_path)
    with scripted_server(stage_responder()) as server:
        config["generation"] = {
            "backend": "llm",
            "max_build_retries": 3,
            "endpoint": {"base_url": server.base_url, "model": "g", "max_concurrency": 2},
            "llm": {"cache_dir": str(tmp_path / "cache"), "backoff_sec": 0.01},
        }
        import tmax.generate.llm.shard as shard

        original = shard.SandboxCheck
        shard.SandboxCheck = lambda *a, **k: FakeCheck()  # type: ignore[assignment,misc]
        try:
            written = generate_for_backend("llm", specs_path, tmp_path / "out", 1, config=config)
        finally:
            shard.SandboxCheck = original  # type: ignore[misc]
    assert written == 2
    summary = json.loads((tmp_path / "out" / "_llm_generation.json").read_text())
    assert summary["model"] == "g" and summary["usage"]["requests"] == 8


def test_file_paths_stay_inside_the_environment_and_keep_hidden_names() -> None:
    assert _environment_path("./app/data.csv") == "app/data.csv"
    assert _environment_path("./.env") == ".env"
    assert _environment_path(" .config/tool.ini ") == ".config/tool.ini"
    for bad in ("/etc/passwd", "../outside", "app/../../x", "Dockerfile", "  "):
        with pytest.raises(Quarantine, match="bad file path"):
            _environment_path(bad)
