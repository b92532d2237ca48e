"""Model servers: a real ``transformers serve`` on the taught tiny Qwen3, and vLLM's command."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tmax.models.serve import ModelServer, ModelServerError, free_port
from tmax.models.tiny import bash_tool_call, ensure_tiny_model, smoke_examples

openai = pytest.importorskip("openai")
pytest.importorskip("torch")
pytest.importorskip("transformers")

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def port_accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke-taught model, shared with test_tiny.py through the session's temp folder."""
    parent = tmp_path_factory.getbasetemp() / "tiny-models"
    return ensure_tiny_model("tiny-qwen3", parent=parent, teach=smoke_examples())


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    log_path = tmp_path_factory.mktemp("serve") / "server.log"
    with ModelServer.transformers(model_dir, log_path=log_path, threads=1) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)


# ------------------------------------------------------------------------------------------
# A real transformers serve


@pytest.mark.slow
def test_the_server_runs_with_the_threads_it_was_given(
    server: ModelServer, model_dir: Path
) -> None:
    """An evaluation job's server takes the job's threads, not every core."""
    assert server.process is not None
    environ = Path(f"/proc/{server.process.pid}/environ").read_bytes().split(b"\0")
    assert b"OMP_NUM_THREADS=1" in environ
    with pytest.raises(ValueError, match="threads must be at least 1"):
        ModelServer.transformers(model_dir, threads=0)


@pytest.mark.slow
def test_served_id_is_the_folder_name(server: ModelServer, model_dir: Path) -> None:
    assert server.model == model_dir.name == "tiny-qwen3"
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
        listed = [entry["id"] for entry in json.load(response)["data"]]
    assert listed == ["tiny-qwen3"]


@pytest.mark.slow
def test_openai_client_gets_the_taught_bash_tool_call(
    server: ModelServer, client: openai.OpenAI
) -> None:
    example = smoke_examples()[0]
    assert example.target == bash_tool_call(SUBMIT)
    response = client.chat.completions.create(
        model=server.model, messages=example.messages, tools=example.tools, temperature=0
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert not choice.message.content
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "bash"
    assert json.loads(call.function.arguments) == {"command": SUBMIT}


@pytest.mark.slow
def test_plain_chat_returns_content_and_usage(server: ModelServer, client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Say hi."}],
        max_tokens=40,
        temperature=0,
    )
    choice = response.choices[0]
    assert choice.message.content == "Hello! I am a tiny model."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )


@pytest.mark.slow
def test_a_tool_result_turn_round_trips_through_the_template(
    server: ModelServer, client: openai.OpenAI
) -> None:
    """The server's rendering of an OpenAI tool-call history matches the taught prompt."""
    example = smoke_examples()[2]
    assert example.messages[-1]["role"] == "tool"
    response = client.chat.completions.create(
        model=server.model, messages=example.messages, tools=example.tools, temperature=0
    )
    assert response.choices[0].message.content == example.target
    assert response.choices[0].finish_reason == "stop"


UNTAUGHT = [{"role": "user", "content": "Tell me about the weather."}]
"""A prompt the smoke model was not taught: its answer is close to uniform noise."""


def _answers(client: openai.OpenAI, model: str, **sampling: float) -> list[str]:
    """The chat answer to :data:`UNTAUGHT` for seeds 1 to 4."""
    return [
        client.chat.completions.create(
            model=model, messages=UNTAUGHT, max_tokens=16, seed=seed, **sampling
        )
        .choices[0]
        .message.content
        for seed in range(1, 5)
    ]


@pytest.mark.slow
def test_a_request_samples_at_its_temperature_and_its_seed_repeats_it(
    server: ModelServer, client: openai.OpenAI
) -> None:
    sampled = _answers(client, server.model, temperature=0.7)
    assert len(set(sampled)) > 1, "four seeds at temperature 0.7 gave one answer"
    assert _answers(client, server.model, temperature=0.7) == sampled  # same seeds, same answers
    greedy = _answers(client, server.model, temperature=0)
    assert len(set(greedy)) == 1, "temperature 0 must be greedy whatever the seed"
    assert greedy[0] not in sampled[1:] or len(set(sampled)) > 1


@pytest.mark.slow
def test_a_checkpoint_saved_greedy_still_samples_when_a_request_asks(
    model_dir: Path, tmp_path: Path
) -> None:
    """Saved ``do_sample: false`` and ``top_k: 1`` (greedy twice over) change nothing: the
    request's temperature decides."""
    copy = tmp_path / "tiny-greedy"
    shutil.copytree(model_dir, copy)
    saved = json.loads((copy / "generation_config.json").read_text())
    saved.update(do_sample=False, top_k=1, temperature=0.1)
    (copy / "generation_config.json").write_text(json.dumps(saved))
    with ModelServer.transformers(copy, log_path=tmp_path / "server.log", threads=1) as served:
        greedy_client = openai.OpenAI(base_url=served.base_url, api_key="none", max_retries=0)
        assert len(set(_answers(greedy_client, served.model, temperature=1.0))) > 1


@pytest.mark.slow
def test_a_tool_call_the_server_cannot_parse_comes_back_as_text(
    server: ModelServer, client: openai.OpenAI
) -> None:
    """Cut off after 6 tokens, the taught call is half a JSON object: upstream's parser
    raises (HTTP 500, an infrastructure failure to any client); served by us, the reply
    is the text, with no tool call, for the harness to count as a format error."""
    example = smoke_examples()[0]
    response = client.chat.completions.create(
        model=server.model, messages=example.messages, tools=example.tools, temperature=0,
        max_tokens=6,
    )  # fmt: skip
    choice = response.choices[0]
    assert choice.message.tool_calls is None
    assert choice.message.content.startswith('<tool_call>\n{"name"')
    assert choice.finish_reason == "length"


@pytest.mark.slow
def test_external_endpoint_is_checked_but_not_owned(server: ModelServer) -> None:
    with ModelServer.external(server.base_url, server.model) as external:
        assert external.command() == []
        assert external.base_url == server.base_url
    assert port_accepts(server.port)  # leaving did not stop someone else's server

    with pytest.raises(ModelServerError, match=r"does not serve model 'gpt-4o'.*tiny-qwen3"):
        ModelServer.external(server.base_url, "gpt-4o").start()


def test_external_endpoint_that_never_answers_times_out() -> None:
    dead = ModelServer.external(f"http://127.0.0.1:{free_port()}/v1", "m", ready_timeout=1)
    with pytest.raises(ModelServerError, match="was not ready after 1 s"):
        dead.start()


@pytest.mark.slow
def test_server_is_stopped_after_the_block_even_on_error(model_dir: Path, tmp_path: Path) -> None:
    server = ModelServer.transformers(model_dir, log_path=tmp_path / "server.log")
    with pytest.raises(KeyError), server:
        assert server.running
        assert port_accepts(server.port)
        raise KeyError("the caller failed")
    assert not server.running
    assert not port_accepts(server.port)
    assert "Uvicorn running" in (tmp_path / "server.log").read_text()


# ------------------------------------------------------------------------------------------
# Failures name what failed


def test_a_missing_model_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelServerError, match="does not exist"):
        ModelServer.transformers(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelServerError, match=r"has no config\.json"):
        ModelServer.transformers(tmp_path / "empty")


@pytest.mark.slow
def test_a_broken_model_folder_reports_the_server_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    server = ModelServer.transformers(broken, log_path=tmp_path / "server.log")
    with pytest.raises(ModelServerError) as failure, server:
        pytest.fail("a broken model must not become ready")
    message = str(failure.value)
    assert "exited with code" in message
    assert "tmax.models.transformers_serve serve broken" in message
    assert "Error:" in message  # the log tail ends with the exception that killed it
    assert not server.running


def test_a_port_in_use_is_reported(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        port = occupant.getsockname()[1]
        server = ModelServer.transformers(tmp_path / "m", port=port)
        with pytest.raises(ModelServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()


def test_a_missing_executable_is_named_with_a_hint() -> None:
    server = ModelServer(
        model="m", port=free_port(), argv=["tmax-no-such-server"], missing_hint="install it"
    )
    with pytest.raises(ModelServerError, match=r"'tmax-no-such-server'.*install it"):
        server.start()


def test_starting_vllm_without_its_environment_says_how_to_install_it(tmp_path: Path) -> None:
    server = ModelServer.vllm("Qwen/Qwen3-8B", python=str(tmp_path / "no-python"))
    with pytest.raises(ModelServerError, match=r"no-python.*setup\.sh.*TMAX_VLLM_PYTHON"):
        server.start()


# ------------------------------------------------------------------------------------------
# vLLM's command


def test_vllm_command_serves_the_name_with_native_tool_calls() -> None:
    server = ModelServer.vllm(
        "/models/Qwen3-8B",
        served_name="qwen3-8b",
        port=8123,
        tensor_parallel_size=4,
        max_model_len=32768,
        reasoning_parser="qwen3",
        extra_args=["--gpu-memory-utilization", "0.85", "--enforce-eager"],
        python="/envs/vllm/bin/python",
    )
    assert server.command() == [
        "/envs/vllm/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/Qwen3-8B",
        "--served-model-name",
        "qwen3-8b",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--reasoning-parser",
        "qwen3",
        "--tensor-parallel-size",
        "4",
        "--max-model-len",
        "32768",
        "--gpu-memory-utilization",
        "0.85",
        "--enforce-eager",
    ]
    assert server.model == "qwen3-8b"
    assert server.base_url == "http://127.0.0.1:8123/v1"


def test_vllm_runs_from_its_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMAX_VLLM_PYTHON", "/opt/vllm/bin/python")
    assert ModelServer.vllm("m").command()[:3] == [
        "/opt/vllm/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
    ]


def test_vllm_defaults_serve_the_model_path_on_a_free_port() -> None:
    server = ModelServer.vllm("Qwen/Qwen3.5-9B", tool_call_parser="qwen3_xml")
    argv = server.command()
    assert server.model == "Qwen/Qwen3.5-9B"
    assert argv[argv.index("--served-model-name") + 1] == "Qwen/Qwen3.5-9B"
    assert argv[argv.index("--tool-call-parser") + 1] == "qwen3_xml"
    assert argv[argv.index("--port") + 1] == str(server.port)
    assert "--max-model-len" not in argv
    assert "--reasoning-parser" not in argv


def test_transformers_command(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text("{}")
    server = ModelServer.transformers(tmp_path / "tiny", port=8001, continuous_batching=True)
    assert server.command() == [
        sys.executable,
        "-m",
        "tmax.models.transformers_serve",
        "serve",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "8001",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--continuous-batching",
    ]
    assert server.model == "tiny"
