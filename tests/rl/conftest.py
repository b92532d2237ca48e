"""Fixtures shared by the engine and rollout tests: the tiny Qwen3, built once per
module, its tokenizer and a transformers engine over it, on one torch thread."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tmax.models.tiny import ensure_tiny_model


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Deterministic and fastest on a shared 2-core machine."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_tiny_model("tiny-rl", parent=tmp_path_factory.getbasetemp() / "tiny-models")


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> Any:
    import transformers

    return transformers.AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def engine(model_dir: Path, tokenizer: Any) -> Any:
    from tmax.rl.engines.local import TransformersEngine

    return TransformersEngine(model_dir, tokenizer)


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """The vLLM environment (./setup.sh builds it): its absence fails the vLLM tests rather
    than skipping them, so a broken install cannot pass CI unnoticed."""
    from tmax.models.serve import ModelServerError, check_vllm_python

    try:
        return check_vllm_python()
    except ModelServerError as error:
        pytest.fail(f"the vLLM tests need the vLLM environment: {error}")


@pytest.fixture(scope="session")
def vllm_pair_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the pair's servers keep their addresses and logs."""
    return tmp_path_factory.mktemp("vllm-pair")


@pytest.fixture(scope="session")
def vllm_pair(
    vllm_python: str, vllm_pair_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """Two real vLLM servers over the tiny Qwen3 (fp32, tied embeddings), shared by the
    vLLM tests of the whole session (each start costs about a minute on 2 cores). The
    last test of tests/rl/test_remote.py kills the second one."""
    from tmax.rl.engines.remote import EngineSettings, VLLMEngine, local_servers, read_key

    model = ensure_tiny_model("tiny-rl", parent=tmp_path_factory.getbasetemp() / "tiny-models")
    # 1 MiB buckets: every push of the 5 MB model streams in several (rl.push_bucket_mb)
    settings = EngineSettings(model_dir=str(model), dtype="float32", max_model_len=512,
                              weight_transfer="tmax_gloo", push_bucket_mb=1)  # fmt: skip
    directory = vllm_pair_dir
    with local_servers(directory, settings, 2) as urls:
        engine = VLLMEngine(urls, read_key(directory), settings=settings, host="127.0.0.1")
        yield engine
        engine.close()
