"""The LLM generator against a real `transformers serve` with the tiny offline
Qwen3: the protocol end to end (the openai client, the chat template, usage). The
random model writes no sections, so its spec is quarantined with a parse reason,
the raw answer kept, and the shard finishes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.generate.llm_support import FakeCheck, make_spec, settings_for
from tmax.generate.llm.pipeline import QUARANTINE_DIR
from tmax.generate.llm.shard import generate_llm_specs
from tmax.models.serve import ModelServer
from tmax.models.tiny import ensure_tiny_model

pytest.importorskip("openai")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    parent = tmp_path_factory.mktemp("models")
    model_dir = ensure_tiny_model("tiny-generator", parent=parent)
    with ModelServer.transformers(model_dir, log_path=parent / "server.log") as served:
        yield served


def test_a_served_tiny_model_is_asked_and_its_garbage_is_quarantined(
    server: ModelServer, tmp_path: Path
) -> None:
    settings = settings_for(
        server.base_url, tmp_path / "cache", model=server.model, max_tokens=24, timeout_sec=120
    )
    spec = make_spec(1)
    summary = generate_llm_specs([spec], tmp_path / "out", settings, check=FakeCheck())
    assert summary["written"] == 0
    assert summary["quarantine_reasons"] == {"missing section": 1}
    assert summary["usage"]["requests"] == 1 and summary["usage"]["completion_tokens"] > 0
    kept = tmp_path / "out" / QUARANTINE_DIR / spec.spec_id
    transcript = json.loads((kept / "transcript.json").read_text())
    assert [m["role"] for m in transcript] == ["system", "user", "assistant"]
    # A rerun is answered from the cache: no second request reaches the server.
    again = generate_llm_specs([spec], tmp_path / "again", settings, check=FakeCheck())
    assert again["usage"]["requests"] == 0 and again["cache"]["hit_rate"] == 1.0
